// Attention of one segment (new tokens of one sequence) against its KV cache, choosing the kernel
// by the number of query rows. The one-row kernel (Kernels.attention) reads the whole K and V once
// per query row: right for decoding, but a prompt chunk of 300 rows against 16k cached keys then
// streams K and V 300 times (memory-bound). With many rows, each head's blocks of query rows go
// through BLAS instead, reading K and V once per block (train/attention.ts's scheme, forward only):
//   S = scale * Q_b K^T over key columns 0 .. start + r0 + rows (sgemm),
//   P = causal softmax per row (causalSoftmaxRows, row r0 + i seeing columns 0 .. start + r0 + i),
//   O_b = P V (sgemm).
// Stacking the query heads that share a kv head into one block (one pass over K and V for the
// group) was measured too: no faster at these shapes, the score block's traffic dominates.
// A cache of bf16 rows (kv-cache.ts) goes to the native kernel prefillAttentionBf16 where there is
// one (flash-attention style: the keys in chunks, an online softmax, no score block over every
// key), else through gemmBf16 instead of sgemm: Q and P are rounded to bf16 as the products read
// them, as in the training attention at bf16.
// A cache of int8 rows (--kv-cache-dtype int8) goes to attentionInt8 below BLOCKED_MIN_ROWS (decode:
// the rows are read as they are, 1.125 bytes a value); a longer segment first turns the rows it
// sees back into bf16 (dequantizeInt8Bf16, once for all heads) and takes the bf16 paths.

import type { Kernels } from '../kernels/kernels.js';
import type { ModelConfig } from './config.js';
import { isInt8Rows, type KvRows } from './kv-cache.js';

export type AttentionHeads = Pick<ModelConfig, 'numHeads' | 'numKvHeads' | 'headDim'>;

/**
 * Below this many query rows the one-row kernel is faster (bench/prefill-attention.ts: at 4 rows
 * the two are even, from 8 rows the GEMMs win at every cache length tried, 256 to 16k keys).
 */
export const BLOCKED_MIN_ROWS = 8;

/**
 * From this many query rows a bf16 cache goes to prefillAttentionBf16, which pads a short segment's
 * block to 32, 64 or 128 rows and stacks the query heads of a KV head into one block: after 16k keys
 * 0.99x the GEMM path at 8 rows, 1.30x at 16 and 1.79x at 32; after 1k keys 1.49x at 8 and 1.85x at
 * 16 (docs/cpu-performance.md, session 27).
 */
export const FLASH_MIN_ROWS = 8;

/** Query rows per block and head, as in training: 64 and 256 measured no faster. */
export const QUERY_BLOCK = 128;

/** Scratch memory: `floats` floats the call may overwrite, one buffer per purpose. */
export type AttentionScratch = (floats: number, purpose: 'scores' | 'rows') => Float32Array;

/**
 * out[Tq, H*hd] = causal attention of q[Tq, H*hd] (positions start .. start+Tq-1) over the cache
 * rows k, v [start+Tq, KV*hd] (row stride KV*hd, rows start .. already written). `scratch` gives
 * O(QUERY_BLOCK * (start + Tq)) floats for scores, never n^2, and for int8 rows (start + Tq) * KV*hd
 * more for their bf16 copies.
 */
export function segmentAttention(
  kernels: Kernels,
  out: Float32Array,
  q: Float32Array,
  k: KvRows,
  v: KvRows,
  Tq: number,
  start: number,
  heads: AttentionHeads,
  scratch: AttentionScratch,
): void {
  const { numHeads: H, numKvHeads: KV, headDim: hd } = heads;
  const scale = 1 / Math.sqrt(hd),
    scores = (floats: number) => scratch(floats, 'scores');
  if (isInt8Rows(k) || isInt8Rows(v)) {
    if (!isInt8Rows(k) || !isInt8Rows(v)) throw new TypeError('k and v must both be int8 rows, or neither');
    if (Tq < BLOCKED_MIN_ROWS) {
      kernels.attentionInt8(out, q, k.values, k.scales, v.values, v.scales, Tq, start, H, KV, hd, KV * hd, scale);
      return;
    }
    const n = (start + Tq) * KV * hd;
    const copy = scratch(n, 'rows');
    const bits = new Uint16Array(copy.buffer, copy.byteOffset, 2 * n);
    const kb = bits.subarray(0, n),
      vb = bits.subarray(n);
    kernels.dequantizeInt8Bf16(kb, k.values, k.scales, n);
    kernels.dequantizeInt8Bf16(vb, v.values, v.scales, n);
    blockedAttention(kernels, out, q, kb, vb, Tq, start, heads, scores);
  } else if (Tq < BLOCKED_MIN_ROWS) kernels.attention(out, q, k, v, Tq, start, H, KV, hd, KV * hd, scale);
  else blockedAttention(kernels, out, q, k, v, Tq, start, heads, scores);
}

/** The GEMM path of segmentAttention, for any Tq (exported for the benchmark and the tests). */
export function blockedAttention(
  kernels: Kernels,
  out: Float32Array,
  q: Float32Array,
  k: Float32Array | Uint16Array,
  v: Float32Array | Uint16Array,
  Tq: number,
  start: number,
  heads: AttentionHeads,
  scratch: (floats: number) => Float32Array,
): void {
  const { numHeads: H, numKvHeads: KV, headDim: hd } = heads;
  if (Tq >= FLASH_MIN_ROWS && k instanceof Uint16Array && v instanceof Uint16Array) {
    if (kernels.prefillAttentionBf16?.(out, q, k, v, Tq, start, H, KV, hd)) return;
  }
  const group = H / KV,
    qDim = H * hd,
    kvDim = KV * hd,
    scale = 1 / Math.sqrt(hd);
  const maxRows = Math.min(QUERY_BLOCK, Tq),
    maxCols = start + Tq;
  const mem = scratch(maxRows * (maxCols + 1));
  const S = mem.subarray(0, maxRows * maxCols);
  const lse = mem.subarray(maxRows * maxCols); // written by the softmax, not needed here
  for (let h = 0; h < H; h++) {
    const g = Math.floor(h / group);
    const Q = q.subarray(h * hd),
      O = out.subarray(h * hd),
      K = k.subarray(g * hd),
      V = v.subarray(g * hd);
    for (let r0 = 0; r0 < Tq; r0 += QUERY_BLOCK) {
      // Rows r0 .. r0+rows-1 are positions start+r0 .., which see key columns 0 .. start+r0+i.
      const rows = Math.min(QUERY_BLOCK, Tq - r0),
        cols = start + r0 + rows;
      const P = S.subarray(0, rows * cols);
      const Qb = Q.subarray(r0 * qDim),
        Ob = O.subarray(r0 * qDim);
      if (K instanceof Uint16Array)
        kernels.gemmBf16(false, true, rows, cols, hd, scale, Qb, qDim, K, kvDim, 0, P, cols);
      else kernels.sgemm(false, true, rows, cols, hd, scale, Qb, qDim, K, kvDim, 0, P, cols);
      kernels.causalSoftmaxRows(P, lse.subarray(0, rows), rows, cols, start + r0);
      if (V instanceof Uint16Array) kernels.gemmBf16(false, false, rows, hd, cols, 1, P, cols, V, kvDim, 0, Ob, qDim);
      else kernels.sgemm(false, false, rows, hd, cols, 1, P, cols, V, kvDim, 0, Ob, qDim);
    }
  }
}
