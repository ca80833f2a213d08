// The embedded learner as the rest of the project sees it: the Learner contract over a worker
// that trains on the engine's own base weights (shared memory, not a copy). learn/ppo.ts drives
// it through that contract. Publishing returns a PolicyVersion carrying the weights in memory
// (and written to a folder when versionsDir is set) for any Sampler's use(); `publishTo` does
// both and times the swap.

import { Worker } from 'node:worker_threads';
import type { PolicyVersion } from '../policy-version.js';
import type { ForwardBackwardResult, Learner, LossSpec, OptimStepResult, TrainingSample } from '../types.js';
import type { LocalEngine } from './engine.js';
import type {
  FromLearner,
  LearnerReply,
  LearnerRequest,
  LearnerStatus,
  LearnerWorkerOptions,
} from './runtime/learner-protocol.js';
import { DEFAULT_LEARNER, type LearnerConfig } from './train/learner.js';
import { trainPrecisionOf } from './precision.js';

export interface LocalLearnerOptions {
  config?: Partial<LearnerConfig>;
  /** Checkpoints are written here, and the latest one is resumed on open. */
  checkpointDir?: string;
  /**
   * Each publication is also written here as v-<N>/ (a PEFT adapter or a model folder, the
   * PyTorch learner's layout), for samplers in other processes; the two newest are kept.
   */
  versionsDir?: string;
  /** Version folders kept in versionsDir: those within this many numbers of the newest (default 2; Infinity: all). */
  keepVersions?: number;
  threads?: number;
  /** Wait at each layer boundary while the engine has requests in flight (default true). */
  yieldToServing?: boolean;
  /** Longest wait at one such point, so training progresses under continuous load (default 100). */
  maxYieldMs?: number;
  /**
   * The next publication is max(versionAfter, the checkpoint's published version) + 1. Default:
   * the engine's serving version, which the engine requires publications to exceed.
   */
  versionAfter?: number;
}

export interface Publication {
  version: number;
  /** Taking the snapshot of the trained weights. */
  snapshotMs: number;
  /** The sampler switching to it, between two of its steps. */
  swapMs: number;
  /** Its folder (the version's weights on disk); null: published in memory only. */
  weightsPath: string | null;
}

export class LocalLearner implements Learner {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(r: LearnerReply): void; reject(e: Error): void }>();
  private closed = false;

  private constructor(
    private readonly worker: Worker,
    readonly config: LearnerConfig,
    readonly resumed: LearnerStatus,
  ) {
    worker.on('message', (m: FromLearner) => {
      if (m.type !== 'reply' && m.type !== 'failed') return;
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.type === 'reply') p?.resolve(m.result);
      else p?.reject(new Error(m.message));
    });
    const failAll = (e: Error) => {
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
    };
    worker.on('error', failAll);
    worker.on('exit', (code) => {
      if (!this.closed) failAll(new Error(`the learner worker exited (code ${code})`));
    });
  }

  /** A learner on `engine`'s model and base weights. */
  static async open(engine: LocalEngine, opts: LocalLearnerOptions = {}): Promise<LocalLearner> {
    // Unless told otherwise, the learner computes at the precision the engine serves at (bf16 behind int8).
    const config: LearnerConfig = {
      ...DEFAULT_LEARNER,
      precision: trainPrecisionOf(engine.info.precision),
      ...opts.config,
    };
    const maxYieldMs = opts.maxYieldMs ?? 100,
      versionAfter = opts.versionAfter ?? engine.version;
    if (!(maxYieldMs >= 0)) throw new RangeError(`maxYieldMs must be >= 0, got ${maxYieldMs}`);
    if (!(Number.isInteger(versionAfter) && versionAfter >= 0))
      throw new RangeError(`versionAfter must be a non-negative integer, got ${versionAfter}`);
    const workerOptions: LearnerWorkerOptions = {
      modelDir: engine.folder.dir,
      baseParams: engine.info.baseParams,
      baseBf16: engine.info.baseBf16,
      config,
      checkpointDir: opts.checkpointDir ?? null,
      versionsDir: opts.versionsDir ?? null,
      threads: opts.threads ?? 0,
      activity: (opts.yieldToServing ?? true) ? (engine.activity.buffer as SharedArrayBuffer) : null,
      maxYieldMs,
      versionAfter,
      keepVersions: opts.keepVersions ?? 2,
    };
    const worker = new Worker(new URL('./runtime/learner-worker.js', import.meta.url), { workerData: workerOptions });
    let onMessage: (m: FromLearner) => void = () => {};
    let onError: (e: Error) => void = () => {};
    const status = await new Promise<LearnerStatus>((resolve, reject) => {
      onMessage = (m) => {
        if (m.type === 'ready') resolve(m.status);
        else if (m.type === 'fatal') reject(new Error(m.message));
      };
      onError = reject;
      worker.on('message', onMessage).on('error', onError);
    })
      .catch(async (e: Error) => {
        await worker.terminate();
        throw e;
      })
      .finally(() => worker.off('message', onMessage).off('error', onError));
    return new LocalLearner(worker, config, status);
  }

  logprobs(samples: TrainingSample[]): Promise<Float32Array[]> {
    return this.request({ op: 'logprobs', samples }) as Promise<Float32Array[]>;
  }

  forwardBackward(
    samples: TrainingSample[],
    loss: LossSpec,
    batchSize = samples.length,
  ): Promise<ForwardBackwardResult> {
    return this.request({ op: 'forwardBackward', samples, loss, batchSize }) as Promise<ForwardBackwardResult>;
  }

  optimStep(): Promise<OptimStepResult> {
    return this.request({ op: 'optimStep' }) as Promise<OptimStepResult>;
  }

  /** The current weights as the next version: always in memory, also on disk with versionsDir. */
  publish(): Promise<PolicyVersion> {
    return this.request({ op: 'publish' }) as Promise<PolicyVersion>;
  }

  /** Publishes the current weights and makes `engine` serve them (its in-memory fast path). */
  async publishTo(engine: LocalEngine): Promise<Publication> {
    const t0 = performance.now();
    const version = await this.publish();
    const snapshotMs = performance.now() - t0;
    const swapMs = await engine.use(version);
    return { version: version.version, snapshotMs, swapMs, weightsPath: version.path };
  }

  /**
   * Replaces the trained weights with those of a version folder (a rollback; null: the start of
   * training, version 0) and resets AdamW's moments. Publish afterwards to serve them.
   */
  async restore(path: string | null): Promise<void> {
    await this.request({ op: 'restore', path });
  }

  async save(consumedSampleIds: string[]): Promise<void> {
    await this.request({ op: 'save', consumedSampleIds });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.worker.terminate();
    for (const p of this.pending.values()) p.reject(new Error('the learner was closed'));
    this.pending.clear();
  }

  private request(request: LearnerRequest): Promise<LearnerReply> {
    if (this.closed) return Promise.reject(new Error('the learner is closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, request });
    });
  }
}
