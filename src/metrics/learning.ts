// The learning loop's families. Read at scrape time from LearningStatus (the store's counts, the
// feed's counters, the trainer's last batch): samples, queues, steps, the last step's loss, reward
// mean, KL and clip fraction. Fed at the event from the loop's log (batch_trained): each step's
// duration, each publication's duration and time.

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { LearningStatus } from '../learn/status.js';
import type { TrainerState } from '../learn/trainer.js';
import { byLabel, scrapedCounter, scrapedGauge, type Reading } from './scraped.js';

const TRAINER_STATES: readonly TrainerState[] = ['waiting', 'training', 'failed', 'closed'];
const NO_SAMPLE_REASONS = ['no_next_state', 'abstained', 'no_hint', 'teacher_failed', 'too_long'] as const;
const TEACHER_FAILURES = ['prompt_not_reproducible', 'too_long', 'scoring_failed'] as const;
/** A step takes a fraction of a second on a tiny model, minutes on a large one on a CPU. */
const STEP_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];
const PUBLISH_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function registerLearningMetrics(registry: Registry, learning: () => LearningStatus | null): void {
  const read =
    (f: (s: LearningStatus) => number | null): (() => Reading) =>
    () => {
      const s = learning();
      return s ? f(s) : null;
    };
  const readLabels =
    (f: (s: LearningStatus) => Reading): (() => Reading) =>
    () => {
      const s = learning();
      return s ? f(s) : null;
    };

  scrapedCounter(
    registry,
    { name: 'openclaw_rl_train_steps_total', help: 'Optimizer steps taken (kept over restarts by the store)' },
    read((s) => s.steps),
  );
  scrapedCounter(
    registry,
    { name: 'openclaw_rl_train_batches_total', help: 'Batches trained, each published as a version (over restarts)' },
    read((s) => s.batches),
  );
  scrapedGauge(
    registry,
    { name: 'openclaw_rl_trainer_state', help: "The trainer's state: 1 for the current one", labelNames: ['state'] },
    readLabels((s) => TRAINER_STATES.map((state) => ({ labels: { state }, value: Number(s.trainer.state === state) }))),
  );
  scrapedGauge(
    registry,
    {
      name: 'openclaw_rl_samples',
      help: 'Samples in the store by state: queued for a batch, trained, dropped as stale or as too long',
      labelNames: ['state'],
    },
    readLabels((s) => byLabel('state', s.samples)),
  );
  scrapedGauge(
    registry,
    {
      name: 'openclaw_rl_queue_items',
      help: 'Work waiting: closed main turns for the judge, turns being judged, samples for a batch',
      labelNames: ['queue'],
    },
    readLabels((s) =>
      byLabel('queue', { closed_turns: s.queues.closedTurns, judging: s.queues.judging, samples: s.queues.samples }),
    ),
  );
  scrapedGauge(
    registry,
    { name: 'openclaw_rl_open_turns', help: 'Main turns recorded and waiting for their next state' },
    read((s) => s.turns.open),
  );
  scrapedCounter(
    registry,
    { name: 'openclaw_rl_samples_built_total', help: 'Samples built from judged turns and queued' },
    read((s) => s.feed.samples),
  );
  scrapedCounter(
    registry,
    {
      name: 'openclaw_rl_samples_skipped_total',
      help: 'Judged turns that gave no sample, by reason',
      labelNames: ['reason'],
    },
    readLabels((s) => NO_SAMPLE_REASONS.map((reason) => ({ labels: { reason }, value: s.feed[reason] }))),
  );
  scrapedCounter(
    registry,
    {
      name: 'openclaw_rl_teacher_failures_total',
      help: "Accepted hints whose teacher scoring failed (the turn's sample keeps its score term), by reason",
      labelNames: ['reason'],
    },
    readLabels((s) => TEACHER_FAILURES.map((reason) => ({ labels: { reason }, value: s.feed[`teacher/${reason}`] }))),
  );
  const last = (name: string, help: string, f: (b: NonNullable<LearningStatus['lastBatch']>) => number) =>
    scrapedGauge(registry, { name, help: `${help}, in the last step (NaN before the first)` }, () => {
      const b = learning()?.lastBatch;
      return b ? f(b) : null;
    });
  last('openclaw_rl_train_loss', 'The policy loss', (b) => b.loss);
  last('openclaw_rl_train_reward_mean', "Mean judge score of the batch's samples", (b) => b.rewardMean);
  last('openclaw_rl_train_approx_kl', 'Approximate KL divergence of the policy from the sampler', (b) => b.approxKl);
  last('openclaw_rl_train_clipped_ratio', 'Share of tokens whose probability ratio PPO clipped', (b) => b.clipFraction);
  last('openclaw_rl_train_grad_norm', 'Gradient norm before clipping', (b) => b.gradNorm);
  last('openclaw_rl_train_tokens_per_second', 'Training throughput', (b) => b.tokensPerSecond);
}

/** Histograms and counters fed by the learning loop's log events, as they happen. */
export class LearningEvents {
  private readonly stepSeconds: Histogram;
  private readonly publishSeconds: Histogram;
  private readonly publications: Counter;
  private readonly lastPublication: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.stepSeconds = new Histogram({
      name: 'openclaw_rl_train_step_duration_seconds',
      help: 'Wall time of one optimizer step (the first of a batch includes its old log-probs)',
      buckets: STEP_BUCKETS,
      registers,
    });
    this.publishSeconds = new Histogram({
      name: 'openclaw_rl_publish_duration_seconds',
      help: 'Time to publish a trained version to the sampler (snapshot and swap)',
      buckets: PUBLISH_BUCKETS,
      registers,
    });
    this.publications = new Counter({
      name: 'openclaw_rl_publications_total',
      help: 'Versions published since the process started, by source (train: a trained batch; rollback: restored weights)',
      labelNames: ['source'],
      registers,
    });
    for (const source of ['train', 'rollback']) this.publications.labels(source).inc(0);
    this.lastPublication = new Gauge({
      name: 'openclaw_rl_last_publication_timestamp_seconds',
      help: 'Unix time of the last publication (NaN: none since the process started)',
      registers,
    });
    this.lastPublication.set(Number.NaN);
  }

  event(name: string, fields: Record<string, unknown>): void {
    if (name === 'rollback') {
      // A rollback publishes the restored weights as a new version (src/learn/rollback.ts).
      if (typeof fields.publishMs === 'number') this.publishSeconds.observe(fields.publishMs / 1000);
      this.publications.labels('rollback').inc();
      this.lastPublication.set(Date.now() / 1000);
      return;
    }
    if (name !== 'batch_trained') return;
    const steps = Array.isArray(fields.stepSeconds) ? fields.stepSeconds : [];
    for (const s of steps) if (typeof s === 'number') this.stepSeconds.observe(s);
    if (typeof fields.publishMs === 'number') this.publishSeconds.observe(fields.publishMs / 1000);
    this.publications.labels('train').inc();
    if (typeof fields.publishedAt === 'number') this.lastPublication.set(fields.publishedAt / 1000);
  }
}
