// Per-sequence key/value cache: for each layer, K and V rows [capacity, numKvHeads*headDim],
// grown by doubling up to the model's context. The rows are float32 (the fp32 engine: the exact
// reference) or bf16 bits (the bf16 and int8 engines): a decode step reads every cached row once,
// so at long contexts the cache, not the weights, is most of the bytes a token streams.

import type { ModelConfig } from './config.js';

/** The element type of a cache's rows. */
export type KvDtype = 'f32' | 'bf16';

/** One layer's K or V rows: float32, or bf16 bits. */
export type KvRows = Float32Array | Uint16Array;

export interface KvCache {
  /** Positions already written (the next token goes to position `length`). */
  length: number;
  capacity: number;
  readonly maxLength: number;
  readonly rowSize: number;
  readonly dtype: KvDtype;
  k: KvRows[];
  v: KvRows[];
}

function rowsOf(dtype: KvDtype, elements: number): KvRows {
  return dtype === 'bf16' ? new Uint16Array(elements) : new Float32Array(elements);
}

export function createKvCache(
  cfg: ModelConfig,
  initialCapacity = 64,
  maxLength = cfg.maxPositionEmbeddings,
  dtype: KvDtype = 'f32',
): KvCache {
  const rowSize = cfg.numKvHeads * cfg.headDim;
  const capacity = Math.min(initialCapacity, maxLength);
  const alloc = () => Array.from({ length: cfg.numLayers }, () => rowsOf(dtype, capacity * rowSize));
  return { length: 0, capacity, maxLength, rowSize, dtype, k: alloc(), v: alloc() };
}

/** Makes room for `needed` positions in total; throws past the model's context. */
export function reserveKvCache(cache: KvCache, needed: number): void {
  if (needed <= cache.capacity) return;
  if (needed > cache.maxLength)
    throw new RangeError(`sequence of ${needed} tokens exceeds the model's context of ${cache.maxLength}`);
  let capacity = cache.capacity;
  while (capacity < needed) capacity *= 2;
  capacity = Math.min(capacity, cache.maxLength);
  const grow = (old: KvRows) => {
    const next = rowsOf(cache.dtype, capacity * cache.rowSize);
    next.set(old.subarray(0, cache.length * cache.rowSize));
    return next;
  };
  cache.k = cache.k.map(grow);
  cache.v = cache.v.map(grow);
  cache.capacity = capacity;
}

/** Bytes of the arrays the cache holds, for memory accounting. */
export function kvCacheBytes(cache: KvCache): number {
  let bytes = 0;
  for (let l = 0; l < cache.k.length; l++) bytes += cache.k[l]!.byteLength + cache.v[l]!.byteLength;
  return bytes;
}

/** Bytes of keys and values per token: numLayers * 2 (K and V) * numKvHeads * headDim * 4 (f32) or 2 (bf16). */
export function kvBytesPerToken(cfg: ModelConfig, dtype: KvDtype = 'f32'): number {
  return cfg.numLayers * 2 * cfg.numKvHeads * cfg.headDim * (dtype === 'bf16' ? 2 : 4);
}

/** Writes the first `n` positions of `from` into `to` (a copy: both stay appendable on their own). */
export function copyKvPrefix(from: KvCache, to: KvCache, n: number): void {
  if (n > from.length) throw new RangeError(`cannot copy ${n} positions from a cache of ${from.length}`);
  if (from.dtype !== to.dtype)
    throw new TypeError(`cannot copy ${from.dtype} keys and values into a ${to.dtype} cache`);
  reserveKvCache(to, n);
  const size = n * from.rowSize;
  for (let l = 0; l < from.k.length; l++) {
    to.k[l]!.set(from.k[l]!.subarray(0, size));
    to.v[l]!.set(from.v[l]!.subarray(0, size));
  }
  to.length = n;
}

/**
 * The cache with its capacity cut to its length when more than an eighth of it is unused (a
 * finished sequence that is only read from now on); the same object otherwise.
 */
export function trimKvCache(cache: KvCache): KvCache {
  if (cache.length === 0 || (cache.capacity - cache.length) * 8 <= cache.capacity) return cache;
  const size = cache.length * cache.rowSize;
  const cut = (a: KvRows) => a.slice(0, size);
  return { ...cache, capacity: cache.length, k: cache.k.map(cut), v: cache.v.map(cut) };
}
