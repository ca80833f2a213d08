// Messages between the engine's public object (main thread) and the compute worker.

import type { ResolvedParams } from '../../sampler.js';
import type { GenerationEvent, PolicyUpdate, ScoredCompletion } from '../../types.js';
import type { KernelInfo } from '../kernels/kernels.js';
import type { KvCacheSetting } from '../kv-cache-budget.js';
import type { KvDtype } from '../model/kv-cache.js';
import type { Precision, PrecisionSetting } from '../precision.js';

export type { PolicyUpdate };

/** Sampling settings with every default resolved (by the main thread), the seed drawn if none was given. */
export type ResolvedSampling = Omit<ResolvedParams, 'seed'> & { seed: number };

export interface WorkerOptions {
  modelDir: string;
  /** Most tokens pushed through the model in one step (bounds the stall a long prompt causes). */
  maxStepTokens: number;
  /** BLAS threads; 0 leaves the library default. */
  threads: number;
  /** One Int32 the scheduler keeps equal to its jobs in flight (LocalEngine.activity). */
  activity: SharedArrayBuffer;
  /** Byte budget of the prefix cache of keys and values; 0 turns it off; null: the default at the resolved precision. */
  kvCacheBytes: number | null;
  /** The prefix cache's counters (prefix-cache-stats.ts), updated by the worker. */
  prefixStats: SharedArrayBuffer;
  /** The GEMMs' precision; auto is resolved by the worker, on its kernels. */
  precision: PrecisionSetting;
  /** The rows of the sequences' key/value caches; auto: kvDtypeOf the resolved precision. */
  kvCacheDtype: KvCacheSetting;
}

export type ToWorker =
  // Ids travel as a transferred Int32Array (plain arrays only when some id is no int32).
  | { type: 'generate'; id: number; promptIds: Int32Array | number[]; sampling: ResolvedSampling }
  | {
      type: 'score';
      id: number;
      promptIds: Int32Array | number[];
      completionIds: Int32Array | number[];
      topK: number;
      version: number;
    }
  | { type: 'publish'; update: PolicyUpdate }
  | { type: 'cancel'; id: number }
  | { type: 'shutdown' };

export interface WorkerInfo {
  kernels: 'native' | 'portable';
  kernelInfo: KernelInfo;
  precision: Precision;
  /** The rows of the sequences' key/value caches, resolved. */
  kvDtype: KvDtype;
  /** The prefix cache's byte budget, the default resolved (defaultKvCacheBytes of those rows). */
  kvCacheBytes: number;
  parameters: number;
  loadMs: number;
  /** The base weights (version 0), shared with a learner instead of copied. */
  baseParams: SharedArrayBuffer;
  /** At bf16, the base weights' bf16 copy (Uint16Array bits), shared with a learner likewise. */
  baseBf16: SharedArrayBuffer | null;
}

export type FromWorker =
  | { type: 'ready'; info: WorkerInfo }
  | { type: 'fatal'; message: string }
  | { type: 'events'; items: { id: number; event: GenerationEvent }[] }
  | { type: 'scored'; id: number; result: ScoredCompletion }
  | { type: 'failed'; id: number; message: string }
  | { type: 'published'; version: number; swapMs: number }
  | { type: 'publishFailed'; version: number; message: string };
