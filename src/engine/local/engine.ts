// The embedded engine as the rest of the project sees it: a Sampler and a Scorer over one model
// folder. Weights and compute live in a worker thread; this object resolves defaults, routes
// messages and turns them into async iterables and promises.

import { Worker } from 'node:worker_threads';
import type { GenerationEvent, Sampler, SamplingParams, ScoredCompletion, ScoreOptions, Scorer } from '../types.js';
import { type ModelFolder, readModelFolder } from './model/folder.js';
import {
  createPrefixCacheStatsBuffer,
  type PrefixCacheStats,
  readPrefixCacheStats,
} from './runtime/prefix-cache-stats.js';
import type {
  FromWorker,
  PolicyUpdate,
  ResolvedSampling,
  ToWorker,
  WorkerInfo,
  WorkerOptions,
} from './runtime/protocol.js';
import type { PolicyVersion } from '../policy-version.js';
import { resolveSamplingParams } from '../sampler.js';
import { readPolicyUpdate } from './policy-versions.js';
import { type KvCacheSetting, parseKvCacheSetting } from './kv-cache-budget.js';
import { parsePrecision, type PrecisionSetting } from './precision.js';
import { randomSeed } from './sampling/random.js';

export type { PrefixCacheStats };

export interface LocalEngineOptions {
  /** Most tokens in one forward step (default 256). */
  maxStepTokens?: number;
  /** BLAS threads (default: the library's choice). */
  threads?: number;
  /**
   * Byte budget of the prefix cache, which keeps the keys and values of earlier requests so that
   * a prompt sharing a prefix with one computes only the rest; 0 turns it off. Default:
   * defaultKvCacheBytes of the config in the resolved precision's rows (bf16 at bf16 and int8), in
   * `info.kvCacheBytes`.
   */
  kvCacheBytes?: number;
  /**
   * The GEMMs' precision (precision.ts): fp32 (default, the exact path), bf16 (projections and
   * LM head from bf16 copies of the weights, decode included), int8 (as bf16, but decode steps
   * read int8 copies), or auto (int8 where the native kernels have bf16 instructions and
   * AVX512-VNNI, else bf16 where they have bf16 instructions, else fp32; resolvePrecision). The
   * resolved one is in `info.precision`.
   */
  precision?: PrecisionSetting;
  /**
   * The rows of the sequences' key/value caches: f32, bf16, int8 (a byte a value and a scale per
   * 32: decode at long contexts streams about half the bytes of bf16) or auto (default: bf16 at
   * bf16 and int8 precision, f32 at fp32). The resolved one is in `info.kvDtype`.
   */
  kvCacheDtype?: KvCacheSetting;
}

interface Stream {
  push(e: GenerationEvent): void;
  fail(err: Error): void;
}

export class LocalEngine implements Sampler, Scorer {
  /**
   * Shared with the worker (SharedArrayBuffer): activity[0] is the number of generation and
   * scoring jobs the scheduler has in flight, 0 when idle, stored every step and whenever a job
   * is added or finishes, and Atomics.notify'd when it becomes 0. A learner reads it to yield
   * the CPU to serving.
   */
  readonly activity: Int32Array;
  private nextId = 1;
  private readonly streams = new Map<number, Stream>();
  private readonly scores = new Map<number, { resolve(r: ScoredCompletion): void; reject(e: Error): void }>();
  private readonly publications = new Map<number, { resolve(swapMs: number): void; reject(e: Error): void }>();
  private servingVersion = 0;
  private closed = false;

  private constructor(
    private readonly worker: Worker,
    readonly folder: ModelFolder,
    readonly info: WorkerInfo,
    activity: SharedArrayBuffer,
    private readonly prefixStats: SharedArrayBuffer,
  ) {
    this.activity = new Int32Array(activity);
    worker.on('message', (m: FromWorker) => this.onMessage(m));
    worker.on('error', (e) => this.failAll(e));
    worker.on('exit', (code) => {
      this.markIdle();
      if (!this.closed) this.failAll(new Error(`the engine worker exited (code ${code})`));
    });
  }

