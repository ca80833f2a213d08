// The training kernels (the backward passes and the optimizer): both implementations against
// float64 mathematics written here (central finite differences of float64 forwards, AdamW by
// hand), then the native kernels against the portable ones on awkward sizes, and the native
// argument checks. As in kernels.test.ts, OPENCLAW_RL_KERNELS=portable tests only the portable
// kernels; otherwise a missing addon fails the native tests with instructions.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { toBf16 } from '../src/engine/local/kernels/bf16.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

/** The implementations the mathematical checks run on. */
function implementations(): Kernels[] {
  return skipNative ? [portableKernels] : [portableKernels, native()];
}

// ---- inputs -------------------------------------------------------------------------------

const random = randomSource(20261130);
const randomArray = (n: number, scale = 1): Float32Array => randomArrayFrom(random, n, scale);

function randomIndex(n: number): number {
  return Math.min(n - 1, Math.floor(((random() + 1) / 2) * n));
}

// ---- comparison ---------------------------------------------------------------------------

/** Kernel against kernel (both float32 on store). */
const TOLERANCE = 1e-5;
/** A float32 kernel against central finite differences of a float64 forward. */
const FD_TOLERANCE = 1e-4;

/** |actual[i] - expected[i]| <= bound(i) for every i; NaN anywhere fails. */
function assertWithin(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  bound: (i: number) => number,
  what: string,
): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const error = Math.abs(actual[i]! - expected[i]!);
    assert.ok(
      error <= bound(i),
      `${what}: element ${i} is ${actual[i]}, expected ${expected[i]} (error ${error} > ${bound(i)})`,
    );
  }
}

/** max |actual - expected| <= tolerance * max |expected| (+ floor): for sums and differences that cancel. */
function assertCloseNorm(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  what: string,
  tolerance = TOLERANCE,
  floor = 1e-30,
): void {
  let scale = 0;
  for (let i = 0; i < expected.length; i++) scale = Math.max(scale, Math.abs(expected[i]!));
  assertWithin(actual, expected, () => tolerance * scale + floor, what);
}

/** |actual - expected| <= tolerance * |expected| + floor, element by element. */
function assertCloseElementwise(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  what: string,
  tolerance = TOLERANCE,
  floor = 1e-30,
): void {
  assertWithin(actual, expected, (i) => tolerance * Math.abs(expected[i]!) + floor, what);
}

function maxAbs(a: ArrayLike<number>): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]!));
  return max;
}

/** Elementwise a - b in float64. */
function minus(a: ArrayLike<number>, b: ArrayLike<number>): Float64Array {
  return Float64Array.from(a, (value, i) => value - b[i]!);
}

// ---- float64 forwards and finite differences (independent of portable.ts) ---------------------

/** Central finite differences of f at x0, in float64. */
function numericGradient(f: (x: Float64Array) => number, x0: ArrayLike<number>, h: number): Float64Array {
  const x = Float64Array.from(x0);
  const grad = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const xi = x[i]!;
    x[i] = xi + h;
    const plus = f(x);
    x[i] = xi - h;
    const minusValue = f(x);
    x[i] = xi;
    grad[i] = (plus - minusValue) / (2 * h);
  }
  return grad;
}

// Inputs are O(1) and the forwards are float64: with h = 1e-5 the truncation error (~h^2) and
// the rounding error (~1e-16 / h) are both near 1e-10, far below the float32 kernels' own.
const H = 1e-5;

function rmsnorm64(x: ArrayLike<number>, w: ArrayLike<number>, rows: number, dim: number, eps: number): Float64Array {
  const y = new Float64Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[r * dim + i]! ** 2;
    const rstd = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) y[r * dim + i] = x[r * dim + i]! * rstd * w[i]!;
  }
  return y;
}

function silu64(z: number): number {
  return z / (1 + Math.exp(-z));
}

/** A block of score rows [rows, cols]: row i sees columns 0..firstRow+i. Its causal softmax and log-sum-exp. */
function causalSoftmaxRows64(
  S: ArrayLike<number>,
  rows: number,
  cols: number,
  firstRow: number,
): { P: Float64Array; lse: Float64Array } {
  const P = new Float64Array(rows * cols),
    lse = new Float64Array(rows);
  for (let i = 0; i < rows; i++) {
    const visible = firstRow + i + 1;
    let max = -Infinity;
    for (let j = 0; j < visible; j++) max = Math.max(max, S[i * cols + j]!);
    let sum = 0;
    for (let j = 0; j < visible; j++) sum += Math.exp(S[i * cols + j]! - max);
    for (let j = 0; j < visible; j++) P[i * cols + j] = Math.exp(S[i * cols + j]! - max) / sum;
    lse[i] = max + Math.log(sum);
  }
  return { P, lse };
}

/** log-softmax of one row, and its entropy. */
function logSoftmax64(
  z: ArrayLike<number>,
  offset: number,
  V: number,
): { lp: Float64Array; lse: number; entropy: number } {
  let max = -Infinity;
  for (let i = 0; i < V; i++) max = Math.max(max, z[offset + i]!);
  let sum = 0;
  for (let i = 0; i < V; i++) sum += Math.exp(z[offset + i]! - max);
  const lse = max + Math.log(sum);
  const lp = new Float64Array(V);
  let entropy = 0;
  for (let i = 0; i < V; i++) {
    lp[i] = z[offset + i]! - lse;
    entropy -= Math.exp(lp[i]!) * lp[i]!;
  }
  return { lp, lse, entropy };
}

function dot64(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * b[i]!;
  return sum;
}

// ---- both implementations against the mathematics ------------------------------------------

