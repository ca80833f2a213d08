// Causal grouped-query attention over packed sequences, forward and backward, in memory linear
// in the sequence length (the FlashAttention-2 scheme, with BLAS GEMMs over row blocks).
//
// Each (sequence, head) product is split into blocks of query rows, and block i multiplies only
// the key columns 0 .. end of block i: the masked upper triangle beyond the block's diagonal is
// never computed (for 512 tokens, 10 of 16 blocks' worth of work). A block's scores live in a
// [rows, cols] scratch only while the block is processed. The forward keeps each row's
// log-sum-exp (lse); the backward recomputes the block's probabilities from Q, K and lse, and
// takes rowsum(P * dP) as dO . O, so no n x n matrix is ever stored.
//
// At bf16, kernels that have attentionForwardBf16/attentionBackwardBf16 (the native addon over
// oneDNN) run the same scheme in one call per layer, parallel over (sequence, KV head) instead of
// one GEMM call at a time (native/src/train_attention.c); the code below is the fallback and fp32.
// At bf16 the output may be kept as bf16 bits (it is only ever read rounded: by the output
// projection's GEMMs and, widened, by the backward's dO . O), half the bytes of a tape's largest
// attention buffer.
//
// Shapes: q [T, H*hd], k/v [T, KV*hd], out [T, H*hd]; sequence s owns rows start..start+len-1;
// lse [T*H] holds sequence s's values at H*start + h*len + i (head h, its row i).

import { widenBf16 } from '../kernels/bf16.js';
import type { Kernels } from '../kernels/kernels.js';
import type { Gemm } from '../precision.js';

export interface AttentionShape {
  nHeads: number;
  nKvHeads: number;
  headDim: number;
}

export interface PackedSequence {
  start: number;
  length: number;
}

/** Query rows per block: big enough that each GEMM stays efficient, small enough to skip most of the triangle. */
const QUERY_BLOCK = 128;

/** Floats of scratch the forward and backward need for sequences of up to maxLength tokens: two score blocks. */
export function attentionScratchSize(maxLength: number): number {
  return 2 * Math.min(QUERY_BLOCK, maxLength) * maxLength;
}

/** Query blocks of a sequence of n tokens: rows r0..r0+rows-1, which see key columns 0..cols-1. */
function* queryBlocks(n: number): Generator<{ r0: number; rows: number; cols: number }> {
  for (let r0 = 0; r0 < n; r0 += QUERY_BLOCK) {
    const rows = Math.min(QUERY_BLOCK, n - r0);
    yield { r0, rows, cols: r0 + rows };
  }
}

/** (start, length) pairs, as the fused kernels take them. */
function seqPairs(seqs: readonly PackedSequence[]): Int32Array {
  const pairs = new Int32Array(2 * seqs.length);
  seqs.forEach((s, i) => {
    pairs[2 * i] = s.start;
    pairs[2 * i + 1] = s.length;
  });
  return pairs;
}

/** How the products are computed: `gemm`, and whether it is bf16 (then the fused kernels may run). */
export interface AttentionCompute {
  gemm: Gemm;
  bf16: boolean;
}

/**
 * out and lse are overwritten; scratch holds attentionScratchSize(longest sequence) floats. The
 * products go through `gemm` (bf16: scores and values from bf16-rounded inputs), softmax in fp32.
 * A Uint16Array out (bf16 only) receives the output's bf16 bits.
 */
export function attentionForward(
  k: Kernels,
  compute: AttentionCompute,
  out: Float32Array | Uint16Array,
  lse: Float32Array,
  q: Float32Array,
  kk: Float32Array,
  v: Float32Array,
  seqs: readonly PackedSequence[],
  shape: AttentionShape,
  scratch: Float32Array,
): void {
  const { nHeads: H, nKvHeads: KV, headDim: hd } = shape;
  if (compute.bf16 && k.attentionForwardBf16?.(out, lse, q, kk, v, seqPairs(seqs), H, KV, hd)) return;
  if (out instanceof Float32Array) return blockwiseForward(k, compute, out, lse, q, kk, v, seqs, shape, scratch);
  // The blockwise code writes floats: into a temporary here, off the fast path.
  const floats = new Float32Array(out.length);
  blockwiseForward(k, compute, floats, lse, q, kk, v, seqs, shape, scratch);
  k.toBf16(out, floats, out.length);
}

