// Plain TypeScript kernels: the fallback when the native addon is missing, and the oracle the
// native kernels are tested against. Written to be obviously correct first: every sum is
// accumulated in float64 (JS numbers) and rounded to float32 once, on store. Only sgemm is
// tiled, because it dominates and the naive loop is about twice as slow.
import { bf16Bits, portableGemmBf16, toBf16, widenBf16 } from './bf16.js';
import { dequantizeInt8, dequantizeInt8Bf16, gemmInt8, INT8_BLOCK, quantizeInt8 } from './int8.js';
import type { Kernels } from './kernels.js';

// sgemm computes C in tiles of 4 rows x COLS columns, accumulated in float64: each element of
// op(B) that is loaded serves 4 rows of C (the main cost in V8, which does not vectorise), and
// the 4 accumulator rows (8 KiB) stay in L1.
const COLS = 256;

function sgemm(
  transA: boolean,
  transB: boolean,
  M: number,
  N: number,
  K: number,
  alpha: number,
  A: Float32Array,
  lda: number,
  B: Float32Array,
  ldb: number,
  beta: number,
  C: Float32Array,
  ldc: number,
): void {
  // op(A)[i,p] = A[i * aRowStep + p * aColStep].
  const aRowStep = transA ? 1 : lda;
  const aColStep = transA ? lda : 1;
  // The inner loop walks a row of op(B), so a transposed B is copied to row-major [K,N] first.
  const b = transB ? transpose(B, ldb, N, K) : B;
  const bStride = transB ? N : ldb;
  const accs = [
    new Float64Array(COLS),
    new Float64Array(COLS),
    new Float64Array(COLS),
    new Float64Array(COLS),
  ] as const;
  const [acc0, acc1, acc2, acc3] = accs;
  for (let j0 = 0; j0 < N; j0 += COLS) {
    const cols = Math.min(COLS, N - j0);
    for (let i0 = 0; i0 < M; i0 += 4) {
      // Past the last row of C the tile repeats that row: wasted work on the last tile only,
      // in exchange for a single code path. (Plain consts: V8 keeps these as integers.)
      const a0 = i0 * aRowStep;
      const a1 = Math.min(i0 + 1, M - 1) * aRowStep;
      const a2 = Math.min(i0 + 2, M - 1) * aRowStep;
      const a3 = Math.min(i0 + 3, M - 1) * aRowStep;
      for (const acc of accs) acc.fill(0);
      for (let p = 0; p < K; p++) {
        const aCol = p * aColStep;
        const x0 = A[a0 + aCol]!;
        const x1 = A[a1 + aCol]!;
        const x2 = A[a2 + aCol]!;
        const x3 = A[a3 + aCol]!;
        const bRow = p * bStride + j0;
        for (let j = 0; j < cols; j++) {
          const bj = b[bRow + j]!;
          acc0[j]! += x0 * bj;
          acc1[j]! += x1 * bj;
          acc2[j]! += x2 * bj;
          acc3[j]! += x3 * bj;
        }
      }
      for (let r = 0; r < Math.min(4, M - i0); r++) {
        const cRow = (i0 + r) * ldc + j0;
        for (let j = 0; j < cols; j++) C[cRow + j] = scaled(alpha * accs[r]![j]!, beta, C[cRow + j]!);
      }
    }
  }
}

/** Row-major [cols, rows] copy of the row-major [rows, cols] matrix X with row stride ld. */
function transpose(X: Float32Array, ld: number, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) out[c * rows + r] = X[r * ld + c]!;
  }
  return out;
}

/** value + beta * old, where beta == 0 ignores old entirely (NaN included), as BLAS does. */
function scaled(value: number, beta: number, old: number): number {
  return beta === 0 ? value : value + beta * old;
}

function sgemv(
  trans: boolean,
  M: number,
  N: number,
  alpha: number,
  A: Float32Array,
  lda: number,
  x: Float32Array,
  beta: number,
  y: Float32Array,
): void {
  if (!trans) {
    for (let i = 0; i < M; i++) {
      let sum = 0;
      for (let j = 0; j < N; j++) sum += A[i * lda + j]! * x[j]!;
      y[i] = scaled(alpha * sum, beta, y[i]!);
    }
    return;
  }
  const acc = new Float64Array(N);
  for (let i = 0; i < M; i++) {
    const xi = x[i]!;
    for (let j = 0; j < N; j++) acc[j]! += A[i * lda + j]! * xi;
  }
  for (let j = 0; j < N; j++) y[j] = scaled(alpha * acc[j]!, beta, y[j]!);
}

