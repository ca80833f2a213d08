// Per-sequence key/value cache: for each layer, K and V rows [capacity, numKvHeads*headDim],
// grown by doubling up to the model's context. The rows are float32 (the fp32 engine: the exact
// reference), bf16 bits (the bf16 and int8 engines' default) or int8 with a float32 scale per
// block of 32 values (--kv-cache-dtype int8: 1.125 bytes a value against bf16's 2). A decode step
// reads every cached row once, so at long contexts the cache, not the weights, is most of the
// bytes a token streams.

import { INT8_BLOCK } from '../kernels/int8.js';
import type { ModelConfig } from './config.js';

/** The element type of a cache's rows. */
export type KvDtype = 'f32' | 'bf16' | 'int8';

/** int8 rows in quantizeInt8's format: value i is scales[i / 32] * values[i]. */
export interface Int8Rows {
  readonly values: Int8Array;
  readonly scales: Float32Array;
}

/** One layer's K or V rows: float32, bf16 bits, or int8 with scales. */
export type KvRows = Float32Array | Uint16Array | Int8Rows;

export function isInt8Rows(rows: KvRows): rows is Int8Rows {
  return !ArrayBuffer.isView(rows);
}

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
  if (dtype === 'int8') return { values: new Int8Array(elements), scales: new Float32Array(elements / INT8_BLOCK) };
  return dtype === 'bf16' ? new Uint16Array(elements) : new Float32Array(elements);
}

/** rows[0 .. elements) copied into `into` (rows of the same dtype, at least that long). */
function copyRows(into: KvRows, rows: KvRows, elements: number): void {
  if (isInt8Rows(into) && isInt8Rows(rows)) {
    into.values.set(rows.values.subarray(0, elements));
    into.scales.set(rows.scales.subarray(0, elements / INT8_BLOCK));
  } else if (!isInt8Rows(into) && !isInt8Rows(rows)) {
    into.set(rows.subarray(0, elements));
  } else throw new TypeError('cannot copy int8 rows into rows of another dtype, or back');
}

function rowsBytes(rows: KvRows): number {
  return isInt8Rows(rows) ? rows.values.byteLength + rows.scales.byteLength : rows.byteLength;
}

/** Throws when the model's caches cannot hold `dtype` rows (int8 blocks must not straddle heads). */
export function checkKvDtype(cfg: ModelConfig, dtype: KvDtype): void {
  if (dtype === 'int8' && cfg.headDim % INT8_BLOCK !== 0)
    throw new RangeError(
      `an int8 key/value cache needs head_dim a multiple of ${INT8_BLOCK}; this model's is ${cfg.headDim}: use bf16`,
    );
}

export function createKvCache(
  cfg: ModelConfig,
  initialCapacity = 64,
  maxLength = cfg.maxPositionEmbeddings,
  dtype: KvDtype = 'f32',
): KvCache {
  checkKvDtype(cfg, dtype);
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
    copyRows(next, old, cache.length * cache.rowSize);
    return next;
  };
  cache.k = cache.k.map(grow);
  cache.v = cache.v.map(grow);
  cache.capacity = capacity;
}

/** Bytes of the arrays the cache holds, for memory accounting. */
export function kvCacheBytes(cache: KvCache): number {
  let bytes = 0;
  for (let l = 0; l < cache.k.length; l++) bytes += rowsBytes(cache.k[l]!) + rowsBytes(cache.v[l]!);
  return bytes;
}

/**
 * Bytes of keys and values per token: numLayers * 2 (K and V) * numKvHeads * headDim * 4 (f32),
 * 2 (bf16) or 1.125 (int8: a byte a value and a 4-byte scale per 32).
 */
export function kvBytesPerToken(cfg: ModelConfig, dtype: KvDtype = 'f32'): number {
  const bytes = dtype === 'int8' ? 1 + 4 / INT8_BLOCK : dtype === 'bf16' ? 2 : 4;
  return cfg.numLayers * 2 * cfg.numKvHeads * cfg.headDim * bytes;
}

/** Writes the first `n` positions of `from` into `to` (a copy: both stay appendable on their own). */
export function copyKvPrefix(from: KvCache, to: KvCache, n: number): void {
  if (n > from.length) throw new RangeError(`cannot copy ${n} positions from a cache of ${from.length}`);
  if (from.dtype !== to.dtype)
    throw new TypeError(`cannot copy ${from.dtype} keys and values into a ${to.dtype} cache`);
  reserveKvCache(to, n);
  const size = n * from.rowSize;
  for (let l = 0; l < from.k.length; l++) {
    copyRows(to.k[l]!, from.k[l]!, size);
    copyRows(to.v[l]!, from.v[l]!, size);
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
  const cut = (a: KvRows): KvRows =>
    isInt8Rows(a)
      ? { values: a.values.slice(0, size), scales: a.scales.slice(0, size / INT8_BLOCK) }
      : a.slice(0, size);
  return { ...cache, capacity: cache.length, k: cache.k.map(cut), v: cache.v.map(cut) };
}
