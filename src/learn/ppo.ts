// The PPO procedure over one batch, driving any learner through the engine's Learner contract:
//
//   old = learner.logprobs(batch)                 the ratio's anchor, and the OPD term's baseline
//   advantages += opd.weight * (teacher - old)    (methods.ts; a token without a teacher is masked)
//   for each epoch, for each mini-batch:          forwardBackward(mini, loss, |mini|), optimStep
//
// The backend splits each call into micro-batches that fit its memory; the loss of a mini-batch
// is divided by its sample count, so the split does not change the step.

import {
  checkTrainingSample,
  type ForwardBackwardResult,
  type LossSpec,
  type OptimStepResult,
  type StepMetrics,
  type TrainingSample,
} from '../engine/learner.js';
import { combineAdvantages } from './methods.js';

export interface PpoConfig {
  loss: LossSpec;
  /** Samples per optimizer step; a batch of N samples makes ceil(N / miniBatchSize) steps per epoch. */
  miniBatchSize: number;
  /** Passes over each batch; more than one lets the PPO ratio and its clip act. */
  epochs: number;
}

export const DEFAULT_PPO: PpoConfig = {
  loss: { kind: 'policy', eps: 0.2, epsHigh: 0.28, tisCap: 2, klCoef: 0, entropyCoef: 0 },
  miniBatchSize: 16,
  epochs: 1,
};

/** A sample as the procedure takes it: the learner's sample, plus the OPD term it finishes. */
export interface BatchSample extends Omit<TrainingSample, 'oldLogprobs'> {
  /**
   * On-policy distillation: weight * (teacherLogprobs_t - old_t) is added to each advantage, with
   * old the learner's own log-probs before the batch (not the sampler's, which may lag).
   */
  opd?: { teacherLogprobs: readonly number[]; weight: number };
}

type Awaitable<T> = T | Promise<T>;

/** What the procedure asks of a learner: any Learner, or the local LearnerCore called directly. */
export interface PpoLearner {
  logprobs(samples: TrainingSample[]): Awaitable<Float32Array[]>;
  forwardBackward(samples: TrainingSample[], loss: LossSpec, batchSize: number): Awaitable<ForwardBackwardResult>;
  optimStep(): Awaitable<OptimStepResult>;
}

/** Trains one batch; returns one record per optimizer step. Every sample is checked first. */
export async function trainBatch(
  learner: PpoLearner,
  samples: readonly BatchSample[],
  config: PpoConfig,
): Promise<StepMetrics[]> {
  samples.forEach((s, i) => checkBatchSample(s, i, config.loss));
  // The first step's time (and time yielded) includes computing the anchor.
  let t0 = performance.now();
  // The PPO ratio is taken against the policy as it was before this batch's first step.
  const old = config.loss.kind === 'policy' ? await learner.logprobs(samples.map(withoutOpd)) : null;
  const anchored = samples.map((s, i) => (old ? anchoredSample(s, old[i]!) : withoutOpd(s)));
  const metrics: StepMetrics[] = [];
  for (let epoch = 0; epoch < config.epochs; epoch++) {
    for (let start = 0; start < anchored.length; start += config.miniBatchSize) {
      const mini = anchored.slice(start, Math.min(anchored.length, start + config.miniBatchSize));
      const m = await learner.forwardBackward(mini, config.loss, mini.length);
      const r = await learner.optimStep();
      const seconds = (performance.now() - t0) / 1000;
      const tokens = mini.reduce((a, s) => a + s.promptIds.length + s.completionIds.length, 0);
      metrics.push({
        step: r.step,
        samples: mini.length,
        tokens,
        loss: m.loss,
        gradNorm: r.gradNorm,
        applied: r.applied,
        lr: r.lr,
        clipFraction: m.clipFraction,
        approxKl: m.approxKl,
        entropy: m.entropy,
        tisMean: m.tisMean,
        rolloutAbsDiff: m.rolloutAbsDiff,
        seconds,
        tokensPerSecond: tokens / seconds,
        yieldedMs: r.yieldedMs,
      });
      t0 = performance.now();
    }
  }
  return metrics;
}

function checkBatchSample(s: BatchSample, index: number, loss: LossSpec): void {
  checkTrainingSample(s, index);
  if (!s.opd) return;
  const n = s.completionIds.length;
  if (s.opd.teacherLogprobs.length !== n)
    throw new RangeError(
      `sample ${index}: opd.teacherLogprobs has ${s.opd.teacherLogprobs.length}, but completionIds has ${n} tokens`,
    );
  if (!Number.isFinite(s.opd.weight))
    throw new RangeError(`sample ${index}: opd.weight must be finite, got ${s.opd.weight}`);
  if (loss.kind !== 'policy') throw new Error('OPD samples need the policy loss, not top-k distillation');
}

function withoutOpd({ opd: _, ...sample }: BatchSample): TrainingSample {
  return sample;
}

/** The sample with its anchor, and its OPD term (if any) added to the advantages against that anchor. */
function anchoredSample(s: BatchSample, old: Float32Array): TrainingSample {
  const sample = { ...withoutOpd(s), oldLogprobs: old };
  if (!s.opd) return sample;
  const mask = s.mask ?? new Array<number>(s.completionIds.length).fill(1);
  const opd = combineAdvantages(
    'opd',
    { score: 0, teacherLogprobs: s.opd.teacherLogprobs, oldLogprobs: old, mask },
    { wRl: 0, wOpd: s.opd.weight },
  );
  return { ...sample, advantages: s.advantages.map((a, t) => a + opd.advantages[t]!), mask: Array.from(opd.mask) };
}
