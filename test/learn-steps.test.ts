// The `steps` method (general agents): step rewards from the outcome and the PRM votes,
// advantages normalized per step index across a task's rollouts, which groups are ready, the
// waiting sample of a step, and the release of a group in a real store, all on hand-computed groups.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { judgeNeeds, resolveLearnConfig } from '../src/learn/config.js';
import { stepSampleFor } from '../src/learn/samples.js';
import { releaseStepGroups } from '../src/learn/step-release.js';
import { normalizeGroup, readyGroups, STEP_EPS, stepAdvantages, stepReward } from '../src/learn/steps.js';
import type { Store } from '../src/store/store.js';
import type { RolloutState, Turn } from '../src/types.js';
import { judgedFixture, learnTurn, sessionOf, tempStore } from './helpers/learning-fixtures.js';

const close = (actual: readonly number[], expected: readonly number[], what = '') => {
  assert.equal(actual.length, expected.length, what);
  actual.forEach((a, i) => assert.ok(Math.abs(a - expected[i]!) < 1e-9, `${what}[${i}]: ${a} vs ${expected[i]}`));
};

test('stepReward: integrated adds the mean valid vote to the outcome; outcome ignores the votes; no vote leaves the outcome', () => {
  assert.equal(stepReward('integrated', 1, [1, 1, -1]), 1 + 1 / 3);
  assert.equal(stepReward('integrated', -0.5, [-1, -1, -1]), -1.5);
  assert.equal(stepReward('integrated', 0.5, [1, -1, 0]), 0.5);
  assert.equal(stepReward('integrated', -1, []), -1);
  assert.equal(stepReward('outcome', 1, [-1, -1, -1]), 1);
  assert.throws(() => stepReward('integrated', 1.5, []), /outcome must be a number from -1 to 1, got 1.5/);
  assert.throws(() => stepReward('integrated', 1, [2]), /a PRM vote is -1, 0 or 1, got 2/);
});

test('normalizeGroup: (r - mean) / (std + eps), population std; equal rewards give 0; a group of one keeps its reward', () => {
  // mean 1, std sqrt(2/3)
  const s = Math.sqrt(2 / 3) + STEP_EPS;
  close(normalizeGroup([0, 1, 2]), [-1 / s, 0, 1 / s]);
  // mean 0.5, deviations +-1.5, std 1.5
  close(normalizeGroup([2, -1]), [1.5 / (1.5 + STEP_EPS), -1.5 / (1.5 + STEP_EPS)]);
  close(normalizeGroup([0.7, 0.7, 0.7]), [0, 0, 0]);
  close(normalizeGroup([-1.25]), [-1.25]);
  assert.deepEqual(normalizeGroup([]), []);
});

test('stepAdvantages: three rollouts of one task, grouped by step index (hand-computed)', () => {
  // Rollout A (outcome +1): votes [1,1,-1], [1,1,1], none -> rewards 4/3, 2, 1.
  // Rollout B (outcome -1): votes [-1,-1,-1], none       -> rewards -2, -1.
  // Rollout C (outcome 0.5): votes [1,-1,0], none        -> rewards 0.5, 0.5.
  const steps = [
    { stepIndex: 0, reward: stepReward('integrated', 1, [1, 1, -1]) },
    { stepIndex: 1, reward: stepReward('integrated', 1, [1, 1, 1]) },
    { stepIndex: 2, reward: stepReward('integrated', 1, []) },
    { stepIndex: 0, reward: stepReward('integrated', -1, [-1, -1, -1]) },
    { stepIndex: 1, reward: stepReward('integrated', -1, []) },
    { stepIndex: 0, reward: stepReward('integrated', 0.5, [1, -1, 0]) },
    { stepIndex: 1, reward: stepReward('integrated', 0.5, []) },
  ];
  // Index 0: {4/3, -2, 1/2}: mean -1/18, deviations 25/18, -35/18, 10/18, variance 1950/972.
  const s0 = Math.sqrt(1950 / 972) + STEP_EPS;
  // Index 1: {2, -1, 1/2}: mean 1/2, deviations 3/2, -3/2, 0, variance 3/2.
  const s1 = Math.sqrt(1.5) + STEP_EPS;
  close(stepAdvantages(steps), [25 / 18 / s0, 1.5 / s1, 1, -35 / 18 / s0, -1.5 / s1, 10 / 18 / s0, 0]);
  // Outcome only: index 0 and 1 are {1, -1, 0.5}: mean 1/6, deviations 5/6, -7/6, 1/3, variance 78/108.
  const outcome = steps.map((s, i) => ({ ...s, reward: [1, 1, 1, -1, -1, 0.5, 0.5][i]! }));
  const so = Math.sqrt(78 / 108) + STEP_EPS;
  close(stepAdvantages(outcome), [5 / 6 / so, 5 / 6 / so, 1, -7 / 6 / so, -7 / 6 / so, 1 / 3 / so, 1 / 3 / so]);
  assert.throws(() => stepAdvantages([{ stepIndex: -1, reward: 0 }]), /step index is an integer >= 0/);
});

