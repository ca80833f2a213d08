// The contracts between the engine and everything above it. Types only: backends implement
// them (engine/local now; remote samplers and learners later), callers depend on nothing else.

import type { PolicyVersion } from './policy-version.js';

/** How to sample one completion. Unset fields take the documented defaults. */
export interface SamplingParams {
  /** 0 means greedy. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]. Default 1 (off). */
  topP?: number;
  /** Keep only the k most likely tokens; 0 = off. Default 0. */
  topK?: number;
  /** Upper bound on generated tokens. Default: the rest of the model's context. */
  maxTokens?: number;
  /** Stop when the decoded completion contains one of these strings. */
  stop?: string[];
  /** Stop after sampling one of these ids (the model's eos ids are always included). */
  stopTokenIds?: number[];
  /** Seed for a reproducible sample; omitted means a fresh random seed. */
  seed?: number;
  /** Also report the k most likely tokens (at temperature 1) per position; 0 = off. */
  topLogprobs?: number;
  /** Sample from this policy version (0 = the frozen base, e.g. for a self-judge); default: the serving one. */
  version?: number;
  /** Requests with one key go to one server of a remote fleet (its prefix cache); serve sends the session id. */
  routingKey?: string;
}

/** One token alternative with its log-prob under the model at temperature 1. */
export interface TokenLogprob {
  id: number;
  logprob: number;
}

/** One sampled token. */
export interface SampledToken {
  id: number;
  /** log p(id) under the model at temperature 1: what the trainer needs. */
  logprob: number;
  /** log q(id) under the distribution actually sampled from (temperature, top-k, top-p applied). */
  sampledLogprob: number;
  /** Present when topLogprobs > 0. */
  top?: TokenLogprob[];
}

/**
 * Why a generation ended. `stop_token`: an eos or requested stop id was sampled (it is part of
 * the completion). `stop_sequence`: the decoded text contains a stop string. `length`: maxTokens.
 * `context`: the model's context is full. `cancelled`: the caller stopped it.
 */
export type FinishReason = 'stop_token' | 'stop_sequence' | 'length' | 'context' | 'cancelled';

/** What a generation stream yields: tokens as they are sampled, then exactly one finish. */
export type GenerationEvent =
  | { type: 'token'; token: SampledToken }
  | {
      type: 'finish';
      reason: FinishReason;
      stopSequence?: string;
      version: number;
      promptTokens: number;
      completionTokens: number;
      /** Prompt tokens whose keys and values came from a prefix cache instead of being computed (absent: no cache). */
      cachedTokens?: number;
    };

export interface Sampler {
  /** Streams one completion of promptIds. Breaking out of the loop cancels the generation. */
  generate(promptIds: readonly number[], params: SamplingParams, signal?: AbortSignal): AsyncIterable<GenerationEvent>;
  /** Switches new requests to `version` (in-flight ones finish on theirs); resolves with the switch's ms. */
  use(version: PolicyVersion): Promise<number>;
}

export interface ScoreOptions {
  /** Also return the k most likely tokens per position. */
  topK?: number;
  /** The policy version to score under; default 0, the frozen base model. */
  version?: number;
}

export interface ScoredCompletion {
  /** logprobs[i] = log p(completionIds[i] | prompt, completion[:i]) at temperature 1. */
  logprobs: number[];
  top?: TokenLogprob[][];
}

export interface Scorer {
  logprobs(
    promptIds: readonly number[],
    completionIds: readonly number[],
    opts?: ScoreOptions,
  ): Promise<ScoredCompletion>;
}

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
  /**
   * On-policy distillation: the learner adds weight * (teacherLogprobs_t - old_t) to each
   * advantage, with old its own log-probs before the batch (not the sampler's, which may lag).
   * A token whose teacher value is not finite is masked.
   */
  opd?: { teacherLogprobs: readonly number[]; weight: number };
}

/** What one optimizer step did. */
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
  /** Wall time; the first step of a trainBatch includes computing the batch's old log-probs. */
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
}

export interface Learner {
  /** Adds the gradients of the loss over `samples` (divided by batchSize) into the accumulators. */
  forwardBackward(samples: TrainingSample[], batchSize?: number): Promise<ForwardBackwardResult>;
  /** Clips the accumulated gradients, applies one optimizer step and clears them. */
  optimStep(): Promise<OptimStepResult>;
  /** The whole PPO procedure over one batch (old log-probs, epochs, mini-batches). */
  trainBatch(samples: TrainingSample[]): Promise<StepMetrics[]>;
  /** A snapshot of the current weights as the next policy version. */
  publish(): Promise<PolicyVersion>;
  /** Writes a crash-safe checkpoint (weights, optimizer, step, consumed sample ids). */
  save(consumedSampleIds: string[]): Promise<void>;
}