/** A float32 value as `out` stores it: itself, or its bf16 bits in a Uint16Array. */
function stored(out: Float32Array | Uint16Array, x: number): number {
  return out instanceof Uint16Array ? bf16Bits(x) : x;
}

function rmsnorm(
  out: Float32Array | Uint16Array,
  x: Float32Array,
  weight: Float32Array,
  rows: number,
  dim: number,
  eps: number,
): void {
  for (let r = 0; r < rows; r++) {
    const row = r * dim;
    let sumSquares = 0;
    for (let i = 0; i < dim; i++) sumSquares += x[row + i]! * x[row + i]!;
    const invRms = 1 / Math.sqrt(sumSquares / dim + eps);
    for (let i = 0; i < dim; i++) out[row + i] = stored(out, x[row + i]! * invRms * weight[i]!);
  }
}

function siluMul(out: Float32Array | Uint16Array, gate: Float32Array, up: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = stored(out, (gate[i]! / (1 + Math.exp(-gate[i]!))) * up[i]!);
}

function rope(
  x: Float32Array,
  rows: number,
  heads: number,
  headDim: number,
  positions: Int32Array,
  invFreq: Float32Array,
): void {
  const half = headDim / 2;
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < half; i++) {
      // The angle is rounded to float32 as in the Hugging Face implementation (and the addon).
      const angle = Math.fround(positions[r]! * invFreq[i]!);
      cos[i] = Math.cos(angle);
      sin[i] = Math.sin(angle);
    }
    for (let h = 0; h < heads; h++) {
      const lo = (r * heads + h) * headDim;
      const hi = lo + half;
      for (let i = 0; i < half; i++) {
        const a = x[lo + i]!;
        const b = x[hi + i]!;
        x[lo + i] = a * cos[i]! - b * sin[i]!;
        x[hi + i] = b * cos[i]! + a * sin[i]!;
      }
    }
  }
}

function attention(
  out: Float32Array,
  q: Float32Array,
  kRows: Float32Array | Uint16Array,
  vRows: Float32Array | Uint16Array,
  Tq: number,
  start: number,
  nHeads: number,
  nKvHeads: number,
  headDim: number,
  kvStride: number,
  scale: number,
): void {
  if (kRows instanceof Uint16Array !== vRows instanceof Uint16Array)
    throw new TypeError('attention: k and v must both be Float32Arrays or both Uint16Arrays of bf16 bits');
  const k = kRows instanceof Uint16Array ? widenBf16(kRows, kRows.length) : kRows;
  const v = vRows instanceof Uint16Array ? widenBf16(vRows, vRows.length) : vRows;
  const group = nHeads / nKvHeads;
  const qStride = nHeads * headDim;
  const probs = new Float64Array(start + Tq);
  const acc = new Float64Array(headDim);
  for (let t = 0; t < Tq; t++) {
    const nKeys = start + t + 1;
    for (let h = 0; h < nHeads; h++) {
      const qOff = t * qStride + h * headDim;
      const kvOff = Math.floor(h / group) * headDim;
      let max = -Infinity;
      for (let j = 0; j < nKeys; j++) {
        let dot = 0;
        for (let d = 0; d < headDim; d++) dot += q[qOff + d]! * k[j * kvStride + kvOff + d]!;
        probs[j] = dot * scale;
        max = Math.max(max, probs[j]!);
      }
      let sum = 0;
      for (let j = 0; j < nKeys; j++) {
        probs[j] = Math.exp(probs[j]! - max);
        sum += probs[j]!;
      }
      acc.fill(0);
      for (let j = 0; j < nKeys; j++) {
        for (let d = 0; d < headDim; d++) acc[d]! += probs[j]! * v[j * kvStride + kvOff + d]!;
      }
      for (let d = 0; d < headDim; d++) out[qOff + d] = acc[d]! / sum;
    }
  }
}

