// What the operator sees: GET /admin/status (JSON) and the one-line progress status.

import type { JudgeHealth } from '../judge/health.js';
import type { Store } from '../store/store.js';
import type { LearnConfig, Method } from './config.js';
import type { FeedCounter, JudgingFeed } from './judging.js';
import type { Trainer, TrainerState } from './trainer.js';

export interface LearningStatus {
  method: Method;
  /** The policy version new requests are served with. */
  version: number;
  /** Optimizer steps done (over restarts). */
  steps: number;
  batches: number;
  batchSize: number;
  trainer: { state: TrainerState; error: string | null };
  turns: { main: number; side: number; open: number };
  queues: {
    /** Closed main turns waiting for the judge. */
    closedTurns: number;
    /** Turns in the judge's hands (waiting + running). */
    judging: number;
    /** Samples waiting for a batch. */
    samples: number;
  };
  /** By status; `waiting`: `steps` samples whose task group is not complete yet. */
  samples: { waiting: number; queued: number; trained: number; stale: number; too_long: number };
  /** The longest sample the learner takes (null: unbounded) and the judged turns left untrained as longer. */
  tooLong: { maxTrainTokens: number | null; turns: number };
  judge: {
    name: string;
    judged: number;
    skipped: number;
    /** Over the last 100 judged turns. */
    recent: { turns: number; scoreMean: number; agreementMean: number | null; hints: number };
    counters: Record<string, number>;
    /** Whether most recent votes failed; `summary` says so in words. */
    health: JudgeHealth;
  };
  /** Why judged turns produced no sample, teacher failures, commit failures. */
  feed: Record<FeedCounter, number>;
  lastBatch: {
    batch: number;
    version: number;
    step: number;
    loss: number;
    gradNorm: number;
    clipFraction: number;
    approxKl: number;
    rewardMean: number;
    hints: number;
    tokensPerSecond: number;
    seconds: number;
    publishMs: number;
  } | null;
  uptimeSeconds: number;
}

export function learningStatus(a: {
  store: Store;
  config: LearnConfig;
  feed: JudgingFeed;
  trainer: Trainer;
  servingVersion: number;
  judge: string;
  startedAt: number;
}): LearningStatus {
  const c = a.store.learning.counts();
  const kinds = a.store.db
    .prepare(
      `SELECT sum(kind = 'main') AS main, sum(kind = 'side') AS side, sum(kind = 'main' AND closure_reason IS NULL) AS open FROM turns`,
    )
    .get() as { main: number | null; side: number | null; open: number | null };
  const steps = a.store.learning.steps(1);
  const last = a.trainer.lastBatch;
  const lastStep = last?.steps[last.steps.length - 1];
  return {
    method: a.config.method,
    version: a.servingVersion,
    steps: steps[0]?.step ?? 0,
    batches: a.store.learning.lastBatch(),
    batchSize: a.config.batchSize,
    trainer: { state: a.trainer.state, error: a.trainer.error },
    turns: { main: kinds.main ?? 0, side: kinds.side ?? 0, open: kinds.open ?? 0 },
    queues: {
      closedTurns: c.closedPending,
      judging: a.feed.queue.waiting + a.feed.queue.running,
      samples: c.samples.queued,
    },
    samples: c.samples,
    tooLong: { maxTrainTokens: a.config.maxTrainTokens, turns: c.tooLongTurns },
    judge: {
      name: a.judge,
      judged: c.judgments - c.skipped,
      skipped: c.skipped,
      recent: a.store.learning.recentJudgments(100),
      counters: a.feed.queue.metrics.snapshot(),
      health: a.feed.queue.metrics.health(),
    },
    feed: { ...a.feed.counters },
    lastBatch:
      last && lastStep
        ? {
            batch: last.batch,
            version: last.version,
            step: lastStep.step,
            loss: lastStep.loss,
            gradNorm: lastStep.gradNorm,
            clipFraction: lastStep.clipFraction,
            approxKl: lastStep.approxKl,
            rewardMean: lastStep.rewardMean,
            hints: lastStep.hints,
            tokensPerSecond: lastStep.tokensPerSecond,
            seconds: last.steps.reduce((s, m) => s + m.seconds, 0),
            publishMs: last.publishMs,
          }
        : null,
    uptimeSeconds: Math.round((Date.now() - a.startedAt) / 1000),
  };
}

/** One line for the terminal: turns, judged, samples queued, step, version, reward mean. */
export function progressLine(s: LearningStatus): string {
  const reward =
    s.judge.recent.turns === 0
      ? '-'
      : `${s.judge.recent.scoreMean >= 0 ? '+' : ''}${s.judge.recent.scoreMean.toFixed(2)}`;
  const trainer =
    s.trainer.state === 'failed' ? ' · TRAINER FAILED (see log)' : s.trainer.state === 'training' ? ' · training' : '';
  const tooLong = s.tooLong.turns + s.samples.too_long;
  const untrained = tooLong > 0 ? `, ${tooLong} too long (> ${s.tooLong.maxTrainTokens} tokens)` : '';
  const waiting = s.samples.waiting > 0 ? `, ${s.samples.waiting} waiting for their task group` : '';
  const judge = s.judge.health.state === 'failing' ? ` · JUDGE FAILING: ${s.judge.health.summary}` : '';
  return (
    `[openclaw-rl] turns ${s.turns.main} main/${s.turns.side} side · judged ${s.judge.judged} (${s.queues.judging + s.queues.closedTurns} waiting) · ` +
    `samples ${s.queues.samples}/${s.batchSize} queued${waiting}, ${s.samples.trained} trained${untrained} · step ${s.steps} · version ${s.version} · reward ${reward}${trainer}${judge}`
  );
}
