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
  if (needed > cache.maxLength) throw new RangeError(`sequence of ${needed} tokens exceeds the model's context of ${cache.maxLength}`);
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

/** Bytes held by the cache, for memory accounting. */
export function kvCacheBytes(cache: KvCache): number {
  return cache.k.length * 2 * cache.capacity * cache.rowSize * 4;
}
