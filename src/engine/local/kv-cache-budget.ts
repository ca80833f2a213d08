// The default byte budget of the sampler's prefix cache (LocalEngineOptions.kvCacheBytes).

import { totalmem } from 'node:os';
import type { ModelConfig } from './model/config.js';
import { type KvDtype, kvBytesPerToken } from './model/kv-cache.js';
import type { Precision } from './precision.js';

/** Full-context sequences the default holds: a few conversations plus judge and teacher prompts. */
const DEFAULT_SEQUENCES = 4;
/** The most of the machine's memory the default takes: weights, requests and training need the rest. */
const MAX_MEMORY_SHARE = 0.25;

/** --kv-cache-dtype: the rows of the sequences' caches, or auto (kvDtypeOf's default). */
export type KvCacheSetting = 'auto' | KvDtype;

const KV_CACHE_SETTINGS: readonly KvCacheSetting[] = ['auto', 'f32', 'bf16', 'int8'];

export function parseKvCacheSetting(s: string): KvCacheSetting {
  if ((KV_CACHE_SETTINGS as readonly string[]).includes(s)) return s as KvCacheSetting;
  throw new RangeError(`the key/value cache dtype must be ${KV_CACHE_SETTINGS.join(', ')}, got "${s}"`);
}

/**
 * The rows an engine at `precision` keeps: as set, or for auto bf16 wherever its weights have bf16
 * copies (bf16, int8) and f32 at fp32 (the exact reference). int8 rows are opt-in: 1.125 bytes a
 * value against bf16's 2, for logits 2.4-2.7x as far from f32's as bf16 rows' on the test models
 * (docs/engine.md, "int8 KV cache rows").
 */
export function kvDtypeOf(precision: Precision, setting: KvCacheSetting = 'auto'): KvDtype {
  if (setting !== 'auto') return setting;
  return precision === 'fp32' ? 'f32' : 'bf16';
}

/**
 * Bytes for DEFAULT_SEQUENCES sequences of the model's full context in `dtype` rows, at
 * kvBytesPerToken = numLayers * 2 * numKvHeads * headDim * (4, 2 or 1.125), capped at a quarter of the memory.
 * Qwen3-0.6B at f32: 229,376 bytes per token, 40,960 positions: 37.6 GB uncapped, 4 GB on a 16 GB
 * machine, where bf16 rows hold twice the tokens.
 */
export function defaultKvCacheBytes(cfg: ModelConfig, dtype: KvDtype, totalMemoryBytes = totalmem()): number {
  const sequences = DEFAULT_SEQUENCES * cfg.maxPositionEmbeddings * kvBytesPerToken(cfg, dtype);
  return Math.floor(Math.min(sequences, MAX_MEMORY_SHARE * totalMemoryBytes));
}
