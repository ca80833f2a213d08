// The `steps` method's math, for general agents: each main turn of an episode (a session) is a
// step, its next state (a tool's or terminal's output) is judged by the PRM, and the episode's
// outcome arrives through POST /v1/feedback. Pure functions; store/step-groups.ts reads the rows
// and learn/step-release.ts applies the results.
//
//   reward of step t     integrated  r_t = o + (1/m) * sum_i v_i   (o: the rollout's outcome in [-1, 1];
//                                    v_i: the m valid PRM votes on the step's next state, each -1, 0
//                                    or +1; no valid vote (a step with no next state, the last one
//                                    before the outcome): r_t = o)
//                        outcome     r_t = o
//   advantage            the steps with the same step index (0-based order of the episode's main
//                        turns) across the rollouts of one task form a group:
//                        A = (r - mean) / (std + eps), std over the group (population, divided by n);
//                        a group of one has no baseline and keeps its reward: A = r.
//
// A group of one (a step index only one rollout reached, or a session sent without X-Task-Id) is
// kept rather than dropped: the reward is on the scale of a normalized advantage (|r| <= 2), and
// dropping it would discard every step of tasks run once, such as a person's rated session.

import type { RolloutState } from '../types.js';

export type StepReward = 'integrated' | 'outcome';

export const STEP_REWARDS: readonly StepReward[] = ['integrated', 'outcome'];

/** Added to the standard deviation so a group of equal rewards gets advantages of 0, not NaN. */
export const STEP_EPS = 1e-6;

/** The reward of one step from its rollout's outcome and the valid PRM votes on its next state. */
export function stepReward(kind: StepReward, outcome: number, votes: readonly number[]): number {
  if (!Number.isFinite(outcome) || outcome < -1 || outcome > 1)
    throw new RangeError(`stepReward: the outcome must be a number from -1 to 1, got ${outcome}`);
  for (const v of votes) {
    if (v !== -1 && v !== 0 && v !== 1) throw new RangeError(`stepReward: a PRM vote is -1, 0 or 1, got ${v}`);
  }
  if (kind === 'outcome' || votes.length === 0) return outcome;
  return outcome + votes.reduce((a, v) => a + v, 0) / votes.length;
}

/** (r - mean) / (std + eps) over one group; a group of one keeps its reward. */
export function normalizeGroup(rewards: readonly number[], eps = STEP_EPS): number[] {
  const n = rewards.length;
  if (n === 0) return [];
  if (n === 1) return [rewards[0]!];
  const mean = rewards.reduce((a, r) => a + r, 0) / n;
  const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / n);
  return rewards.map((r) => (r - mean) / (std + eps));
}

export interface StepOfGroup {
  /** 0-based order of the step's turn among its episode's main turns. */
  stepIndex: number;
  reward: number;
}

/** Advantages of a task group's steps, in input order: each normalized within its step index. */
export function stepAdvantages(steps: readonly StepOfGroup[], eps = STEP_EPS): number[] {
  const byIndex = new Map<number, number[]>();
  steps.forEach((s, i) => {
    if (!Number.isSafeInteger(s.stepIndex) || s.stepIndex < 0)
      throw new RangeError(`stepAdvantages: a step index is an integer >= 0, got ${s.stepIndex}`);
    const members = byIndex.get(s.stepIndex) ?? [];
    members.push(i);
    byIndex.set(s.stepIndex, members);
  });
  const out = new Array<number>(steps.length);
  for (const members of byIndex.values()) {
    const advantages = normalizeGroup(
      members.map((i) => steps[i]!.reward),
      eps,
    );
    members.forEach((i, k) => {
      out[i] = advantages[k]!;
    });
  }
  return out;
}

/**
 * The groups whose samples can be released now, each as the session ids it takes. A rollout is
 * complete when its outcome arrived and every main turn is closed and judged; a complete rollout
 * with no waiting sample was released before (or had no step) and is left out.
 *
 *   - no task id: the session alone, once complete;
 *   - a task with a count G (the largest any of its sessions stated): once G of its unreleased
 *     rollouts are complete, all its complete ones (a second round of the task starts a new group);
 *   - a task without a count: once every unreleased rollout of the task seen so far is complete.
 */
export function readyGroups(rollouts: readonly RolloutState[]): string[][] {
  const groups: string[][] = [];
  const tasks = new Map<string, RolloutState[]>();
  for (const r of rollouts) {
    const complete = r.hasOutcome && r.unsettledTurns === 0;
    if (complete && r.waitingSamples === 0) continue; // released before, or nothing to release
    if (r.taskId === null) {
      if (complete) groups.push([r.sessionId]);
      continue;
    }
    const members = tasks.get(r.taskId) ?? [];
    members.push(r);
    tasks.set(r.taskId, members);
  }
  for (const members of tasks.values()) {
    const complete = members.filter((r) => r.hasOutcome && r.unsettledTurns === 0);
    if (complete.length === 0) continue;
    const counts = members.map((r) => r.count).filter((c): c is number => c !== null);
    const ready = counts.length > 0 ? complete.length >= Math.max(...counts) : complete.length === members.length;
    if (ready) groups.push(complete.map((r) => r.sessionId));
  }
  return groups;
}
