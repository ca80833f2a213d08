// The Scorer contract: log-probs of a given completion (teacher scoring), without sampling.

import type { TokenLogprob } from './sampler.js';

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