function blockwiseForward(
  k: Kernels,
  { gemm }: AttentionCompute,
  out: Float32Array,
  lse: Float32Array,
  q: Float32Array,
  kk: Float32Array,
  v: Float32Array,
  seqs: readonly PackedSequence[],
  shape: AttentionShape,
  scratch: Float32Array,
): void {
  const { nHeads: H, nKvHeads: KV, headDim: hd } = shape;
  const qDim = H * hd,
    kvDim = KV * hd,
    group = H / KV,
    scale = 1 / Math.sqrt(hd);
  for (const s of seqs) {
    const n = s.length;
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / group);
      const Q = q.subarray(s.start * qDim + h * hd),
        K = kk.subarray(s.start * kvDim + g * hd);
      const V = v.subarray(s.start * kvDim + g * hd),
        O = out.subarray(s.start * qDim + h * hd);
      const L = lse.subarray(H * s.start + h * n);
      for (const { r0, rows, cols } of queryBlocks(n)) {
        // P = causal softmax of scale * Q_h K_g^T, then O_h = P V_g, for this block's rows.
        const P = scratch.subarray(0, rows * cols);
        gemm(false, true, rows, cols, hd, scale, Q.subarray(r0 * qDim), qDim, K, kvDim, 0, P, cols);
        k.causalSoftmaxRows(P, L.subarray(r0), rows, cols, r0);
        gemm(false, false, rows, hd, cols, 1, P, cols, V, kvDim, 0, O.subarray(r0 * qDim), qDim);
      }
    }
  }
}

/**
 * dq, dk, dv are overwritten; out (floats or bf16 bits) and lse are the forward's. Per block of
 * query rows: P = exp(scale Q_h K_g^T - lse), dV_g += P^T dO, dP = dO V_g^T, dS = P * (dP - dO . O),
 * dQ_h = scale dS K_g, dK_g += scale dS^T Q_h (P and dS are zero beyond the block's diagonal).
 */
export function attentionBackward(
  k: Kernels,
  compute: AttentionCompute,
  dq: Float32Array,
  dk: Float32Array,
  dv: Float32Array,
  dOut: Float32Array,
  out: Float32Array | Uint16Array,
  lse: Float32Array,
  q: Float32Array,
  kk: Float32Array,
  v: Float32Array,
  seqs: readonly PackedSequence[],
  shape: AttentionShape,
  scratch: Float32Array,
): void {
  const { nHeads: H, nKvHeads: KV, headDim: hd } = shape;
  if (compute.bf16 && k.attentionBackwardBf16?.(dq, dk, dv, dOut, out, lse, q, kk, v, seqPairs(seqs), H, KV, hd)) {
    return;
  }
  const floats = out instanceof Float32Array ? out : widenBf16(out, out.length);
  blockwiseBackward(k, compute, dq, dk, dv, dOut, floats, lse, q, kk, v, seqs, shape, scratch);
}

function blockwiseBackward(
  k: Kernels,
  { gemm }: AttentionCompute,
  dq: Float32Array,
  dk: Float32Array,
  dv: Float32Array,
  dOut: Float32Array,
  out: Float32Array,
  lse: Float32Array,
  q: Float32Array,
  kk: Float32Array,
  v: Float32Array,
  seqs: readonly PackedSequence[],
  shape: AttentionShape,
  scratch: Float32Array,
): void {
  const { nHeads: H, nKvHeads: KV, headDim: hd } = shape;
  const qDim = H * hd,
    kvDim = KV * hd,
    group = H / KV,
    scale = 1 / Math.sqrt(hd);
  dk.fill(0);
  dv.fill(0);
  for (const s of seqs) {
    const n = s.length;
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / group);
      const qOff = s.start * qDim + h * hd,
        kvOff = s.start * kvDim + g * hd;
      const Q = q.subarray(qOff),
        dO = dOut.subarray(qOff),
        O = out.subarray(qOff),
        dQ = dq.subarray(qOff);
      const K = kk.subarray(kvOff),
        V = v.subarray(kvOff),
        dK = dk.subarray(kvOff),
        dV = dv.subarray(kvOff);
      const L = lse.subarray(H * s.start + h * n);
      for (const { r0, rows, cols } of queryBlocks(n)) {
        const P = scratch.subarray(0, rows * cols),
          dS = scratch.subarray(rows * cols, 2 * rows * cols);
        const Qb = Q.subarray(r0 * qDim),
          dOb = dO.subarray(r0 * qDim);
        // Scores and dP = dO V^T first, so that one pass turns them into P and dS.
        gemm(false, true, rows, cols, hd, scale, Qb, qDim, K, kvDim, 0, P, cols);
        gemm(false, true, rows, cols, hd, 1, dOb, qDim, V, kvDim, 0, dS, cols);
        k.causalSoftmaxBackwardRows(dS, P, L.subarray(r0), dOb, O.subarray(r0 * qDim), rows, cols, r0, hd, qDim);
        gemm(true, false, cols, hd, rows, 1, P, cols, dOb, qDim, 1, dV, kvDim);
        gemm(false, false, rows, hd, cols, scale, dS, cols, K, kvDim, 0, dQ.subarray(r0 * qDim), qDim);
        gemm(true, false, cols, hd, rows, scale, dS, cols, Qb, qDim, 1, dK, kvDim);
      }
    }
  }
}