const rollout = (sessionId: string, over: Partial<RolloutState> = {}): RolloutState => ({
  sessionId,
  taskId: 't',
  count: 2,
  hasOutcome: true,
  unsettledTurns: 0,
  waitingSamples: 2,
  ...over,
});

test('readyGroups: a task waits for G complete rollouts (outcome and every turn judged); without a count for all it has seen', () => {
  assert.deepEqual(readyGroups([rollout('a'), rollout('b', { hasOutcome: false })]), []);
  assert.deepEqual(readyGroups([rollout('a'), rollout('b', { unsettledTurns: 1 })]), []);
  assert.deepEqual(readyGroups([rollout('a'), rollout('b')]), [['a', 'b']]);
  // A second round of the task: the released rollouts (complete, nothing waiting) do not count.
  assert.deepEqual(
    readyGroups([rollout('a', { waitingSamples: 0 }), rollout('b', { waitingSamples: 0 }), rollout('c')]),
    [],
  );
  assert.deepEqual(readyGroups([rollout('c'), rollout('d'), rollout('e', { hasOutcome: false })]), [['c', 'd']]);
  // No count: every rollout of the task seen so far.
  const noCount = { count: null };
  assert.deepEqual(readyGroups([rollout('a', noCount), rollout('b', { ...noCount, hasOutcome: false })]), []);
  assert.deepEqual(readyGroups([rollout('a', noCount), rollout('b', noCount)]), [['a', 'b']]);
  // No task id: a session is its own group, ready once complete.
  assert.deepEqual(readyGroups([rollout('x', { taskId: null }), rollout('y', { taskId: null, unsettledTurns: 2 })]), [
    ['x'],
  ]);
  // Tasks are grouped apart.
  assert.deepEqual(readyGroups([rollout('a', { taskId: 'p', count: 1 }), rollout('b', { taskId: 'q', count: 1 })]), [
    ['a'],
    ['b'],
  ]);
});

test('stepSampleFor: every step waits for its group, with the teacher term when a hint was accepted and wOpd > 0', () => {
  const turn = { id: 'turn_x', policyVersion: 3, completionIds: [5, 6], sessionId: 's' };
  const teacher = { logprobs: [-1, -2], version: 0 };
  const base = { turnId: 'turn_x', policyVersion: 3, score: -1 as const, rlAdvantage: 0 };
  assert.deepEqual(stepSampleFor({ turn, closure: 'next_state', score: -1, teacher: null }, { wOpd: 1 }), {
    sample: { ...base, source: 'steps', opdWeight: 0, teacherLogprobs: null, teacherVersion: null },
  });
  assert.deepEqual(stepSampleFor({ turn, closure: 'episode_end', score: -1, teacher }, { wOpd: 0.5 }), {
    sample: { ...base, source: 'steps+opd', opdWeight: 0.5, teacherLogprobs: [-1, -2], teacherVersion: 0 },
  });
  assert.equal(stepSampleFor({ turn, closure: 'next_state', score: -1, teacher }, { wOpd: 0 }).sample?.source, 'steps');
  for (const closure of ['superseded', 'cancelled'] as const)
    assert.deepEqual(stepSampleFor({ turn, closure, score: 1, teacher }, { wOpd: 1 }), {
      sample: null,
      reason: 'not_a_step',
    });
  assert.deepEqual(
    stepSampleFor({ turn: { ...turn, sessionId: null }, closure: 'next_state', score: 1, teacher: null }, { wOpd: 1 }),
    { sample: null, reason: 'not_a_step' },
  );
});

