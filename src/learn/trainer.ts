// The background trainer: when a batch of fresh samples is queued, train it (PPO-clip with
// truncated importance weights against the sampler's log-probs), publish the result as a new
// serving version, commit the batch to the store, then checkpoint. The store is written before
// the checkpoint, and reconciled against it on restart, so a crash anywhere retrains exactly the
// batches the checkpoint lacks and never one twice. Between batches it applies rollbacks and the
// guard (learn/rollback.ts).

import type { JudgeLog } from '../judge/index.js';
import type { LearningTables, TrainedStep } from '../store/learning.js';
import type { StepMetrics } from '../engine/types.js';
import type { Sample } from '../types.js';
import type { LearnConfig } from './config.js';
import type { BatchSample } from './ppo.js';
import type { Rollbacks } from './rollback.js';

/** The policy side the trainer drives (LocalLearner + LocalEngine in `serve`; doubles in tests). */
export interface PolicyBackend {
  /** Trains one batch (learn/ppo.ts's trainBatch on the learner); one record per optimizer step. */
  trainBatch(samples: BatchSample[]): Promise<StepMetrics[]>;
  /** Makes the trained weights the serving version; resolves with it (and its folder, if written). */
  publish(): Promise<{ version: number; snapshotMs: number; swapMs: number; weightsPath?: string | null }>;
  /** Writes a checkpoint of the trained weights and optimizer (atomically). */
  checkpoint(): Promise<void>;
  /** The version new requests are served with. */
  servingVersion(): number;
  /**
   * Replaces the trained weights with a version folder's (null: the start of training) and resets
   * the optimizer's moments, for a rollback; absent: the learner cannot, and rollbacks are refused.
   */
  restore?(weightsPath: string | null): Promise<void>;
  /**
   * Abandons the batch in progress at once (shutdown): its trainBatch, publish or checkpoint
   * rejects, nothing of it is committed, and its samples stay queued for the next start.
   */
  stopTraining?(): Promise<void>;
}

export type TrainerState = 'waiting' | 'training' | 'failed' | 'closed';

export interface BatchReport {
  batch: number;
  version: number;
  steps: TrainedStep[];
  publishMs: number;
  checkpointMs: number | null;
}

