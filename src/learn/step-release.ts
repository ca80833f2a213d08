// The `steps` method's release: the task groups whose rollouts are all complete (store/step-groups.ts
// reads their state, learn/steps.ts decides) get each waiting step's reward and advantage, and go
// to the training queue together. Run on every pump of the judging feed: a group completes when
// its last turn is judged or its last outcome arrives, whichever comes last.

import type { StepGroups } from '../store/step-groups.js';
import type { LearnConfig } from './config.js';
import { readyGroups, stepAdvantages, stepReward } from './steps.js';

export interface ReleasedGroup {
  /** The task id (null: a session sent without X-Task-Id, its own group). */
  taskId: string | null;
  rollouts: number;
  samples: number;
  /** Mean step reward over the group's released samples. */
  rewardMean: number;
}

/** Releases every ready group; returns what was released, in order. */
export function releaseStepGroups(steps: StepGroups, config: Pick<LearnConfig, 'stepReward' | 'wRl'>): ReleasedGroup[] {
  const states = steps.rolloutStates();
  const taskOf = new Map(states.map((s) => [s.sessionId, s.taskId]));
  const released: ReleasedGroup[] = [];
  for (const sessions of readyGroups(states)) {
    const waiting = steps.waitingSteps(sessions);
    if (waiting.length === 0) continue;
    const rewards = waiting.map((w) => stepReward(config.stepReward, w.outcome, w.votes));
    const advantages = stepAdvantages(waiting.map((w, i) => ({ stepIndex: w.stepIndex, reward: rewards[i]! })));
    steps.release(
      waiting.map((w, i) => ({
        sampleId: w.sampleId,
        reward: rewards[i]!,
        stepIndex: w.stepIndex,
        rlAdvantage: config.wRl * advantages[i]!,
      })),
    );
    released.push({
      taskId: taskOf.get(sessions[0]!) ?? null,
      rollouts: sessions.length,
      samples: waiting.length,
      rewardMean: rewards.reduce((a, r) => a + r, 0) / rewards.length,
    });
  }
  return released;
}