/** attention on the rows' float32 values (dequantizeInt8), read as far as the call sees. */
const attentionInt8: Kernels['attentionInt8'] = (
  out,
  q,
  k,
  kScales,
  v,
  vScales,
  Tq,
  start,
  H,
  KV,
  hd,
  kvStride,
  scale,
) => {
  if (hd % INT8_BLOCK !== 0 || kvStride % INT8_BLOCK !== 0)
    throw new RangeError(`attentionInt8: headDim and kvStride must be multiples of ${INT8_BLOCK}`);
  const read = (start + Tq) * kvStride;
  if (k.length < read || v.length < read || kScales.length < read / INT8_BLOCK || vScales.length < read / INT8_BLOCK)
    throw new RangeError(`attentionInt8: k, v or their scales hold fewer than (start+Tq)*kvStride = ${read} values`);
  const kf = dequantizeInt8(k, kScales, read),
    vf = dequantizeInt8(v, vScales, read);
  attention(out, q, kf, vf, Tq, start, H, KV, hd, kvStride, scale);
};

// ---- training kernels ---------------------------------------------------------------------

function adamw(
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  n: number,
  lr: number,
  beta1: number,
  beta2: number,
  eps: number,
  weightDecay: number,
  bc1: number,
  bc2: number,
  gradScale: number,
  pBf16: Uint16Array | null,
  zeroGrad: boolean,
): void {
  for (let i = 0; i < n; i++) {
    const gi = gradScale === 1 ? g[i]! : Math.fround(g[i]! * gradScale);
    const mi = beta1 * m[i]! + (1 - beta1) * gi;
    const vi = beta2 * v[i]! + (1 - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i]! -= lr * (mi / bc1 / (Math.sqrt(vi / bc2) + eps) + weightDecay * p[i]!);
    if (pBf16) pBf16[i] = bf16Bits(p[i]!);
    if (zeroGrad) g[i] = 0;
  }
}

function sumSquares(x: Float32Array, n: number): number {
  let sum = 0;
  for (let i = 0; i < n; i++) sum += x[i]! * x[i]!;
  return sum;
}

/** As the native kernel, with e^ in float64; exported as sampleToken's default (no kernels at hand). */
export function temperedWeights(weights: Float64Array, logits: Float32Array, V: number, invT: number): number {
  if (!(invT > 0)) throw new RangeError(`temperedWeights: invT must be a positive number, got ${invT}`);
  const scale = Math.min(invT, 3.4028234663852886e38); // float32's largest: the native kernel's limit
  let max = -Infinity;
  for (let i = 0; i < V; i++) if (logits[i]! > max) max = logits[i]!;
  let total = 0;
  for (let i = 0; i < V; i++) {
    const w = Math.exp((logits[i]! - max) * scale);
    weights[i] = w;
    total += w;
  }
  return total;
}

function rmsnormBackward(
  dx: Float32Array,
  dw: Float32Array | null,
  dy: Float32Array,
  x: Float32Array,
  w: Float32Array,
  rows: number,
  dim: number,
  eps: number,
  accumulate: boolean,
): void {
  // dw is summed over all rows in float64 and added once.
  const dwSum = dw ? new Float64Array(dim) : null;
  for (let r = 0; r < rows; r++) {
    const row = r * dim;
    let sumSquares = 0;
    let dot = 0; // sum(w * dy * x)
    for (let i = 0; i < dim; i++) {
      sumSquares += x[row + i]! * x[row + i]!;
      dot += w[i]! * dy[row + i]! * x[row + i]!;
    }
    const rstd = 1 / Math.sqrt(sumSquares / dim + eps);
    const c = (rstd * rstd * rstd * dot) / dim;
    // dw before dx, so that dx may alias dy or x.
    if (dwSum) for (let i = 0; i < dim; i++) dwSum[i]! += dy[row + i]! * x[row + i]! * rstd;
    for (let i = 0; i < dim; i++) {
      const grad = rstd * w[i]! * dy[row + i]! - x[row + i]! * c;
      dx[row + i] = accumulate ? dx[row + i]! + grad : grad;
    }
  }
  if (dw && dwSum) for (let i = 0; i < dim; i++) dw[i]! += dwSum[i]!;
}

function siluMulBackward(
  dg: Float32Array | Uint16Array,
  du: Float32Array | Uint16Array,
  da: Float32Array,
  gate: Float32Array,
  up: Float32Array,
  n: number,
): void {
  if (dg instanceof Uint16Array !== du instanceof Uint16Array)
    throw new TypeError('siluMulBackward: dg and du must be both Float32Arrays or both Uint16Arrays of bf16 bits');
  for (let i = 0; i < n; i++) {
    const z = gate[i]!;
    const u = up[i]!;
    const d = da[i]!;
    const s = 1 / (1 + Math.exp(-z));
    dg[i] = stored(dg, d * u * s * (1 + z * (1 - s)));
    du[i] = stored(du, d * z * s);
  }
}