test('config: --method steps with --reward; steps needs the RL weight; hints only with an OPD weight', () => {
  assert.equal(resolveLearnConfig({ method: 'steps' }).stepReward, 'integrated');
  assert.equal(resolveLearnConfig({ method: 'steps', stepReward: 'outcome' }).stepReward, 'outcome');
  assert.throws(
    () => resolveLearnConfig({ method: 'steps', stepReward: 'sparse' as 'outcome' }),
    /^RangeError: learning: stepReward must be one of integrated, outcome, got "sparse"$/,
  );
  assert.throws(() => resolveLearnConfig({ method: 'steps', wRl: 0 }), /steps needs wRl above 0/);
  assert.deepEqual(judgeNeeds('steps'), { hints: true });
  assert.deepEqual(judgeNeeds('steps', 0), { hints: false });
});

/** A step of `session` judged with `votes` (eval scores), its waiting sample committed. */
function judgedStep(store: Store, session: string, votes: (number | null)[], over: Partial<Turn> = {}): Turn {
  const turn = learnTurn({ sessionId: session, ...over });
  store.recordTurn(sessionOf(session), turn);
  store.closeTurn({
    turnId: turn.id,
    reason: 'next_state',
    closedAt: turn.completedAt,
    learning: true,
    nextState: null,
  });
  store.claimClosedTurns(100);
  const judged = judgedFixture(turn.id, {
    evalVotes: votes.map((score) => ({
      score: score as -1 | 0 | 1 | null,
      raw: '',
      failure: null,
      detail: null,
      attempts: 1,
      ms: 1,
    })),
  });
  const step = stepSampleFor({ turn, closure: 'next_state', score: judged.score, teacher: null }, { wOpd: 0 });
  store.learning.recordJudgment(judged, step.sample);
  return turn;
}

test('release in a store: a group waits for its last outcome, then every step gets its reward, index and advantage', () => {
  const store = tempStore(() => 5000);
  const rollout = (id: string, index: number) =>
    store.recordTurn({ ...sessionOf(id), rollout: { taskId: 'task-1', index, count: 2 } }, null);
  rollout('ra', 0);
  rollout('rb', 1);
  const a0 = judgedStep(store, 'ra', [1, 1, -1], { receivedAt: 10 });
  // A retry the client never kept is no step: the step indexes skip it.
  const retried = learnTurn({ sessionId: 'ra', receivedAt: 11 });
  store.recordTurn(null, retried, { reason: 'superseded', closedAt: 12 });
  store.claimClosedTurns(100);
  store.learning.recordJudgment(judgedFixture(retried.id), null, 'not_a_step');
  const a1 = judgedStep(store, 'ra', [1, null, 1], { receivedAt: 20 });
  const b0 = judgedStep(store, 'rb', [-1, -1, -1], { receivedAt: 15 });
  const fb = (session: string, reward: number) =>
    store.feedback.recordFeedback({
      id: `fb_${session}`,
      key: session,
      sessionId: session,
      turnId: null,
      reward,
      comment: null,
      createdAt: 100,
    });
  assert.equal(fb('ra', 1).status, 'stored');
  const config = { stepReward: 'integrated' as const, wRl: 2 };
  assert.deepEqual(releaseStepGroups(store.steps, config), [], 'rb has no outcome yet');
  assert.equal(store.learning.counts().samples.waiting, 3);
  assert.equal(fb('rb', -1).status, 'stored');
  const released = releaseStepGroups(store.steps, config);
  // Rewards: a0 = 1 + 1/3, a1 = 1 + 1 (the failed vote left out), b0 = -1 - 1.
  assert.deepEqual(released, [{ taskId: 'task-1', rollouts: 2, samples: 3, rewardMean: (4 / 3 + 2 - 2) / 3 }]);
  const sample = (t: Turn) => store.learning.sampleOfTurn(t.id)!;
  // Index 0: {4/3, -2}, mean -1/3, std 5/3: +-1 (times wRl 2). Index 1: a1 alone keeps its reward 2.
  const unit = 5 / 3 / (5 / 3 + STEP_EPS);
  for (const [t, reward, index, advantage] of [
    [a0, 4 / 3, 0, 2 * unit],
    [a1, 2, 1, 2 * 2],
    [b0, -2, 0, -2 * unit],
  ] as const) {
    const s = sample(t);
    assert.equal(s.status, 'queued');
    assert.equal(s.stepIndex, index);
    close([s.reward!, s.rlAdvantage], [reward, advantage], t.id);
  }
  assert.deepEqual(releaseStepGroups(store.steps, config), [], 'released once');
  store.close();
});