describe('training kernels against float64 mathematics', () => {
  test('rmsnormBackward is the gradient of sum(dy * rmsnorm(x, w)) (dx written or added, dw null or added)', () => {
    for (const [rows, dim, eps, xScale] of [
      [1, 1, 0.5, 1],
      [3, 7, 1e-6, 2],
      [2, 33, 0.1, 0.3],
      [4, 16, 1e-5, 1],
    ] as const) {
      const x = randomArray(rows * dim, xScale);
      const w = randomArray(dim);
      const dy = randomArray(rows * dim);
      const loss = (xv: ArrayLike<number>, wv: ArrayLike<number>) => dot64(dy, rmsnorm64(xv, wv, rows, dim, eps));
      const gradX = numericGradient((xv) => loss(xv, w), x, H);
      const gradW = numericGradient((wv) => loss(x, wv), w, H);
      const terms = rmsnormBackwardTerms(dy, x, w, rows, dim, eps);
      for (const k of implementations()) {
        const what = `${k.name} rmsnormBackward ${rows}x${dim} eps ${eps}`;
        // The forward being differentiated is the kernels' rmsnorm.
        const y = new Float32Array(rows * dim);
        k.rmsnorm(y, x, w, rows, dim, eps);
        assertCloseNorm(y, rmsnorm64(x, w, rows, dim, eps), `${what}: forward`);
        for (const accumulate of [false, true]) {
          for (const withDw of [false, true]) {
            const dx0 = accumulate ? randomArray(rows * dim) : new Float32Array(rows * dim).fill(NaN);
            const dx = Float32Array.from(dx0);
            const dw0 = randomArray(dim);
            const dw = withDw ? Float32Array.from(dw0) : null;
            k.rmsnormBackward(dx, dw, dy, x, w, rows, dim, eps, accumulate);
            const tag = `${what} accumulate ${accumulate} dw ${withDw ? 'given' : 'null'}`;
            // What was added to is subtracted again, its float32 rounding allowed for; so is the
            // kernels' float32 rounding of terms that cancel (completely when dim = 1).
            const dxFloor = TOLERANCE * maxAbs(terms.dxRow) + (accumulate ? 1.2e-7 * maxAbs(dx) : 0);
            assertCloseNorm(accumulate ? minus(dx, dx0) : dx, gradX, `${tag}: dx`, FD_TOLERANCE, dxFloor);
            if (dw)
              assertCloseNorm(
                minus(dw, dw0),
                gradW,
                `${tag}: dw`,
                FD_TOLERANCE,
                TOLERANCE * maxAbs(terms.dw) + 1.2e-7 * maxAbs(dw),
              );
          }
        }
      }
    }
  });

  test('siluMulBackward is the gradient of sum(da * silu(gate) * up)', () => {
    for (const n of [1, 13]) {
      const gate = randomArray(n, 6);
      if (n > 1) gate[1] = 0;
      const up = randomArray(n);
      const da = randomArray(n);
      const loss = (g: ArrayLike<number>, u: ArrayLike<number>) => {
        let sum = 0;
        for (let i = 0; i < n; i++) sum += da[i]! * silu64(g[i]!) * u[i]!;
        return sum;
      };
      const gradGate = numericGradient((g) => loss(g, up), gate, H);
      const gradUp = numericGradient((u) => loss(gate, u), up, H);
      for (const k of implementations()) {
        const a = new Float32Array(n);
        k.siluMul(a, gate, up, n);
        assertCloseNorm(
          a,
          Float64Array.from(gate, (g, i) => silu64(g) * up[i]!),
          `${k.name} siluMul n=${n}: forward`,
        );
        const [dg, du] = [new Float32Array(n), new Float32Array(n)];
        k.siluMulBackward(dg, du, da, gate, up, n);
        // dg = da up s (1 + z (1 - s)) may cancel: a floor relative to its terms.
        const dgTerms = maxAbs(Float64Array.from(gate, (z, i) => Math.abs(da[i]! * up[i]!) * (1 + Math.abs(z))));
        assertCloseNorm(dg, gradGate, `${k.name} siluMulBackward n=${n}: dg`, FD_TOLERANCE, TOLERANCE * dgTerms);
        assertCloseNorm(du, gradUp, `${k.name} siluMulBackward n=${n}: du`, FD_TOLERANCE);
      }
    }
  });

  test("causalSoftmaxRows gives a block's causal softmax and lse; causalSoftmaxBackwardRows P again and the gradient of dO . P(S) V", () => {
    // [rows, cols, firstRow]: a whole small block, blocks further down (cols = firstRow + rows),
    // and one with columns beyond its last row's diagonal.
    for (const [rows, cols, firstRow] of [
      [1, 1, 0],
      [3, 3, 0],
      [2, 7, 5],
      [4, 9, 3],
    ] as const) {
      const hd = 3,
        stride = 5; // dO and O rows with a gap between them, as in a [T, H*hd] matrix
      const S = randomArray(rows * cols, 3);
      const V = randomArray(cols * hd),
        dO = randomArray(rows * stride);
      const expected = causalSoftmaxRows64(S, rows, cols, firstRow);
      // O = P V from the exact P, and dP = dO V^T: then sum_j P dP = dO . O, which the kernel uses.
      const O = new Float32Array(rows * stride),
        dP = new Float32Array(rows * cols);
      for (let i = 0; i < rows; i++) {
        for (let d = 0; d < hd; d++) {
          let sum = 0;
          for (let j = 0; j < cols; j++) sum += expected.P[i * cols + j]! * V[j * hd + d]!;
          O[i * stride + d] = sum;
        }
        for (let j = 0; j < cols; j++) {
          let sum = 0;
          for (let d = 0; d < hd; d++) sum += dO[i * stride + d]! * V[j * hd + d]!;
          dP[i * cols + j] = sum;
        }
      }
      // Over all rows*cols scores: those beyond each row's diagonal must get gradient 0.
      const gradS = numericGradient((x) => dot64(dP, causalSoftmaxRows64(x, rows, cols, firstRow).P), S, H);
      const what = `rows=${rows} cols=${cols} firstRow=${firstRow}`;
      for (const k of implementations()) {
        const P = Float32Array.from(S),
          lse = new Float32Array(rows);
        k.causalSoftmaxRows(P, lse, rows, cols, firstRow);
        assertCloseElementwise(P, expected.P, `${k.name} causalSoftmaxRows ${what}: P`);
        assertCloseElementwise(lse, expected.lse, `${k.name} causalSoftmaxRows ${what}: lse`, TOLERANCE, 1e-6);
        const again = Float32Array.from(S),
          dS = Float32Array.from(dP);
        k.causalSoftmaxBackwardRows(dS, again, lse, dO, O, rows, cols, firstRow, hd, stride);
        assertCloseElementwise(again, expected.P, `${k.name} causalSoftmaxBackwardRows ${what}: P`);
        // dS = P (dP - dO . O) may cancel in every entry: a floor relative to dP.
        assertCloseNorm(
          dS,
          gradS,
          `${k.name} causalSoftmaxBackwardRows ${what}: dS`,
          FD_TOLERANCE,
          TOLERANCE * maxAbs(dP),
        );
        for (let i = 0; i < rows; i++) {
          for (let j = firstRow + i + 1; j < cols; j++) {
            assert.equal(dS[i * cols + j], 0, `dS[${i},${j}] beyond the diagonal`);
            assert.equal(again[i * cols + j], 0, `P[${i},${j}] beyond the diagonal`);
          }
        }
      }
    }
  });

  test('logitsStats, then logitsBackward plus the one-hot parts, are the gradient of sum gT*lp(target) + gX*lp(extra) + gH*H', () => {
    for (const [rows, V] of [
      [1, 1],
      [1, 2],
      [3, 11],
      [2, 40],
    ] as const) {
      const z = randomArray(rows * V, 3);
      // Row 0 far from 0: the kernels must subtract the max.
      for (let i = 0; i < V; i++) z[i]! += 50;
      const targets = Array.from({ length: rows }, () => randomIndex(V));
      const extras = Array.from({ length: rows }, () => randomIndex(V)); // may equal the target
      const [gT, gX, gH] = [randomArray(rows), randomArray(rows), randomArray(rows)];
      const loss = (zv: ArrayLike<number>) => {
        let sum = 0;
        for (let r = 0; r < rows; r++) {
          const { lp, entropy } = logSoftmax64(zv, r * V, V);
          sum += gT[r]! * lp[targets[r]!]! + gX[r]! * lp[extras[r]!]! + gH[r]! * entropy;
        }
        return sum;
      };
      const gradZ = numericGradient(loss, z, H);
      const expected = Array.from({ length: rows }, (_, r) => logSoftmax64(z, r * V, V));
      for (const k of implementations()) {
        const what = `${k.name} logits ${rows}x${V}`;
        const [lse, entropy] = [new Float32Array(rows), new Float32Array(rows)];
        k.logitsStats(lse, entropy, z, rows, V);
        // lse = max + log(sum) may cancel: relative to the row's largest logit as well.
        const lseScale = (r: number) => Math.max(Math.abs(expected[r]!.lse), maxAbs(z.subarray(r * V, (r + 1) * V)));
        assertWithin(
          lse,
          expected.map((e) => e.lse),
          (r) => TOLERANCE * lseScale(r),
          `${what}: lse`,
        );
        assertWithin(
          entropy,
          expected.map((e) => e.entropy),
          () => TOLERANCE,
          `${what}: entropy`,
        );
        const dz = Float32Array.from(z);
        const gSum = Float32Array.from(gT, (g, r) => g + gX[r]!);
        k.logitsBackward(dz, rows, V, lse, entropy, gSum, gH);
        for (let r = 0; r < rows; r++) {
          dz[r * V + targets[r]!]! += gT[r]!;
          dz[r * V + extras[r]!]! += gX[r]!;
        }
        // The one-hot parts may cancel the rest completely (V = 1): a floor relative to the g's.
        const gScale = Math.max(...Array.from(gT, (g, r) => Math.abs(g) + Math.abs(gX[r]!) + Math.abs(gH[r]!)));
        assertCloseNorm(dz, gradZ, `${what}: d loss / d logits`, FD_TOLERANCE, FD_TOLERANCE * gScale);
      }
    }
  });

  test('adamw matches AdamW computed by hand in float64 over 3 steps with bias correction', () => {
    const n = 37;
    for (const [lr, beta1, beta2, eps, weightDecay] of [
      [1e-2, 0.9, 0.999, 1e-8, 0.1],
      [3e-3, 0.8, 0.95, 1e-3, 0],
    ] as const) {
      const p0 = randomArray(n);
      const grads = [1, 10, 0.1].map((scale) => {
        const g = randomArray(n, scale);
        g[0] = 0; // m and v stay 0: only weight decay moves p[0]
        g[1] = 1e-6 * scale; // v far below eps^2 in one case, above it in the other
        return g;
      });
      // The reference, in float64 throughout.
      const p = Float64Array.from(p0);
      const m = new Float64Array(n);
      const v = new Float64Array(n);
      // Bounds: m = beta1 m + (1 - beta1) g may cancel, so it is compared relative to mAbs, the
      // same recursion on |g|; p relative to travel, the sum of its steps taken with mAbs.
      const mAbs = new Float64Array(n);
      const travel = new Float64Array(n);
      const states = implementations().map((k) => ({
        k,
        p: Float32Array.from(p0),
        m: new Float32Array(n),
        v: new Float32Array(n),
      }));
      for (let t = 1; t <= 3; t++) {
        const g = grads[t - 1]!;
        const bc1 = 1 - beta1 ** t;
        const bc2 = 1 - beta2 ** t;
        for (let i = 0; i < n; i++) {
          m[i] = beta1 * m[i]! + (1 - beta1) * g[i]!;
          v[i] = beta2 * v[i]! + (1 - beta2) * g[i]! * g[i]!;
          mAbs[i] = beta1 * mAbs[i]! + (1 - beta1) * Math.abs(g[i]!);
          travel[i]! += lr * (mAbs[i]! / bc1 / (Math.sqrt(v[i]! / bc2) + eps) + weightDecay * Math.abs(p[i]!));
          p[i]! -= lr * (m[i]! / bc1 / (Math.sqrt(v[i]! / bc2) + eps) + weightDecay * p[i]!);
        }
        for (const s of states) {
          s.k.adamw(s.p, g, s.m, s.v, n, lr, beta1, beta2, eps, weightDecay, bc1, bc2, 1, null, false);
          const what = `${s.k.name} adamw lr ${lr} betas ${beta1}/${beta2} eps ${eps} wd ${weightDecay} step ${t}`;
          assertWithin(s.m, m, (i) => TOLERANCE * mAbs[i]! + 1e-30, `${what}: m`);
          assertCloseElementwise(s.v, v, `${what}: v`);
          // Each step to 1e-5 of its size, plus float32 rounding of p at every step.
          assertWithin(s.p, p, (i) => TOLERANCE * travel[i]! + 4e-7 * Math.abs(p[i]!), `${what}: p`);
        }
      }
    }
  });
});

