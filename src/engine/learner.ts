// The Learner contract: the gradients of a loss over samples, optimizer steps, published versions
// and checkpoints. The training algorithm (methods, advantages, the PPO anchor, epochs and
// mini-batches) is above it, in learn/; a backend computes what one call asks, splitting the
// samples into micro-batches that fit its memory.

import type { PolicyVersion } from './policy-version.js';

/** One training sample: a sampled completion and how much each of its tokens is worth. */
export interface TrainingSample {
  promptIds: readonly number[];
  completionIds: readonly number[];
  /** One advantage per completion token. */
  advantages: readonly number[];
  /** The sampler's log-probs of the completion (truncated importance sampling); null: none. */
  rolloutLogprobs?: readonly number[] | null;
  /** 1 trains a token, 0 skips it; default all 1. */
  mask?: readonly number[];
  /** The learner's log-probs before this batch's first step (the PPO ratio's anchor); default: current. */
  oldLogprobs?: ArrayLike<number> | null;
  /** Teacher top-K per completion token, for the top-K distillation loss. */
  teacherTop?: { ids: readonly (readonly number[])[]; logprobs: readonly (readonly number[])[] };
}

/** PPO-clip with truncated importance weights, a KL term to the frozen base and an entropy bonus. */
export interface PolicyLossSpec {
  /** The ratio's lower clip is 1 - eps. */
  eps: number;
  /** The ratio's upper clip is 1 + epsHigh (wider than eps: "clip-higher"). */
  epsHigh: number;
  /** Importance weights exp(old - rollout) are capped here; null disables the correction. */
  tisCap: number | null;
  klCoef: number;
  entropyCoef: number;
}

/** The loss one forwardBackward computes: the policy loss, or reverse KL to a teacher's top-K. */
export type LossSpec = ({ kind: 'policy' } & PolicyLossSpec) | { kind: 'topk'; entropyCoef: number };

/** Diagnostics of one forward/backward (token-weighted means over trained tokens). */
export interface ForwardBackwardResult {
  loss: number;
  tokens: number;
  clipFraction: number;
  approxKl: number;
  entropy: number;
  tisMean: number;
  rolloutAbsDiff: number;
}

export interface OptimStepResult {
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** false when the gradient was not finite: nothing changed. */
  applied: boolean;
  lr: number;
  step: number;
  /** ms the learner waited for the sampler to go idle since the previous optimStep (0: it never yields). */
  yieldedMs: number;
}

/** What one optimizer step of a batch did (learn/ppo.ts reports one per step). */
export interface StepMetrics {
  step: number;
  samples: number;
  tokens: number;
  loss: number;
  gradNorm: number;
  applied: boolean;
  lr: number;
  clipFraction: number;
  approxKl: number;
  entropy: number;
  tisMean: number;
  rolloutAbsDiff: number;
  /** Wall time; the first step of a batch includes computing the batch's old log-probs. */
  seconds: number;
  tokensPerSecond: number;
  /** Of `seconds`, the ms spent waiting for the sampler to go idle (yielding to serving). */
  yieldedMs: number;
}

/** A new policy version, as the learner publishes it and a sampler loads it. */
export type PolicyUpdate =
  | {
      version: number;
      kind: 'lora';
      spec: { rank: number; alpha: number; targets: ('q' | 'k' | 'v' | 'o' | 'gate' | 'up' | 'down')[] };
      data: Float32Array;
    }
  // bf16: the params' bf16 copy (Uint16Array bits), when the learner made it; a bf16 engine
  // makes its own otherwise.
  | { version: number; kind: 'full'; params: SharedArrayBuffer; bf16?: SharedArrayBuffer };

export interface Learner {
  /** Each sample's completion log-probs under the current weights: a forward pass, no gradients. */
  logprobs(samples: TrainingSample[]): Promise<Float32Array[]>;
  /** Adds the gradients of `loss` over `samples` (divided by batchSize samples) into the accumulators. */
  forwardBackward(samples: TrainingSample[], loss: LossSpec, batchSize?: number): Promise<ForwardBackwardResult>;
  /** Clips the accumulated gradients, applies one optimizer step and clears them. */
  optimStep(): Promise<OptimStepResult>;
  /** A snapshot of the current weights as the next policy version. */
  publish(): Promise<PolicyVersion>;
  /** Writes a crash-safe checkpoint (weights, optimizer, step, consumed sample ids). */
  save(consumedSampleIds: string[]): Promise<void>;
}

/** A sample's per-token lengths must agree before anything is computed; the message lists them all. */
export function checkTrainingSample(s: TrainingSample, index: number): void {
  const n = s.completionIds.length;
  const problems: string[] = [];
  if (s.promptIds.length === 0) problems.push('promptIds is empty');
  if (n === 0) problems.push('completionIds is empty');
  if (s.advantages.length !== n) problems.push(`advantages has ${s.advantages.length}`);
  if (s.rolloutLogprobs && s.rolloutLogprobs.length !== n)
    problems.push(`rolloutLogprobs has ${s.rolloutLogprobs.length}`);
  if (s.oldLogprobs && s.oldLogprobs.length !== n) problems.push(`oldLogprobs has ${s.oldLogprobs.length}`);
  if (s.mask && s.mask.length !== n) problems.push(`mask has ${s.mask.length}`);
  if (s.teacherTop && (s.teacherTop.ids.length !== n || s.teacherTop.logprobs.length !== n))
    problems.push(
      `teacherTop has ${s.teacherTop.ids.length} id rows and ${s.teacherTop.logprobs.length} log-prob rows`,
    );
  if (problems.length > 0)
    throw new RangeError(`sample ${index}: ${problems.join(', ')}, but completionIds has ${n} tokens`);
}