function logitsStats(lse: Float32Array, entropy: Float32Array, logits: Float32Array, rows: number, V: number): void {
  for (let r = 0; r < rows; r++) {
    const row = r * V;
    let max = -Infinity;
    for (let i = 0; i < V; i++) if (logits[row + i]! > max) max = logits[row + i]!;
    // With y = z - max: lse = max + log(sum e^y), entropy = lse - sum p z = log(sum) - sum(e^y y) / sum,
    // which avoids the cancellation of max against sum p z.
    let sum = 0;
    let weighted = 0;
    for (let i = 0; i < V; i++) {
      const y = logits[row + i]! - max;
      const e = Math.exp(y);
      sum += e;
      // p log p -> 0 as p -> 0; skipping e = 0 keeps a masked (-inf) logit from adding 0 * -inf.
      if (e !== 0) weighted += e * y;
    }
    const logSum = Math.log(sum);
    lse[r] = max + logSum;
    entropy[r] = logSum - weighted / sum;
  }
}

function logitsBackward(
  logits: Float32Array,
  rows: number,
  V: number,
  lse: Float32Array,
  entropy: Float32Array,
  gSum: Float32Array,
  gEntropy: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const row = r * V;
    const l = lse[r]!;
    const h = entropy[r]!;
    const gs = gSum[r]!;
    const gh = gEntropy[r]!;
    for (let i = 0; i < V; i++) {
      const lp = logits[row + i]! - l;
      const p = Math.exp(lp);
      // p = 0 (a masked logit): the limit 0, not 0 * -inf.
      logits[row + i] = p === 0 ? 0 : -p * (gs + gh * (lp + h));
    }
  }
}

function causalSoftmaxRows(S: Float32Array, lse: Float32Array, rows: number, cols: number, firstRow: number): void {
  const e = new Float64Array(cols);
  for (let i = 0; i < rows; i++) {
    const row = i * cols,
      visible = firstRow + i + 1;
    let max = -Infinity;
    for (let j = 0; j < visible; j++) max = Math.max(max, S[row + j]!);
    let sum = 0;
    for (let j = 0; j < visible; j++) {
      e[j] = Math.exp(S[row + j]! - max);
      sum += e[j]!;
    }
    for (let j = 0; j < visible; j++) S[row + j] = e[j]! / sum;
    S.fill(0, row + visible, row + cols);
    lse[i] = max + Math.log(sum);
  }
}

function causalSoftmaxBackwardRows(
  dP: Float32Array,
  S: Float32Array,
  lse: Float32Array,
  dO: Float32Array,
  O: Float32Array,
  rows: number,
  cols: number,
  firstRow: number,
  headDim: number,
  stride: number,
): void {
  for (let i = 0; i < rows; i++) {
    const row = i * cols,
      visible = firstRow + i + 1;
    let dot = 0;
    for (let d = 0; d < headDim; d++) dot += dO[i * stride + d]! * O[i * stride + d]!;
    for (let j = 0; j < visible; j++) {
      // P rounded to float32 first, as stored, so that dS uses the P the caller's dV uses.
      const p = Math.fround(Math.exp(S[row + j]! - lse[i]!));
      S[row + j] = p;
      dP[row + j] = p * (dP[row + j]! - dot);
    }
    S.fill(0, row + visible, row + cols);
    dP.fill(0, row + visible, row + cols);
  }
}

export const portableKernels: Kernels = {
  name: 'portable',
  info: { gemm: 'typescript', isa: 'unknown', bf16Instructions: false, int8Dot: 'typescript' },
  sgemm,
  gemmBf16: portableGemmBf16(sgemm),
  toBf16,
  quantizeInt8,
  dequantizeInt8Bf16,
  gemmInt8,
  sgemv,
  rmsnorm,
  siluMul,
  rope,
  attention,
  attentionInt8,
  adamw,
  sumSquares,
  temperedWeights,
  rmsnormBackward,
  siluMulBackward,
  logitsStats,
  logitsBackward,
  causalSoftmaxRows,
  causalSoftmaxBackwardRows,
  setThreads: () => {},
  threads: () => 1,
};
