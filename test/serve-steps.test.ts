// The `steps` method end to end, as a process: `serve --method steps` on the tiny model, three
// rollouts of one task sent with the rollout headers through the real HTTP gateway, a test-double
// judge that votes on each step's next state from its tags, outcomes through POST /v1/feedback.
// The samples wait until the last rollout's outcome, then get the hand-computed rewards and
// advantages (grouped by step index) and are trained in one batch.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import { STEP_EPS } from '../src/learn/steps.js';
import { openStore } from '../src/store/store.js';
import { freshDir } from './helpers/gateway.js';
import { startJudgeDouble } from './helpers/judge-double.js';
import { chatAsMain, judgedServeArgs, startServe, stopServe, type ServeProcess } from './helpers/serve-process.js';

const ADMIN = 'admin-secret';
const TASK = 'arith/2+3';

async function adminStatus(serve: ServeProcess): Promise<Record<string, any>> {
  const res = await fetch(`${serve.root}/admin/status`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, any>;
}

/** Waits on log lines (not on time) until `done(status)`, failing after the deadline. */
async function until(serve: ServeProcess, done: (s: Record<string, any>) => boolean): Promise<Record<string, any>> {
  const deadline = Date.now() + 120_000;
  let status = await adminStatus(serve);
  while (!done(status) && status.trainer.state !== 'failed') {
    if (Date.now() > deadline) assert.fail(`timed out; last status ${JSON.stringify(status.samples)}`);
    await serve
      .waitForLog((l) => ['turn_judged', 'step_group_released', 'batch_trained'].includes(String(l.event)), 1_000)
      .catch(() => {});
    status = await adminStatus(serve);
  }
  assert.equal(status.trainer.error, null);
  return status;
}

/** One rollout: each text after the first is the next state of the step before; returns the turn ids. */
async function rollout(serve: ServeProcess, session: string, index: number, texts: string[]): Promise<void> {
  const headers = { 'x-task-id': TASK, 'x-rollout-index': String(index), 'x-rollout-count': '3' };
  const messages: ChatMessage[] = [];
  for (const text of texts) {
    messages.push({ role: 'user', content: text });
    messages.push(await chatAsMain(serve.url, session, messages, headers));
  }
}

async function outcome(serve: ServeProcess, session: string, reward: number) {
  const res = await fetch(`${serve.url}/feedback`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `outcome-${session}` },
    body: JSON.stringify({ session_id: session, reward }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as { id: string; duplicate: boolean };
}

test('serve --method steps: rollouts grouped by task and step index, released on the last outcome, trained', async (t) => {
  const judge = await startJudgeDouble();
  const data = freshDir('steps-e2e-');
  const serve = await startServe(
    judgedServeArgs({ data, judgeUrl: judge.url, method: 'steps', batchSize: 7, adminKey: ADMIN }, [
      '--reward',
      'integrated',
      '--opd-weight',
      '0',
    ]),
  );
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
  });

  // Outcomes +1, -1 and 0.5; the votes on each step's next state are in its tag (the last step has
  // no next state: the outcome closes it).
  await rollout(serve, 'roll-a', 0, ['Solve 2 + 3.', 'Output: 5 {{eval: 1|1|-1}}', 'Output: ok {{eval: 1|1|1}}']);
  await rollout(serve, 'roll-b', 1, ['Solve 2 + 3.', 'Output: 7 {{eval: -1|-1|-1}}']);
  await rollout(serve, 'roll-c', 2, ['Solve 2 + 3.', 'Output: 5 {{eval: 1|-1|0}}']);
  await outcome(serve, 'roll-a', 1);
  await outcome(serve, 'roll-b', -1);

  // Every step of a and b, and c's first, judged; nothing released while c has no outcome.
  const waiting = await until(serve, (s) => s.samples.waiting === 6);
  assert.deepEqual([waiting.samples.queued, waiting.samples.trained, waiting.steps], [0, 0, 0]);
  assert.equal(serve.lines.filter((l) => l.event === 'step_group_released').length, 0);

  const first = await outcome(serve, 'roll-c', 0.5);
  assert.equal((await outcome(serve, 'roll-c', 0.5)).duplicate, true, 'a resent outcome changes nothing');
  assert.equal(first.duplicate, false);
  const trained = await until(serve, (s) => s.steps >= 1 && s.version >= 1);
  assert.deepEqual([trained.samples.waiting, trained.samples.trained], [0, 7]);
  const released = serve.lines.filter((l) => l.event === 'step_group_released');
  assert.deepEqual(
    released.map((l) => [l.taskId, l.rollouts, l.samples]),
    [[TASK, 3, 7]],
  );
  assert.equal(await stopServe(serve), 0);

  const store = openStore({ dir: data, recoverQueue: false });
  t.after(() => store.close());
  const turnsOf = (session: string) => [...store.exportLines('main')].filter((l) => l.session_id === session);
  const samplesOf = (session: string) =>
    turnsOf(session).map((l) => {
      const s = store.learning.sampleOfTurn(l.turn_id)!;
      assert.equal(s.source, 'steps');
      assert.equal(s.status, 'trained');
      return { index: s.stepIndex, reward: s.reward!, advantage: s.rlAdvantage };
    });
  // Rewards o + mean vote: a = 4/3, 2, 1 (no vote on the last step); b = -2, -1; c = 1/2, 1/2.
  // Index 0 {4/3, -2, 1/2}: mean -1/18, variance 1950/972. Index 1 {2, -1, 1/2}: mean 1/2,
  // variance 3/2. Index 2: a alone keeps its reward.
  const s0 = Math.sqrt(1950 / 972) + STEP_EPS;
  const s1 = Math.sqrt(1.5) + STEP_EPS;
  const expected: Record<string, [number, number][]> = {
    'roll-a': [
      [4 / 3, 25 / 18 / s0],
      [2, 1.5 / s1],
      [1, 1],
    ],
    'roll-b': [
      [-2, -35 / 18 / s0],
      [-1, -1.5 / s1],
    ],
    'roll-c': [
      [0.5, 10 / 18 / s0],
      [0.5, 0],
    ],
  };
  for (const [session, steps] of Object.entries(expected)) {
    const got = samplesOf(session);
    assert.equal(got.length, steps.length, session);
    got.forEach((g, i) => {
      assert.equal(g.index, i, `${session} step ${i}`);
      assert.ok(Math.abs(g.reward - steps[i]![0]) < 1e-9, `${session} step ${i} reward ${g.reward}`);
      assert.ok(Math.abs(g.advantage - steps[i]![1]) < 1e-9, `${session} step ${i} advantage ${g.advantage}`);
    });
    const last = turnsOf(session).at(-1)!;
    assert.equal(last.closure_reason, 'episode_end');
  }
  assert.deepEqual(store.steps.rolloutStates(), [], 'nothing left waiting');
  const step = store.learning.steps()[0]!;
  assert.equal(step.samples, 7);
  assert.ok(Math.abs(step.rewardMean - (4 / 3 + 2 + 1 - 2 - 1 + 0.5 + 0.5) / 7) < 1e-9, 'the mean step reward');
});