// ---- native kernels against the portable ones --------------------------------------------------

/** Runs the same call on copies of the arrays for native and portable; returns [native, portable] copies. */
function both<T extends Float32Array[]>(arrays: [...T], call: (k: Kernels, copies: T) => void): [T, T] {
  const run = (k: Kernels) => {
    const copies = arrays.map((a) => Float32Array.from(a)) as T;
    call(k, copies);
    return copies;
  };
  return [run(native()), run(portableKernels)];
}

/**
 * Logits rows: uniform in [-4, 4), then per row r % 4: as is, shifted by +40, two logits of 100
 * (entropy ~log 2; a max missed by the kernel would overflow exp), half masked to -inf.
 */
function logitsInput(rows: number, V: number): Float32Array {
  const z = randomArray(rows * V, 4);
  for (let r = 0; r < rows; r++) {
    const row = z.subarray(r * V, (r + 1) * V);
    if (r % 4 === 1) for (let i = 0; i < V; i++) row[i]! += 40;
    if (r % 4 === 2) {
      row[randomIndex(V)] = 100;
      row[Math.min(V - 1, 24)] = 100;
    }
    if (r % 4 === 3 && V > 1) for (let i = 0; i < V; i += 2) row[i] = -Infinity;
  }
  return z;
}

const logitsShapes: Array<[number, number]> = [
  [1, 1],
  [1, 2],
  [4, 17],
  [4, 1023],
  [2, 1025],
  [5, 4097],
  [4, 151936],
];

