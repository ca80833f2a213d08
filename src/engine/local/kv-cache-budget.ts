// The default byte budget of the sampler's prefix cache (LocalEngineOptions.kvCacheBytes).

import { totalmem } from 'node:os';
import type { ModelConfig } from './model/config.js';
import { kvBytesPerToken } from './model/kv-cache.js';

/** Full-context sequences the default holds: a few conversations plus judge and teacher prompts. */
const DEFAULT_SEQUENCES = 4;
/** The most of the machine's memory the default takes: weights, requests and training need the rest. */
const MAX_MEMORY_SHARE = 0.25;

/**
 * Bytes for DEFAULT_SEQUENCES sequences of the model's full context, at
 * kvBytesPerToken = numLayers * 2 * numKvHeads * headDim * 4, capped at a quarter of the memory.
 * Qwen3-0.6B: 229,376 bytes per token, 40,960 positions: 37.6 GB uncapped, 4 GB on a 16 GB machine.
 */
export function defaultKvCacheBytes(cfg: ModelConfig, totalMemoryBytes = totalmem()): number {
  const sequences = DEFAULT_SEQUENCES * cfg.maxPositionEmbeddings * kvBytesPerToken(cfg);
  return Math.floor(Math.min(sequences, MAX_MEMORY_SHARE * totalMemoryBytes));
}