export class Trainer {
  state: TrainerState = 'waiting';
  error: string | null = null;
  staleDropped = 0;
  lastBatch: BatchReport | null = null;
  private wake: (() => void) | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly tables: LearningTables,
    private readonly backend: PolicyBackend,
    private readonly config: LearnConfig,
    private readonly log: JudgeLog,
    private readonly rollbacks: Rollbacks | null = null,
  ) {}

  /** Starts the loop; it runs until close() or a failure (which stops learning, never serving). */
  start(): void {
    this.running ??= this.loop();
  }

  /** A sample arrived: look for a batch now rather than at the next poll. */
  notify(): void {
    this.wake?.();
  }

  async close(): Promise<void> {
    this.rollbacks?.abandon('serve is stopping; the request is applied at the next start');
    const busy = this.state === 'training';
    if (this.state !== 'failed') this.state = 'closed';
    this.notify();
    // A long batch would hold shutdown for minutes; what it has not committed is retrained later.
    if (busy) await this.backend.stopTraining?.();
    await this.running;
  }

  /** Trains one batch if one is ready; false when not enough fresh samples are queued. */
  async trainOnce(): Promise<boolean> {
    // close() may have come while the loop applied a rollback.
    if (this.closed()) return false;
    const minVersion = this.backend.servingVersion() - this.config.maxStaleVersions;
    const dropped = this.tables.dropStale(minVersion);
    if (dropped > 0) {
      this.staleDropped += dropped;
      this.log('samples_stale', { dropped, minVersion });
    }
    if (this.config.maxTrainTokens !== null) {
      const tooLong = this.tables.dropTooLong(this.config.maxTrainTokens);
      if (tooLong > 0) this.log('samples_too_long', { dropped: tooLong, maxTrainTokens: this.config.maxTrainTokens });
    }
    if (this.tables.queuedCount() < this.config.batchSize) return false;
    // The guard has yet to judge the serving version: the next batch waits (its samples stay queued).
    if (this.rollbacks?.holdsTraining()) return false;
    const samples = this.tables.takeBatch(this.config.batchSize);
    try {
      return await this.trainBatch(samples, dropped);
    } finally {
      // Committed batches have released their holds already; this frees a failed or stopped one's.
      this.tables.releaseBatch(samples.map((s) => s.id));
    }
  }

  private async trainBatch(samples: Sample[], dropped: number): Promise<boolean> {
    this.state = 'training';
    this.log('batch_started', {
      batch: this.tables.lastBatch() + 1,
      samples: samples.length,
      tokens: samples.reduce((a, s) => a + s.promptIds.length + s.completionIds.length, 0),
    });
    const metrics = await this.backend.trainBatch(samples.map(trainingSampleOf));
    if (this.closed()) return false;
    const t0 = performance.now();
    const published = await this.backend.publish();
    const publishMs = performance.now() - t0;
    const publishedAt = Date.now();
    const batch = this.tables.lastBatch() + 1;
    // A step's reward (steps method) where it has one, else the judge's score.
    const rewardMean = samples.reduce((a, s) => a + (s.reward ?? s.score), 0) / samples.length;
    const hints = samples.filter((s) => s.teacherLogprobs !== null).length;
    const steps = metrics.map((m, i) => ({ ...m, rewardMean, hints, staleDropped: i === 0 ? dropped : 0 }));
    const queues = this.tables.recordBatch(
      samples.map((s) => s.id),
      steps,
      batch,
      published.version,
      {
        version: published.version,
        publishedAt,
        step: steps[steps.length - 1]!.step,
        source: 'train',
        rolledBackFrom: null,
        restores: null,
        requestedBy: null,
        weightsPath: published.weightsPath ?? null,
      },
    );
    let checkpointMs: number | null = null;
    if (batch % this.config.checkpointEvery === 0) {
      const c0 = performance.now();
      await this.backend.checkpoint();
      checkpointMs = performance.now() - c0;
    }
    this.lastBatch = { batch, version: published.version, steps, publishMs, checkpointMs };
    const last = steps[steps.length - 1]!;
    this.log('batch_trained', {
      batch,
      step: last.step,
      version: published.version,
      samples: samples.length,
      sources: countBy(samples.map((s) => s.source)),
      rewardMean,
      hints,
      loss: last.loss,
      gradNorm: last.gradNorm,
      clipFraction: last.clipFraction,
      approxKl: last.approxKl,
      tisMean: last.tisMean,
      tokensPerSecond: last.tokensPerSecond,
      trainSeconds: steps.reduce((a, s) => a + s.seconds, 0),
      stepSeconds: steps.map((s) => s.seconds),
      yieldedMs: steps.reduce((a, s) => a + (s.yieldedMs ?? 0), 0),
      snapshotMs: published.snapshotMs,
      swapMs: published.swapMs,
      publishMs,
      publishedAt,
      checkpointMs,
      queues,
    });
    return true;
  }

  private closed(): boolean {
    return this.state === 'closed';
  }

  private async loop(): Promise<void> {
    while (this.state !== 'closed') {
      let trained = false;
      try {
        await this.rollbacks?.applyPending();
        this.rollbacks?.checkGuard();
        await this.rollbacks?.applyPending();
        trained = await this.trainOnce();
        if (this.state === 'training') this.state = 'waiting';
      } catch (e) {
        if (this.closed()) return;
        // The learner's weights may be ahead of the store now; stop learning (serving goes on)
        // and let a restart resume from the last checkpoint.
        this.state = 'failed';
        this.error = e instanceof Error ? e.message : String(e);
        this.log('trainer_failed', { message: this.error });
        this.rollbacks?.abandon(`the trainer stopped: ${this.error}; the request is applied at the next start`);
        return;
      }
      if (!trained && !this.closed())
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, this.config.pollMs);
          function done() {
            clearTimeout(timer);
            resolve();
          }
          this.wake = done;
        });
      this.wake = null;
    }
  }
}

/** A stored sample as the algorithm takes it: the RL part in `advantages`, the teacher term in `opd`. */
export function trainingSampleOf(s: Sample): BatchSample {
  return {
    promptIds: s.promptIds,
    completionIds: s.completionIds,
    advantages: new Array<number>(s.completionIds.length).fill(s.rlAdvantage),
    rolloutLogprobs: s.rolloutLogprobs,
    ...(s.teacherLogprobs && s.opdWeight !== 0
      ? { opd: { teacherLogprobs: s.teacherLogprobs, weight: s.opdWeight } }
      : {}),
  };
}

function countBy(values: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
