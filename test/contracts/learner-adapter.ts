// The one place the learner suite calls a Learner: when the contract changes (forwardBackward
// taking the loss spec per call, a Learner.logprobs of its own), only this file adapts.

import type { PolicyVersion } from '../../src/engine/policy-version.js';
import type {
  ForwardBackwardResult,
  OptimStepResult,
  Sampler,
  Scorer,
  TrainingSample,
} from '../../src/engine/types.js';

/** What the suite needs of a learner backend (LocalLearner and TorchLearner both have it). */
export interface ContractLearner {
  forwardBackward(samples: TrainingSample[], batchSize?: number): Promise<ForwardBackwardResult>;
  optimStep(): Promise<OptimStepResult>;
  publish(): Promise<PolicyVersion>;
  save(consumedSampleIds: string[]): Promise<void>;
  close(): Promise<void>;
}

export interface LearnerOps {
  /** One optimizer step over `samples` with the loss of the learner's config. */
  step(samples: TrainingSample[]): Promise<{ forward: ForwardBackwardResult; optim: OptimStepResult }>;
  publish(): Promise<PolicyVersion>;
  /** Each sample's completion log-probs under the current weights: published, loaded by `reader`, scored. */
  logprobs(samples: TrainingSample[]): Promise<number[][]>;
  save(): Promise<void>;
  close(): Promise<void>;
}

export function learnerOps(learner: ContractLearner, reader: Sampler & Scorer): LearnerOps {
  return {
    async step(samples) {
      const forward = await learner.forwardBackward(samples);
      return { forward, optim: await learner.optimStep() };
    },
    publish: () => learner.publish(),
    async logprobs(samples) {
      const v = await learner.publish();
      await reader.use(v);
      const out: number[][] = [];
      for (const s of samples)
        out.push((await reader.logprobs(s.promptIds, s.completionIds, { version: v.version })).logprobs);
      return out;
    },
    save: () => learner.save([]),
    close: () => learner.close(),
  };
}
