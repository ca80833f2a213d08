// What the training benches share: a random sample of a given length, and one timed optimizer step.

import type { Rng } from '../src/engine/local/sampling/random.js';
import type { LearnerCore } from '../src/engine/local/train/learner.js';
import type { TrainingSample } from '../src/engine/types.js';
import { DEFAULT_PPO } from '../src/learn/ppo.js';

/** `tokens` random ids below `vocab`, the second half completion, each completion token's advantage from `advantage`. */
export function randomSample(
  rng: Rng,
  vocab: number,
  tokens: number,
  advantage: () => number = () => rng.next() - 0.5,
): TrainingSample {
  const ids = Array.from({ length: tokens }, () => Math.floor(rng.next() * vocab));
  const completion = ids.slice(tokens >> 1);
  return { promptIds: ids.slice(0, tokens >> 1), completionIds: completion, advantages: completion.map(advantage) };
}

/** Seconds of one step on `sample`: forward, backward (PPO's loss) and the optimizer. */
export function stepSeconds(learner: LearnerCore, sample: TrainingSample): number {
  const t0 = performance.now();
  learner.forwardBackward([sample], DEFAULT_PPO.loss);
  learner.optimStep();
  return (performance.now() - t0) / 1000;
}
