// The contracts between the engine and everything above it, one small file each (sampler.ts,
// scorer.ts, learner.ts); this barrel re-exports them. Backends implement them (engine/local,
// engine/torch), callers depend on nothing else.

export type { FinishReason, GenerationEvent, SampledToken, Sampler, SamplingParams, TokenLogprob } from './sampler.js';
export type { ScoredCompletion, Scorer, ScoreOptions } from './scorer.js';
export type {
  ForwardBackwardResult,
  Learner,
  LossSpec,
  OptimStepResult,
  PolicyLossSpec,
  PolicyUpdate,
  StepMetrics,
  TrainingSample,
} from './learner.js';
