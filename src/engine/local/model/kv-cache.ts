// Per-sequence key/value cache: for each layer, K and V rows [capacity, numKvHeads*headDim],
// grown by doubling up to the model's context.

import type { ModelConfig } from './config.js';

export interface KvCache {
  /** Positions already written (the next token goes to position `length`). */
  length: number;
  capacity: number;
  readonly maxLength: number;
  readonly rowSize: number;
  k: Float32Array[];
  v: Float32Array[];
}

export function createKvCache(cfg: ModelConfig, initialCapacity = 64, maxLength = cfg.maxPositionEmbeddings): KvCache {
  const rowSize = cfg.numKvHeads * cfg.headDim;
  const capacity = Math.min(initialCapacity, maxLength);
  const alloc = () => Array.from({ length: cfg.numLayers }, () => new Float32Array(capacity * rowSize));
  return { length: 0, capacity, maxLength, rowSize, k: alloc(), v: alloc() };
}

/** Makes room for `needed` positions in total; throws past the model's context. */
export function reserveKvCache(cache: KvCache, needed: number): void {
  if (needed <= cache.capacity) return;
  if (needed > cache.maxLength)
    throw new RangeError(`sequence of ${needed} tokens exceeds the model's context of ${cache.maxLength}`);
  let capacity = cache.capacity;
  while (capacity < needed) capacity *= 2;
  capacity = Math.min(capacity, cache.maxLength);
  const grow = (old: Float32Array) => {
    const next = new Float32Array(capacity * cache.rowSize);
    next.set(old.subarray(0, cache.length * cache.rowSize));
    return next;
  };
  cache.k = cache.k.map(grow);
  cache.v = cache.v.map(grow);
  cache.capacity = capacity;
}

/** Bytes of the Float32Arrays the cache holds, for memory accounting. */
export function kvCacheBytes(cache: KvCache): number {
  let bytes = 0;
  for (let l = 0; l < cache.k.length; l++) bytes += cache.k[l]!.byteLength + cache.v[l]!.byteLength;
  return bytes;
}

/** Bytes of keys and values per token: numLayers * 2 (K and V) * numKvHeads * headDim * 4 (float32). */
export function kvBytesPerToken(cfg: ModelConfig): number {
  return cfg.numLayers * 2 * cfg.numKvHeads * cfg.headDim * 4;
}

/** Writes the first `n` positions of `from` into `to` (a copy: both stay appendable on their own). */
export function copyKvPrefix(from: KvCache, to: KvCache, n: number): void {
  if (n > from.length) throw new RangeError(`cannot copy ${n} positions from a cache of ${from.length}`);
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
  const cut = (a: Float32Array) => a.slice(0, size);
  return { ...cache, capacity: cache.length, k: cache.k.map(cut), v: cache.v.map(cut) };
}
