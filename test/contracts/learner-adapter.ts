// The one place the learner suite calls a Learner: when the contract changes, only this file
// adapts.

import type { PolicyVersion } from '../../src/engine/policy-version.js';
import type {
  ForwardBackwardResult,
  Learner,
  LossSpec,
  OptimStepResult,
  Sampler,
  Scorer,
  TrainingSample,
} from '../../src/engine/types.js';

/** What the suite needs of a learner backend (LocalLearner and TorchLearner both have it). */
export type ContractLearner = Learner & { close(): Promise<void> };

/** No KL and no entropy bonus: with zero advantages the loss has no gradient at all. */
export const CONTRACT_LOSS: LossSpec = {
  kind: 'policy',
  eps: 0.2,
  epsHigh: 0.28,
  tisCap: 2,
  klCoef: 0,
  entropyCoef: 0,
};

export interface LearnerOps {
  /** One optimizer step over `samples` with CONTRACT_LOSS. */
  step(samples: TrainingSample[]): Promise<{ forward: ForwardBackwardResult; optim: OptimStepResult }>;
  publish(): Promise<PolicyVersion>;
  /** Each sample's completion log-probs under the current weights, by the learner's own forward pass. */
  logprobs(samples: TrainingSample[]): Promise<number[][]>;
  /** The same, as a sampler serves them: the weights published, loaded by `reader`, scored there. */
  servedLogprobs(samples: TrainingSample[]): Promise<number[][]>;
  save(): Promise<void>;
  close(): Promise<void>;
}

export function learnerOps(learner: ContractLearner, reader: Sampler & Scorer): LearnerOps {
  return {
    async step(samples) {
      const forward = await learner.forwardBackward(samples, CONTRACT_LOSS);
      return { forward, optim: await learner.optimStep() };
    },
    publish: () => learner.publish(),
    logprobs: async (samples) => (await learner.logprobs(samples)).map((lp) => Array.from(lp)),
    async servedLogprobs(samples) {
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
