// Causal grouped-query attention over packed sequences, forward (keeping the probabilities)
// and backward. Each (sequence, head) product is split into blocks of query rows, and block i
// multiplies only the key columns 0 .. end of block i: the masked upper triangle beyond the
// block's diagonal is never computed (for 512 tokens, 10 of 16 blocks' worth of work).
//
// Shapes: q [T, H*hd], k/v [T, KV*hd], out [T, H*hd]; sequence s owns rows start..start+len-1;
// probs holds, per sequence and head, a [len, len] block (upper triangle zero).

import type { Kernels } from '../kernels/kernels.js';

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

/** Floats of probability storage for these sequences. */
export function probsSize(seqs: readonly PackedSequence[], nHeads: number): number {
  return seqs.reduce((a, s) => a + nHeads * s.length * s.length, 0);
}

/** Query blocks of a sequence of n tokens: rows r0..r0+rows-1, which see key columns 0..cols-1. */
function* queryBlocks(n: number): Generator<{ r0: number; rows: number; cols: number }> {
  for (let r0 = 0; r0 < n; r0 += QUERY_BLOCK) {
    const rows = Math.min(QUERY_BLOCK, n - r0);
    yield { r0, rows, cols: r0 + rows };
  }
}

export function attentionForward(
  k: Kernels, out: Float32Array, probs: Float32Array, q: Float32Array, kk: Float32Array, v: Float32Array,
  seqs: readonly PackedSequence[], shape: AttentionShape,
): void {
  const { nHeads: H, nKvHeads: KV, headDim: hd } = shape;
  const qDim = H * hd, kvDim = KV * hd, group = H / KV, scale = 1 / Math.sqrt(hd);
  let pOff = 0;
  for (const s of seqs) {
    const n = s.length;
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / group);
      const P = probs.subarray(pOff, pOff + n * n);
      pOff += n * n;
      const Q = q.subarray(s.start * qDim + h * hd), K = kk.subarray(s.start * kvDim + g * hd);
      const V = v.subarray(s.start * kvDim + g * hd), O = out.subarray(s.start * qDim + h * hd);
      // P = scale * Q_h K_g^T on and below each block's diagonal, then a causal softmax per row
      // (which reads only columns 0..i and zeroes the rest of row i).
      for (const { r0, rows, cols } of queryBlocks(n)) {
        k.sgemm(false, true, rows, cols, hd, scale, Q.subarray(r0 * qDim), qDim, K, kvDim, 0, P.subarray(r0 * n), n);
      }
      k.causalSoftmax(P, n);
      // O_h = P V_g
      for (const { r0, rows, cols } of queryBlocks(n)) {
        k.sgemm(false, false, rows, hd, cols, 1, P.subarray(r0 * n), n, V, kvDim, 0, O.subarray(r0 * qDim), qDim);
      }
    }
  }
}

/**
 * dq, dk, dv are overwritten. Per head: dV_g += P^T dO, dP = dO V_g^T,
 * dS = P * (dP - rowsum(P * dP)), dQ_h = scale dS K_g, dK_g += scale dS^T Q_h,
 * each over the same query blocks as the forward (P and dS are zero beyond them).
 */
export function attentionBackward(
  k: Kernels, dq: Float32Array, dk: Float32Array, dv: Float32Array, dOut: Float32Array, probs: Float32Array,
  q: Float32Array, kk: Float32Array, v: Float32Array, seqs: readonly PackedSequence[], shape: AttentionShape, scratch: Float32Array,
): void {
  const { nHeads: H, nKvHeads: KV, headDim: hd } = shape;
  const qDim = H * hd, kvDim = KV * hd, group = H / KV, scale = 1 / Math.sqrt(hd);
  dk.fill(0);
  dv.fill(0);
  let pOff = 0;
  for (const s of seqs) {
    const n = s.length;
    const dP = scratch.subarray(0, n * n);
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / group);
      const P = probs.subarray(pOff, pOff + n * n);
      pOff += n * n;
      const dO = dOut.subarray(s.start * qDim + h * hd), Q = q.subarray(s.start * qDim + h * hd);
      const K = kk.subarray(s.start * kvDim + g * hd), V = v.subarray(s.start * kvDim + g * hd);
      const dQ = dq.subarray(s.start * qDim + h * hd), dK = dk.subarray(s.start * kvDim + g * hd);
      const dV = dv.subarray(s.start * kvDim + g * hd);
      for (const { r0, rows, cols } of queryBlocks(n)) {
        const Pb = P.subarray(r0 * n), dOb = dO.subarray(r0 * qDim);
        k.sgemm(true, false, cols, hd, rows, 1, Pb, n, dOb, qDim, 1, dV, kvDim);
        k.sgemm(false, true, rows, cols, hd, 1, dOb, qDim, V, kvDim, 0, dP.subarray(r0 * n), n);
      }
      k.causalSoftmaxBackward(dP, P, n);
      for (const { r0, rows, cols } of queryBlocks(n)) {
        const dSb = dP.subarray(r0 * n);
        k.sgemm(false, false, rows, hd, cols, scale, dSb, n, K, kvDim, 0, dQ.subarray(r0 * qDim), qDim);
        k.sgemm(true, false, cols, hd, rows, scale, dSb, n, Q.subarray(r0 * qDim), qDim, 1, dK, kvDim);
      }
    }
  }
}
