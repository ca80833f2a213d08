// Causal grouped-query attention over packed sequences, forward (keeping the probabilities)
// and backward, with one GEMM per (sequence, head) product.
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

/** Floats of probability storage for these sequences. */
export function probsSize(seqs: readonly PackedSequence[], nHeads: number): number {
  return seqs.reduce((a, s) => a + nHeads * s.length * s.length, 0);
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
      // P = scale * Q_h K_g^T, then a causal softmax per row.
      k.sgemm(false, true, n, n, hd, scale, q.subarray(s.start * qDim + h * hd), qDim, kk.subarray(s.start * kvDim + g * hd), kvDim, 0, P, n);
      k.causalSoftmax(P, n);
      // O_h = P V_g
      k.sgemm(false, false, n, hd, n, 1, P, n, v.subarray(s.start * kvDim + g * hd), kvDim, 0, out.subarray(s.start * qDim + h * hd), qDim);
    }
  }
}

/**
 * dq, dk, dv are overwritten. Per head: dV_g += P^T dO, dP = dO V_g^T,
 * dS = P * (dP - rowsum(P * dP)), dQ_h = scale dS K_g, dK_g += scale dS^T Q_h.
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
      const dO = dOut.subarray(s.start * qDim + h * hd);
      k.sgemm(true, false, n, hd, n, 1, P, n, dO, qDim, 1, dv.subarray(s.start * kvDim + g * hd), kvDim);
      k.sgemm(false, true, n, n, hd, 1, dO, qDim, v.subarray(s.start * kvDim + g * hd), kvDim, 0, dP, n);
      k.causalSoftmaxBackward(dP, P, n);
      k.sgemm(false, false, n, hd, n, scale, dP, n, kk.subarray(s.start * kvDim + g * hd), kvDim, 0, dq.subarray(s.start * qDim + h * hd), qDim);
      k.sgemm(true, false, n, hd, n, scale, dP, n, q.subarray(s.start * qDim + h * hd), qDim, 1, dk.subarray(s.start * kvDim + g * hd), kvDim);
    }
  }
}