  static async open(modelDir: string, opts: LocalEngineOptions = {}): Promise<LocalEngine> {
    const folder = readModelFolder(modelDir); // fail fast, before any thread starts
    const activity = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
    const kvCacheBytes = opts.kvCacheBytes ?? null;
    if (kvCacheBytes !== null && !(Number.isSafeInteger(kvCacheBytes) && kvCacheBytes >= 0)) {
      throw new RangeError(`kvCacheBytes must be a non-negative integer, got ${kvCacheBytes}`);
    }
    const prefixStats = createPrefixCacheStatsBuffer();
    const precision = parsePrecision(opts.precision ?? 'fp32');
    const kvCacheDtype = parseKvCacheSetting(opts.kvCacheDtype ?? 'auto');
    const workerOptions: WorkerOptions = {
      modelDir,
      maxStepTokens: opts.maxStepTokens ?? 256,
      threads: opts.threads ?? 0,
      activity,
      kvCacheBytes,
      prefixStats,
      precision,
      kvCacheDtype,
    };
    const worker = new Worker(new URL('./runtime/worker.js', import.meta.url), { workerData: workerOptions });
    // Listeners are removed by name: removeAllListeners() would also drop the Worker's own
    // internal listener that starts its message port.
    let onMessage: (m: FromWorker) => void = () => {};
    let onError: (e: Error) => void = () => {};
    let onExit: (code: number) => void = () => {};
    const info = await new Promise<WorkerInfo>((resolve, reject) => {
      onMessage = (m) => {
        if (m.type === 'ready') resolve(m.info);
        else if (m.type === 'fatal') reject(new Error(m.message));
      };
      onError = reject;
      onExit = (code) => reject(new Error(`the engine worker exited (code ${code}) while loading ${modelDir}`));
      worker.on('message', onMessage).on('error', onError).on('exit', onExit);
    })
      .catch(async (e: Error) => {
        await worker.terminate();
        throw e;
      })
      .finally(() => {
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      });
    return new LocalEngine(worker, folder, info, activity, prefixStats);
  }

  generate(
    promptIds: readonly number[],
    params: SamplingParams = {},
    signal?: AbortSignal,
  ): AsyncIterable<GenerationEvent> {
    const sampling = this.resolve(params, promptIds.length);
    const id = this.nextId++;
    const queue: GenerationEvent[] = [];
    let failure: Error | null = null;
    let notify: (() => void) | null = null;
    let done = false;
    const wakeUp = () => {
      notify?.();
      notify = null;
    };
    this.streams.set(id, {
      push: (e) => {
        queue.push(e);
        wakeUp();
      },
      fail: (err) => {
        failure = err;
        wakeUp();
      },
    });
    const ids = toWire(promptIds);
    this.post({ type: 'generate', id, promptIds: ids, sampling }, transferOf(ids));
    const cancel = () => {
      if (!done) this.post({ type: 'cancel', id });
    };
    signal?.addEventListener('abort', cancel, { once: true });
    const self = this;
    return {
      async *[Symbol.asyncIterator]() {
        try {
          while (true) {
            while (queue.length > 0) {
              const e = queue.shift()!;
              yield e;
              if (e.type === 'finish') {
                done = true;
                return;
              }
            }
            if (failure) throw failure;
            await new Promise<void>((resolve) => {
              notify = resolve;
            });
          }
        } finally {
          signal?.removeEventListener('abort', cancel);
          if (!done) cancel();
          done = true;
          self.streams.delete(id);
        }
      },
    };
  }