/**
 * The sizes of the terms of rmsnormBackward, in float64: per row, max_i |rstd w_i dy_i| + |x_i c|
 * (dx_i is their difference); per column, sum_r |dy x| rstd (dw_i is the signed sum).
 */
function rmsnormBackwardTerms(
  dy: Float32Array,
  x: Float32Array,
  w: Float32Array,
  rows: number,
  dim: number,
  eps: number,
) {
  const dxRow = new Float64Array(rows);
  const dw = new Float64Array(dim);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let ss = 0;
    let dot = 0;
    for (let i = 0; i < dim; i++) {
      ss += x[o + i]! ** 2;
      dot += Math.abs(w[i]! * dy[o + i]! * x[o + i]!);
    }
    const rstd = 1 / Math.sqrt(ss / dim + eps);
    const c = (rstd ** 3 * dot) / dim;
    for (let i = 0; i < dim; i++) {
      dxRow[r] = Math.max(dxRow[r]!, Math.abs(rstd * w[i]! * dy[o + i]!) + Math.abs(x[o + i]!) * c);
      dw[i]! += Math.abs(dy[o + i]! * x[o + i]!) * rstd;
    }
  }
  return { dxRow, dw };
}

describe('native training kernels against portable', { skip: skipNative }, () => {
  test('adamw (n = 1, 7, 1000, 4099; three steps from the same state)', () => {
    const [lr, beta1, beta2, eps, weightDecay] = [1e-3, 0.9, 0.999, 1e-8, 0.01];
    for (const n of [1, 7, 1000, 4099]) {
      let [p, m, v]: [Float32Array, Float32Array, Float32Array] = [
        randomArray(n),
        randomArray(n, 0.1),
        Float32Array.from(randomArray(n, 0.1), (x) => x * x),
      ];
      for (const [step, gScale] of [0.5, 1, 2].entries()) {
        const t = step + 5;
        const [bc1, bc2] = [1 - beta1 ** t, 1 - beta2 ** t];
        const g = randomArray(n, gScale);
        const [fromNative, fromPortable] = both([p, m, v], (k, [pc, mc, vc]) =>
          k.adamw(pc, g, mc, vc, n, lr, beta1, beta2, eps, weightDecay, bc1, bc2, 1, null, false),
        );
        const what = `adamw n=${n} t=${t}`;
        // m = beta1 m + (1 - beta1) g may cancel: bounds relative to the terms, and for p to the
        // terms of the step (plus one float32 rounding of p each).
        const mTerms = (i: number) => beta1 * Math.abs(m[i]!) + (1 - beta1) * Math.abs(g[i]!);
        assertWithin(fromNative[1], fromPortable[1], (i) => TOLERANCE * mTerms(i) + 1e-30, `${what}: m`);
        assertCloseElementwise(fromNative[2], fromPortable[2], `${what}: v`);
        const stepTerms = (i: number) =>
          lr * (mTerms(i) / bc1 / (Math.sqrt(fromPortable[2][i]! / bc2) + eps) + weightDecay * Math.abs(p[i]!));
        assertWithin(
          fromNative[0],
          fromPortable[0],
          (i) => TOLERANCE * stepTerms(i) + 1.2e-7 * Math.abs(p[i]!),
          `${what}: p`,
        );
        [p, m, v] = fromPortable;
      }
    }
  });

  test('sumSquares (n = 0, 1, 7, 1000, 4099; a NaN or an infinity in the sum)', () => {
    const k = native();
    for (const n of [0, 1, 7, 1000, 4099]) {
      const x = randomArray(n, 3);
      // Squares are exact in float64 and every term is positive: the sums differ only by the
      // order of the float64 additions.
      const sum = portableKernels.sumSquares(x, n);
      assert.ok(
        Math.abs(k.sumSquares(x, n) - sum) <= 1e-14 * sum,
        `sumSquares n=${n}: ${k.sumSquares(x, n)} vs ${sum}`,
      );
    }
    const x = randomArray(1000);
    x[999] = NaN;
    assert.ok(Number.isFinite(k.sumSquares(x, 999)), 'reads only the first n values');
    x[500] = Infinity;
    assert.equal(k.sumSquares(x, 999), Infinity);
    x[501] = NaN;
    assert.ok(Number.isNaN(k.sumSquares(x, 999)), 'NaN propagates');
  });

  test('rmsnormBackward (rows 1 to 4099, odd dims; accumulate true/false; dw null/given)', () => {
    for (const [rows, dim] of [
      [1, 1],
      [1, 1024],
      [3, 7],
      [5, 1027],
      [17, 128],
      [4099, 16],
    ] as const) {
      const x = randomArray(rows * dim, 3);
      const w = randomArray(dim);
      const dy = randomArray(rows * dim);
      const terms = rmsnormBackwardTerms(dy, x, w, rows, dim, 1e-6);
      for (const accumulate of [false, true]) {
        const dx0 = accumulate ? randomArray(rows * dim) : new Float32Array(rows * dim).fill(NaN);
        const dw0 = randomArray(dim);
        for (const withDw of [false, true]) {
          const [fromNative, fromPortable] = both([dx0, dw0], (k, [dx, dw]) =>
            k.rmsnormBackward(dx, withDw ? dw : null, dy, x, w, rows, dim, 1e-6, accumulate),
          );
          const what = `rmsnormBackward ${rows}x${dim} accumulate ${accumulate} dw ${withDw ? 'given' : 'null'}`;
          // Compared as gradients, without what was there before, relative to the size of their
          // terms (dx = rstd w dy - x c cancels completely when dim = 1), plus one float32
          // rounding of what is stored (the added-to value may be much larger than the gradient).
          const base = accumulate ? dx0 : new Float32Array(rows * dim);
          const rounding = (stored: Float32Array, i: number) => 1.2e-7 * Math.abs(stored[i]!);
          assertWithin(
            minus(fromNative[0], base),
            minus(fromPortable[0], base),
            (i) => TOLERANCE * terms.dxRow[Math.floor(i / dim)]! + rounding(fromPortable[0], i),
            `${what}: dx`,
          );
          assertWithin(
            minus(fromNative[1], dw0),
            minus(fromPortable[1], dw0),
            (i) => TOLERANCE * terms.dw[i]! + rounding(fromPortable[1], i),
            `${what}: dw`,
          );
          if (!withDw) assert.deepEqual(fromNative[1], dw0, `${what}: dw untouched`);
        }
      }
    }
  });

  test('rmsnormBackward with dx aliasing dy, and siluMulBackward writing over its inputs, give the same results', () => {
    // Not promised by kernels.ts, but both implementations read each input before writing there.
    const [rows, dim, n] = [3, 37, 1001];
    const [x, w, dy] = [randomArray(rows * dim, 2), randomArray(dim), randomArray(rows * dim)];
    const [gate, up, da] = [randomArray(n, 8), randomArray(n), randomArray(n)];
    for (const k of [portableKernels, native()]) {
      const [dx, dw, dwInPlace] = [new Float32Array(rows * dim), new Float32Array(dim), new Float32Array(dim)];
      k.rmsnormBackward(dx, dw, dy, x, w, rows, dim, 1e-6, false);
      const inPlace = Float32Array.from(dy);
      k.rmsnormBackward(inPlace, dwInPlace, inPlace, x, w, rows, dim, 1e-6, false);
      // Close rather than equal: an overlap may send the native loop down its scalar path.
      assertCloseNorm(inPlace, dx, `${k.name} rmsnormBackward dx = dy`);
      assertCloseNorm(dwInPlace, dw, `${k.name} rmsnormBackward dx = dy: dw`);

      const [dg, du] = [new Float32Array(n), new Float32Array(n)];
      k.siluMulBackward(dg, du, da, gate, up, n);
      const [g2, u2] = [Float32Array.from(gate), Float32Array.from(up)];
      k.siluMulBackward(g2, u2, da, g2, u2, n);
      assertCloseNorm(g2, dg, `${k.name} siluMulBackward dg = gate`);
      assertCloseNorm(u2, du, `${k.name} siluMulBackward du = up`);
    }
  });

  test('siluMulBackward (n = 1, 7, 1000, 3077; gates up to +-100)', () => {
    for (const n of [1, 7, 1000, 3077]) {
      const gate = randomArray(n, 12);
      [0, 30, -30, 100, -100].forEach((z, i) => {
        if (i + 1 < n) gate[i + 1] = z;
      });
      const up = randomArray(n);
      const da = randomArray(n);
      const [fromNative, fromPortable] = both([new Float32Array(n), new Float32Array(n)], (k, [dg, du]) =>
        k.siluMulBackward(dg, du, da, gate, up, n),
      );
      // dg = da*up*s*(1 + z(1-s)) cancels near z = -1.28: the bound is relative to its terms.
      const termScale = (i: number) => {
        const s = 1 / (1 + Math.exp(-gate[i]!));
        return Math.abs(da[i]! * up[i]! * s) * (1 + Math.abs(gate[i]!) * (1 - s));
      };
      assertWithin(
        fromNative[0],
        fromPortable[0],
        (i) => TOLERANCE * termScale(i) + 1e-30,
        `siluMulBackward n=${n}: dg`,
      );
      assertCloseElementwise(fromNative[1], fromPortable[1], `siluMulBackward n=${n}: du`);
    }
  });

  test('logitsStats (V up to 151936, shifted, peaked and half-masked rows)', () => {
    for (const [rows, V] of logitsShapes) {
      const z = logitsInput(rows, V);
      const [fromNative, fromPortable] = both([new Float32Array(rows), new Float32Array(rows)], (k, [lse, entropy]) =>
        k.logitsStats(lse, entropy, z, rows, V),
      );
      const what = `logitsStats ${rows}x${V}`;
      // lse = max + log(sum) may cancel: relative to the largest logit of the row as well.
      const rowScale = (r: number) =>
        Math.max(Math.abs(fromPortable[0][r]!), maxAbs(z.subarray(r * V, (r + 1) * V).filter(Number.isFinite)));
      assertWithin(fromNative[0], fromPortable[0], (r) => TOLERANCE * rowScale(r), `${what}: lse`);
      assertWithin(
        fromNative[1],
        fromPortable[1],
        (i) => TOLERANCE * Math.max(1, Math.abs(fromPortable[1][i]!)),
        `${what}: entropy`,
      );
      // A masked row's statistics are those of its unmasked logits.
      if (rows > 3 && V > 1) {
        const kept = z.subarray(3 * V, 4 * V).filter((value) => value !== -Infinity);
        const [lse, entropy] = [new Float32Array(1), new Float32Array(1)];
        native().logitsStats(lse, entropy, kept, 1, kept.length);
        assertWithin(lse, fromNative[0].subarray(3, 4), () => TOLERANCE * rowScale(3), `${what}: masked row lse`);
        assertWithin(
          entropy,
          fromNative[1].subarray(3, 4),
          () => TOLERANCE * Math.max(1, entropy[0]!),
          `${what}: masked row entropy`,
        );
      }
    }
  });

  test('logitsStats finds a single dominant logit (1000) at every position of a block', () => {
    // Row i has its peak at i: a max that missed any position would leave exp() a value near 1000.
    const [rows, V] = [80, 75];
    const z = randomArray(rows * V, 4);
    for (let r = 0; r < rows; r++) z[r * V + (r % V)] = 1000;
    const [fromNative, fromPortable] = both([new Float32Array(rows), new Float32Array(rows)], (k, [lse, entropy]) =>
      k.logitsStats(lse, entropy, z, rows, V),
    );
    assertCloseElementwise(fromNative[0], fromPortable[0], 'logitsStats peak: lse');
    assertWithin(fromNative[1], fromPortable[1], () => TOLERANCE, 'logitsStats peak: entropy');
  });

  test('logitsBackward (V up to 151936, shifted, peaked and half-masked rows)', () => {
    for (const [rows, V] of logitsShapes) {
      const z = logitsInput(rows, V);
      const [lse, entropy] = [new Float32Array(rows), new Float32Array(rows)];
      portableKernels.logitsStats(lse, entropy, z, rows, V);
      const gSum = randomArray(rows);
      const gEntropy = randomArray(rows);
      const [fromNative, fromPortable] = both([z], (k, [dz]) =>
        k.logitsBackward(dz, rows, V, lse, entropy, gSum, gEntropy),
      );
      // Relative to the size of the terms of dz_i = -p_i (gSum + gEntropy (lp_i + H)), which may cancel.
      const termScale = (i: number) => {
        const r = Math.floor(i / V);
        const lp = z[i]! - lse[r]!;
        return Math.exp(lp) * (Math.abs(gSum[r]!) + Math.abs(gEntropy[r]!) * (Math.abs(lp) + Math.abs(entropy[r]!)));
      };
      assertWithin(
        fromNative[0],
        fromPortable[0],
        (i) => (Number.isFinite(z[i]) ? TOLERANCE * termScale(i) + 1e-30 : 1e-30),
        `logitsBackward ${rows}x${V}`,
      );
    }
  });

  /** Score blocks [rows, cols, firstRow] as attention makes them: a first block, later and partial ones. */
  const scoreBlocks: Array<[number, number, number]> = [
    [1, 1, 0],
    [2, 2, 0],
    [7, 7, 0],
    [33, 33, 0],
    [128, 128, 0],
    [128, 256, 128],
    [44, 300, 256],
    [5, 40, 30],
  ];

  /** Scores up to +-100 or +-8, NaN beyond each row's visible columns (which must be ignored). */
  function scoreInput(rows: number, cols: number, firstRow: number): Float32Array {
    const S = randomArray(rows * cols, cols % 2 === 0 ? 100 : 8);
    for (let i = 0; i < rows; i++) S.fill(NaN, i * cols + firstRow + i + 1, (i + 1) * cols);
    return S;
  }

  function assertZeroBeyondDiagonal(X: Float32Array, rows: number, cols: number, firstRow: number, what: string): void {
    for (let i = 0; i < rows; i++) {
      for (let j = firstRow + i + 1; j < cols; j++) assert.equal(X[i * cols + j], 0, `${what}[${i},${j}]`);
    }
  }

  test('causalSoftmaxRows (blocks up to 128 x 300; scores up to +-100; NaN beyond the diagonal is ignored and zeroed)', () => {
    for (const [rows, cols, firstRow] of scoreBlocks) {
      const S = scoreInput(rows, cols, firstRow);
      const [fromNative, fromPortable] = both([S, new Float32Array(rows)], (k, [P, lse]) =>
        k.causalSoftmaxRows(P, lse, rows, cols, firstRow),
      );
      const what = `causalSoftmaxRows ${rows}x${cols}+${firstRow}`;
      assertCloseElementwise(fromNative[0], fromPortable[0], `${what}: P`);
      assertCloseElementwise(fromNative[1], fromPortable[1], `${what}: lse`, TOLERANCE, 1e-6);
      assertZeroBeyondDiagonal(fromNative[0], rows, cols, firstRow, `${what}: P`);
    }
  });

  test('causalSoftmaxRows finds a single dominant score (1000) at every position of a row', () => {
    const rows = 70,
      cols = 100,
      firstRow = 30;
    const S = randomArray(rows * cols, 4);
    for (let i = 0; i < rows; i++) S[i * cols + ((i * 37) % (firstRow + i + 1))] = 1000;
    const [fromNative, fromPortable] = both([S, new Float32Array(rows)], (k, [P, lse]) =>
      k.causalSoftmaxRows(P, lse, rows, cols, firstRow),
    );
    assertCloseElementwise(fromNative[0], fromPortable[0], 'causalSoftmaxRows peak: P');
    assertCloseElementwise(fromNative[1], fromPortable[1], 'causalSoftmaxRows peak: lse');
  });

  test('causalSoftmaxBackwardRows (blocks up to 128 x 300, head dims 1 to 128; S and dP beyond the diagonal are ignored and zeroed)', () => {
    for (const [[rows, cols, firstRow], hd] of scoreBlocks.map((b, i) => [b, [1, 7, 16, 64, 128][i % 5]!] as const)) {
      const stride = hd + 3;
      const S = scoreInput(rows, cols, firstRow),
        lse = new Float32Array(rows);
      portableKernels.causalSoftmaxRows(Float32Array.from(S), lse, rows, cols, firstRow);
      const dP = scoreInput(rows, cols, firstRow).map((x) => x / 100);
      const dO = randomArray(rows * stride),
        O = randomArray(rows * stride);
      const [fromNative, fromPortable] = both([dP, S], (k, [dS, P]) =>
        k.causalSoftmaxBackwardRows(dS, P, lse, dO, O, rows, cols, firstRow, hd, stride),
      );
      const what = `causalSoftmaxBackwardRows ${rows}x${cols}+${firstRow} hd=${hd}`;
      // exp(s - lse) to a few ulp, and values below e^-87 may come out as ~1.6e-38 (vec_math.h).
      const P = fromPortable[1];
      assertCloseElementwise(fromNative[1], P, `${what}: P`, TOLERANCE, 1e-37);
      // dS_ij = P_ij (dP_ij - dO_i . O_i), relative to the size of its terms.
      const termScale = (index: number) => {
        const i = Math.floor(index / cols),
          j = index % cols;
        if (j > firstRow + i) return 0;
        let dot = 0;
        for (let d = 0; d < hd; d++) dot += Math.abs(dO[i * stride + d]! * O[i * stride + d]!);
        return P[index]! * (Math.abs(dP[index]!) + dot);
      };
      assertWithin(fromNative[0], fromPortable[0], (i) => TOLERANCE * termScale(i) + 1e-30, `${what}: dS`);
      assertZeroBeyondDiagonal(fromNative[0], rows, cols, firstRow, `${what}: dS`);
      assertZeroBeyondDiagonal(fromNative[1], rows, cols, firstRow, `${what}: P`);
    }
  });

  test('bad arguments throw an Error naming the op, and compute nothing', () => {
    const k = native();
    const f = (n: number) => new Float32Array(n);
    const untyped = k as unknown as Record<keyof Kernels, (...args: unknown[]) => void>;
    const expectError = (op: string, detail: RegExp, call: () => void) =>
      assert.throws(call, (err: unknown) => {
        assert.ok(err instanceof Error, 'an Error');
        assert.match(err.message, new RegExp(`openclaw_native\\.${op}: `));
        assert.match(err.message, detail);
        assert.match(err.message, /nothing was computed|rebuild the addon/);
        return true;
      });

    const p = f(4).fill(7);
    const adamw = (n: number, m: Float32Array, lr: number, beta1: number, bc2: number) =>
      k.adamw(p, f(4), m, f(4), n, lr, beta1, 0.999, 1e-8, 0.01, 0.1, bc2, 1, null, false);
    expectError('adamw', /m has 3 elements but needs n = 4/, () => adamw(4, f(3), 1e-3, 0.9, 0.001));
    expectError('adamw', /bc2 = 0 must be in \(0, 1\] \(1 - beta2\^t\)/, () => adamw(4, f(4), 1e-3, 0.9, 0));
    expectError('adamw', /lr = nan must be in \[0, inf\]/, () => adamw(4, f(4), NaN, 0.9, 0.001));
    expectError('adamw', /beta1 = 1 must be in \[0, 1\)/, () => adamw(4, f(4), 1e-3, 1, 0.001));
    expectError('adamw', /expected 15 arguments, got 12/, () =>
      untyped.adamw(p, f(4), f(4), f(4), 4, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0.1, 0.001),
    );
    expectError('adamw', /pBf16 has 3 elements but needs n = 4/, () =>
      k.adamw(p, f(4), f(4), f(4), 4, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0.1, 0.001, 1, new Uint16Array(3), false),
    );
    expectError('adamw', /gradScale = inf/, () =>
      k.adamw(p, f(4), f(4), f(4), 4, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0.1, 0.001, Infinity, null, false),
    );
    assert.deepEqual([...p], [7, 7, 7, 7], 'p untouched after refused calls');

    expectError('sumSquares', /x has 3 elements but needs n = 4/, () => k.sumSquares(f(3), 4));
    expectError('sumSquares', /expected 2 arguments, got 1/, () => untyped.sumSquares(f(4)));

    expectError('rmsnormBackward', /dw has 3 elements but needs dim = 4/, () =>
      k.rmsnormBackward(f(8), f(3), f(8), f(8), f(4), 2, 4, 1e-6, false),
    );
    expectError('rmsnormBackward', /argument 1 \(dw\) must be a Float32Array or null/, () =>
      untyped.rmsnormBackward(f(8), undefined, f(8), f(8), f(4), 2, 4, 1e-6, false),
    );
    expectError('rmsnormBackward', /dy has 7 elements but needs rows\*dim = 8/, () =>
      k.rmsnormBackward(f(8), null, f(7), f(8), f(4), 2, 4, 1e-6, true),
    );
    expectError('rmsnormBackward', /argument 8 \(accumulate\) must be a boolean/, () =>
      untyped.rmsnormBackward(f(8), null, f(8), f(8), f(4), 2, 4, 1e-6, 1),
    );
    expectError('siluMulBackward', /du has 4 elements but needs n = 5/, () =>
      k.siluMulBackward(f(5), f(4), f(5), f(5), f(5), 5),
    );
    expectError('logitsStats', /V = 0 must be an integer in \[1,/, () => k.logitsStats(f(2), f(2), f(0), 2, 0));
    expectError('logitsStats', /logits has 9 elements but needs rows\*V = 10/, () =>
      k.logitsStats(f(2), f(2), f(9), 2, 5),
    );
    expectError('logitsStats', /entropy has 1 elements but needs rows = 2/, () =>
      k.logitsStats(f(2), f(1), f(10), 2, 5),
    );
    const logits = f(10).fill(3);
    expectError('logitsBackward', /gEntropy has 1 elements but needs rows = 2/, () =>
      k.logitsBackward(logits, 2, 5, f(2), f(2), f(2), f(1)),
    );
    expectError('logitsBackward', /argument 5 \(gSum\) must be a Float32Array/, () =>
      k.logitsBackward(logits, 2, 5, f(2), f(2), new Float64Array(2) as unknown as Float32Array, f(2)),
    );
    assert.deepEqual([...logits], Array(10).fill(3), 'logits untouched after refused calls');
    const S = f(12).fill(5);
    expectError('causalSoftmaxRows', /S has 11 elements but needs rows\*cols = 12/, () =>
      k.causalSoftmaxRows(f(11), f(3), 3, 4, 1),
    );
    expectError('causalSoftmaxRows', /firstRow \+ rows = 2 \+ 3 exceeds cols = 4/, () =>
      k.causalSoftmaxRows(S, f(3), 3, 4, 2),
    );
    expectError('causalSoftmaxRows', /lse has 2 elements but needs rows = 3/, () =>
      k.causalSoftmaxRows(S, f(2), 3, 4, 1),
    );
    expectError('causalSoftmaxRows', /firstRow = 1.5 must be an integer/, () =>
      k.causalSoftmaxRows(S, f(3), 3, 4, 1.5),
    );
    const dP = f(12).fill(5);
    const backwardRows = (
      scores: Float32Array,
      lse: Float32Array,
      dO: Float32Array,
      firstRow: number,
      headDim: number,
      stride: number,
    ) => k.causalSoftmaxBackwardRows(dP, scores, lse, dO, f(10), 3, 4, firstRow, headDim, stride);
    expectError('causalSoftmaxBackwardRows', /S has 11 elements but needs rows\*cols = 12/, () =>
      backwardRows(f(11), f(3), f(10), 1, 2, 4),
    );
    expectError('causalSoftmaxBackwardRows', /firstRow \+ rows = 2 \+ 3 exceeds cols = 4/, () =>
      backwardRows(S, f(3), f(10), 2, 2, 4),
    );
    expectError('causalSoftmaxBackwardRows', /lse has 2 elements but needs rows = 3/, () =>
      backwardRows(S, f(2), f(10), 1, 2, 4),
    );
    expectError(
      'causalSoftmaxBackwardRows',
      /dO has 9 elements but needs 10 for rows x headDim = 3 x 2 with stride = 4/,
      () => backwardRows(S, f(3), f(9), 1, 2, 4),
    );
    expectError('causalSoftmaxBackwardRows', /stride = 1 must be >= max\(1, 2\)/, () =>
      backwardRows(S, f(3), f(10), 1, 2, 1),
    );
    expectError('causalSoftmaxBackwardRows', /expected 10 arguments, got 9/, () =>
      untyped.causalSoftmaxBackwardRows(dP, S, f(3), f(10), f(10), 3, 4, 1, 2),
    );
    assert.deepEqual([...dP], Array(12).fill(5), 'dP untouched after refused calls');
    assert.deepEqual([...S], Array(12).fill(5), 'S untouched after refused calls');
  });
});

describe('native row and elementwise kernels on several threads', { skip: skipNative }, () => {
  // Above the size where they split over the OpenMP team (native/src/kernels_parallel.c), with
  // counts that leave a remainder; one thread runs the kernels whole, so equal bits on 1 and 2
  // threads mean every row and element was computed exactly once, as alone.
  const rows = 67,
    dim = 1031,
    n = rows * dim,
    V = 3001,
    heads = 9,
    headDim = 128;
  const x = randomArray(n),
    y = randomArray(n),
    z = randomArray(n),
    w = randomArray(dim),
    logits = randomArray(rows * V, 4),
    rope = randomArray(rows * heads * headDim);
  const positions = Int32Array.from({ length: rows }, (_, r) => 3 * r + 1);
  const invFreq = Float32Array.from({ length: headDim / 2 }, (_, i) => 10000 ** ((-2 * i) / headDim));
  const perRow = randomArray(rows);

  function runAll(k: Kernels): Record<string, Float32Array | Float64Array> {
    const out: Record<string, Float32Array | Float64Array> = {};
    out.rmsnorm = new Float32Array(n);
    k.rmsnorm(out.rmsnorm, x, w, rows, dim, 1e-6);
    out.siluMul = new Float32Array(n);
    k.siluMul(out.siluMul, x, y, n);
    out.rope = Float32Array.from(rope);
    k.rope(out.rope, rows, heads, headDim, positions, invFreq);
    out.ropeBack = Float32Array.from(rope);
    k.rope(
      out.ropeBack,
      rows,
      heads,
      headDim,
      Int32Array.from(positions, (p) => -p),
      invFreq,
    );
    out.dx = Float32Array.from(z);
    k.rmsnormBackward(out.dx, null, y, x, w, rows, dim, 1e-6, true);
    out.dg = new Float32Array(n);
    out.du = new Float32Array(n);
    k.siluMulBackward(out.dg, out.du, z, x, y, n);
    out.lse = new Float32Array(rows);
    out.entropy = new Float32Array(rows);
    k.logitsStats(out.lse, out.entropy, logits, rows, V);
    out.dz = Float32Array.from(logits);
    k.logitsBackward(
      out.dz,
      rows,
      V,
      out.lse,
      out.entropy,
      perRow,
      perRow.map((g) => g / 2),
    );
    out.p = Float32Array.from(x);
    out.m = Float32Array.from(y, Math.abs);
    out.v = Float32Array.from(z, (a) => a * a);
    k.adamw(out.p, y, out.m, out.v, n, 1e-3, 0.9, 0.999, 1e-8, 0.1, 0.1, 0.001, 1, null, false);
    // The fused pass: the gradient scaled on read, the bf16 copy written, the gradient cleared.
    out.pFused = Float32Array.from(x);
    out.gFused = Float32Array.from(y);
    const pBits = new Uint16Array(n);
    k.adamw(
      out.pFused,
      out.gFused,
      Float32Array.from(y, Math.abs),
      Float32Array.from(z, (a) => a * a),
      n,
      1e-3,
      0.9,
      0.999,
      1e-8,
      0.1,
      0.1,
      0.001,
      0.37,
      pBits,
      true,
    );
    out.pBits = Float32Array.from(pBits);
    // Two blocks of partial sums: the split and their order are the kernel's, not the team's.
    out.sumSquares = Float64Array.of(k.sumSquares(x, n));
    return out;
  }

  test('give the same bits on 1 and 2 threads, and match the portable kernels', () => {
    const k = native();
    const before = k.threads();
    try {
      k.setThreads(1);
      const one = runAll(k);
      k.setThreads(2);
      const two = runAll(k);
      const portable = runAll(portableKernels);
      for (const name of Object.keys(one)) {
        assert.deepEqual(two[name], one[name], `${name}: 2 threads against 1`);
        assertWithin(two[name]!, portable[name]!, (i) => 1e-4 * (1 + Math.abs(portable[name]![i]!)), name);
      }
    } finally {
      k.setThreads(before);
    }
  });

  test('rmsnorm, siluMul and its backward write bf16 outputs equal to rounding their float32 outputs', () => {
    const k = native();
    const before = k.threads();
    const rounded = (f: Float32Array) => {
      const bits = new Uint16Array(f.length);
      toBf16(bits, f, f.length);
      return bits;
    };
    const run = (kk: Kernels) => {
      const norm32 = new Float32Array(n),
        silu32 = new Float32Array(n);
      const norm16 = new Uint16Array(n).fill(0xffff),
        silu16 = new Uint16Array(n).fill(0xffff);
      kk.rmsnorm(norm32, x, w, rows, dim, 1e-6);
      kk.rmsnorm(norm16, x, w, rows, dim, 1e-6);
      kk.siluMul(silu32, x, y, n);
      kk.siluMul(silu16, x, y, n);
      assert.deepEqual(norm16, rounded(norm32), `${kk.name} rmsnorm: bf16 out against float32 out rounded`);
      assert.deepEqual(silu16, rounded(silu32), `${kk.name} siluMul: bf16 out against float32 out rounded`);
      const [dg32, du32] = [new Float32Array(n), new Float32Array(n)];
      const [dg16, du16] = [new Uint16Array(n).fill(0xffff), new Uint16Array(n).fill(0xffff)];
      kk.siluMulBackward(dg32, du32, z, x, y, n);
      kk.siluMulBackward(dg16, du16, z, x, y, n);
      assert.deepEqual(dg16, rounded(dg32), `${kk.name} siluMulBackward: bf16 dg against float32 dg rounded`);
      assert.deepEqual(du16, rounded(du32), `${kk.name} siluMulBackward: bf16 du against float32 du rounded`);
      assert.throws(() => kk.siluMulBackward(dg16, du32, z, x, y, n), /both Float32Arrays or both Uint16Arrays/);
      return { norm16, silu16, dg16, du16 };
    };
    try {
      k.setThreads(1);
      const one = run(k);
      k.setThreads(2);
      assert.deepEqual(run(k), one, 'native bf16 outputs: 2 threads against 1');
      run(portableKernels);
    } finally {
      k.setThreads(before);
    }
  });
});

describe('adamw in one pass: scaled gradient, bf16 copy, cleared gradient', () => {
  const n = 70_001; // above the parallel split, with a remainder
  const [p0, g0, m0] = [randomArray(n), randomArray(n, 0.1), randomArray(n, 0.01)];
  const v0 = Float32Array.from(randomArray(n, 0.01), (x) => x * x);
  const args = [1e-3, 0.9, 0.98, 1e-8, 0.1, 1 - 0.9 ** 3, 1 - 0.98 ** 3] as const;

  for (const [name, k] of [
    ['portable', portableKernels],
    ['native', skipNative ? null : native()],
  ] as const) {
    test(`${name}: the same bits as scaling, adamw, toBf16 and a fill`, { skip: k === null }, () => {
      if (!k) return;
      // The gradient scaled as clipping did before: the float64 product, rounded once.
      const [p, g, m, v] = [p0.slice(), Float32Array.from(g0, (x) => x * 0.37), m0.slice(), v0.slice()];
      k.adamw(p, g, m, v, n, ...args, 1, null, false);
      const bits = new Uint16Array(n);
      k.toBf16(bits, p, n);

      const [pf, gf, mf, vf] = [p0.slice(), g0.slice(), m0.slice(), v0.slice()];
      const bitsFused = new Uint16Array(n).fill(0xffff);
      k.adamw(pf, gf, mf, vf, n, ...args, 0.37, bitsFused, true);
      assert.deepEqual(pf, p, 'p');
      assert.deepEqual(mf, m, 'm');
      assert.deepEqual(vf, v, 'v');
      assert.deepEqual(bitsFused, bits, 'the bf16 copy');
      assert.ok(
        gf.every((x) => Object.is(x, 0)),
        'the gradient cleared',
      );
    });
  }
});