  logprobs(
    promptIds: readonly number[],
    completionIds: readonly number[],
    opts: ScoreOptions = {},
  ): Promise<ScoredCompletion> {
    if (completionIds.length === 0) return Promise.resolve({ logprobs: [], ...(opts.topK ? { top: [] } : {}) });
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.scores.set(id, { resolve, reject });
      const [prompt, completion] = [toWire(promptIds), toWire(completionIds)];
      this.post(
        {
          type: 'score',
          id,
          promptIds: prompt,
          completionIds: completion,
          topK: opts.topK ?? 0,
          version: opts.version ?? 0,
        },
        [...transferOf(prompt), ...transferOf(completion)],
      );
    });
  }

  /** What the prefix cache has served and holds, read from memory the worker updates (no message). */
  prefixCacheStats(): PrefixCacheStats {
    return readPrefixCacheStats(this.prefixStats);
  }

  /** The version new requests run on. */
  get version(): number {
    return this.servingVersion;
  }

  /**
   * Makes `update` the version new requests run on, between two steps of the worker, without
   * pausing: requests in flight finish on the version they started with. Resolves with the
   * time the worker took to switch.
   */
  publish(update: PolicyUpdate): Promise<number> {
    if (update.version <= this.servingVersion)
      return Promise.reject(
        new Error(`version ${update.version} is not newer than the serving version ${this.servingVersion}`),
      );
    return new Promise<number>((resolve, reject) => {
      this.publications.set(update.version, { resolve, reject });
      this.post({ type: 'publish', update });
    });
  }

  /**
   * The Sampler contract's switch: makes `version` the one new requests run on, as publish does.
   * Its in-memory update when it carries one (learner and engine in one process), else its
   * folder, read here and checked against this engine's model.
   */
  async use(version: PolicyVersion): Promise<number> {
    return this.publish(readPolicyUpdate(version, this.folder.config));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.failAll(new Error('the engine was closed'));
    this.worker.postMessage({ type: 'shutdown' } satisfies ToWorker);
    await this.worker.terminate();
    this.markIdle();
  }

  /** A stopped worker serves nothing; a learner waiting on the count must not wait for it. */
  private markIdle(): void {
    Atomics.store(this.activity, 0, 0);
    Atomics.notify(this.activity, 0);
  }

  private resolve(p: SamplingParams, promptTokens: number): ResolvedSampling {
    const resolved = resolveSamplingParams(p, promptTokens, this.folder.config.maxPositionEmbeddings);
    return { ...resolved, seed: resolved.seed ?? randomSeed() };
  }

  private post(m: ToWorker, transfer: ArrayBuffer[] = []): void {
    if (this.closed) throw new Error('the engine is closed');
    this.worker.postMessage(m, transfer);
  }

  private onMessage(m: FromWorker): void {
    if (m.type === 'events') {
      for (const { id, event } of m.items) {
        this.streams.get(id)?.push(event);
        // Nothing follows a finish: the stream keeps its events for its reader, if it ever reads.
        if (event.type === 'finish') this.streams.delete(id);
      }
    } else if (m.type === 'scored') {
      this.scores.get(m.id)?.resolve(m.result);
      this.scores.delete(m.id);
    } else if (m.type === 'failed') {
      const err = new Error(m.message);
      this.streams.get(m.id)?.fail(err);
      this.streams.delete(m.id);
      this.scores.get(m.id)?.reject(err);
      this.scores.delete(m.id);
    } else if (m.type === 'published') {
      this.servingVersion = Math.max(this.servingVersion, m.version);
      this.publications.get(m.version)?.resolve(m.swapMs);
      this.publications.delete(m.version);
    } else if (m.type === 'publishFailed') {
      this.publications.get(m.version)?.reject(new Error(m.message));
      this.publications.delete(m.version);
    } else if (m.type === 'fatal') {
      this.failAll(new Error(m.message));
    }
  }

  private failAll(err: Error): void {
    for (const s of this.streams.values()) s.fail(err);
    for (const s of this.scores.values()) s.reject(err);
    this.scores.clear();
    for (const p of this.publications.values()) p.reject(err);
    this.publications.clear();
  }
}

/**
 * Token ids as they travel to the worker: an Int32Array whose buffer is moved, not copied (a
 * 50k-token prompt: 0.3 ms on the serving thread instead of 1.6 ms of copying and cloning). Ids
 * that are no int32 travel as they are, so the worker's check reports them as before.
 */
function toWire(ids: readonly number[]): Int32Array | number[] {
  for (const id of ids) if (!Number.isInteger(id) || id < -0x80000000 || id > 0x7fffffff) return [...ids];
  return Int32Array.from(ids);
}

function transferOf(ids: Int32Array | number[]): ArrayBuffer[] {
  return ids instanceof Int32Array ? [ids.buffer as ArrayBuffer] : [];
}
