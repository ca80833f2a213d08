// The runner through the real gateway (recording, tool-call parsing, the feedback route), with a
// scripted policy (TEST DOUBLE of the model, test/helpers/scripted-sampler.ts) that uses the tools:
// multi-step episodes, the tools' results as next states, outcomes per task as scripted, every
// outcome stored once on its session, rollout grouping on the sessions, and a summary on disk.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { AgentClient } from '../src/env/agent-client.js';
import type { EnvironmentKind } from '../src/env/environment.js';
import { ResultsLog } from '../src/env/results-log.js';
import { runEnvironment } from '../src/env/runner.js';
import { DEFAULT_LIMITS, probeSandbox } from '../src/env/sandbox.js';
import { terminalKind } from '../src/env/terminal.js';
import { toolCallKind } from '../src/env/tool-call.js';
import { STORE_FILE } from '../src/store/store.js';
import { freshDir, startGateway } from './helpers/gateway.js';
import { solvingBackend } from './helpers/solving-policy.js';

const tasks = toolCallKind().tasks(4, 11);
const terminal = terminalKind(await probeSandbox(), DEFAULT_LIMITS);
const terminalTasks = terminal.tasks(6, 2);

// The scripted policy: it solves every task, except the math task at index 1, whose answer is off by 1.
const { backend, sampler } = await solvingBackend(tasks, terminalTasks, { wrongAnswerAt: 1 });
const gw = await startGateway(backend);
test.after(() => gw.close());

const client = new AgentClient({ url: `${gw.url}/v1`, maxTokens: 400 });

async function run(kind: EnvironmentKind, count: number, rollouts: number, seed: number) {
  const out = freshDir('env-run-');
  const summary = await runEnvironment({ kind, client, out, tasks: count, rollouts, parallel: 32, maxSteps: 4, seed });
  return { out, summary };
}

function feedbackRows(): { idempotency_key: string; session_id: string; reward: number }[] {
  const db = new Database(join(gw.dataDir, STORE_FILE), { readonly: true });
  try {
    return db.prepare('SELECT idempotency_key, session_id, reward FROM feedback').all() as never;
  } finally {
    db.close();
  }
}

function turnCounts(): { main: number; side: number } {
  const db = new Database(join(gw.dataDir, STORE_FILE), { readonly: true });
  try {
    const rows = db.prepare('SELECT kind, COUNT(*) AS n FROM turns GROUP BY kind').all() as {
      kind: string;
      n: number;
    }[];
    return { main: rows.find((r) => r.kind === 'main')?.n ?? 0, side: rows.find((r) => r.kind === 'side')?.n ?? 0 };
  } finally {
    db.close();
  }
}

test('tool-call episodes: calculator, answer, outcome per task, every outcome stored once on its session', async () => {
  const before = sampler.calls.length;
  const { out, summary } = await run(toolCallKind(), 4, 3, 11);
  assert.equal(sampler.calls.length - before, 4 * 3 * 2, 'two steps per episode');
  assert.equal(summary.failed, 0, summary.failures.join('\n'));
  assert.equal(summary.episodes, 12);
  assert.equal(summary.steps, 24);
  assert.ok(summary.stepsPerSecond > 0);
  assert.deepEqual(
    summary.byTask.map((t) => [t.taskId, t.successes, t.rollouts, t.meanReward]),
    tasks.map((t, i) => [t.id, i === 1 ? 0 : 3, 3, i === 1 ? -1 : 1]),
  );
  assert.equal(summary.successRate, 9 / 12);
  assert.deepEqual(summary.feedback, { sent: 12, duplicates: 0, pending: 0 });
  assert.deepEqual(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')), summary);

  const lines = readFileSync(join(out, 'results.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const episodes = lines.filter((l) => l.type === 'episode');
  assert.equal(episodes.length, 12);
  for (const e of episodes) {
    assert.equal(e.steps, 2);
    assert.equal(e.toolCalls, 1);
    assert.equal(e.end, 'answered');
  }
  const rows = feedbackRows().filter((r) => r.idempotency_key.startsWith(`${summary.runId}:`));
  assert.deepEqual(
    rows.map((r) => `${r.idempotency_key} ${r.session_id} ${r.reward}`).sort(),
    episodes.map((e) => `${e.key} ${e.sessionId} ${e.reward}`).sort(),
  );
  // Rollout grouping reached the store with each session.
  const db = new Database(join(gw.dataDir, STORE_FILE), { readonly: true });
  try {
    for (const e of episodes) {
      const s = db.prepare('SELECT task_id, rollout_index, rollout_count FROM sessions WHERE id = ?').get(e.sessionId);
      assert.deepEqual({ ...(s as object) }, { task_id: e.taskId, rollout_index: e.rollout, rollout_count: 3 });
    }
  } finally {
    db.close();
  }
});

test('an evaluation pass (side turns): episodes are played and scored, nothing is learned from or sent', async () => {
  const side = new AgentClient({ url: `${gw.url}/v1`, maxTokens: 400, turnType: 'side' });
  assert.equal(side.learns, false);
  const before = turnCounts();
  const out = freshDir('env-eval-');
  const summary = await runEnvironment({
    kind: toolCallKind(),
    client: side,
    out,
    tasks: 2,
    rollouts: 2,
    parallel: 4,
    maxSteps: 4,
    seed: 11,
  });
  assert.equal(summary.episodes, 4);
  assert.equal(summary.successRate, 0.5, 'task 0 solved, task 1 answered wrong, as scripted');
  assert.deepEqual(summary.feedback, { sent: 0, duplicates: 0, pending: 0 });
  assert.equal(feedbackRows().filter((r) => r.idempotency_key.startsWith(`${summary.runId}:`)).length, 0);
  const lines = readFileSync(join(out, 'results.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const skipped = lines.filter((l) => l.type === 'feedback').map((l) => l.skipped);
  assert.equal(skipped.length, 4);
  assert.ok(
    skipped.every((why) => /side turns/.test(why)),
    JSON.stringify(skipped),
  );
  // Stored as side turns only (answered, never learned from): 4 episodes of 2 steps.
  const after = turnCounts();
  assert.equal(after.main, before.main);
  assert.equal(after.side, before.side + 8);
});

test('a run folder resumes only with the same task source', () => {
  const out = freshDir('env-source-');
  const definition = { env: 'tool-call', tasks: 2, rollouts: 1, seed: 1, maxSteps: 4 };
  ResultsLog.open(out, { ...definition, taskSource: 'arithmetic-train' });
  assert.doesNotThrow(() => ResultsLog.open(out, { ...definition, taskSource: 'arithmetic-train' }));
  assert.throws(() => ResultsLog.open(out, definition), /other taskSource \(arithmetic-train, now undefined\)/);
  assert.throws(() => ResultsLog.open(out, { ...definition, taskSource: 'arithmetic-heldout' }), /other taskSource/);
});

test('terminal episodes through the gateway: the bash tool runs in the sandbox and the checkers pass', async () => {
  const { summary } = await run(terminal, 6, 1, 2);
  assert.equal(summary.failed, 0, summary.failures.join('\n'));
  assert.equal(summary.episodes, 6);
  assert.equal(summary.successRate, 1, JSON.stringify(summary.byTask));
  assert.equal(Object.keys(summary.byFamily).length, 6);
  assert.equal(summary.feedback.sent, 6);
});

test('a restart re-sends unacknowledged outcomes under the same key, plays nothing again, and drops a torn line', async () => {
  const { out, summary } = await run(toolCallKind(), 2, 2, 11);
  const path = join(out, 'results.jsonl');
  // A crash after the results were written but before any outcome was acknowledged, mid-write.
  const episodeLines = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"type":"episode"'));
  writeFileSync(path, `${episodeLines.join('\n')}\n{"type":"episode","key":"cut sh`);
  const calls = sampler.calls.length;
  const again = await runEnvironment({
    kind: toolCallKind(),
    client,
    out,
    tasks: 2,
    rollouts: 2,
    parallel: 4,
    maxSteps: 4,
    seed: 11,
  });
  assert.equal(sampler.calls.length, calls, 'no episode played again');
  assert.equal(again.skipped, 4);
  assert.equal(again.steps, 0);
  assert.deepEqual(again.feedback, { sent: 4, duplicates: 4, pending: 0 });
  assert.equal(again.runId, summary.runId);
  assert.deepEqual(again.byTask, summary.byTask);
  const text = readFileSync(path, 'utf8');
  assert.equal(text.includes('cut sh'), false);
  assert.equal(text.split('\n').filter((l) => l.includes('"duplicate":true')).length, 4);
  assert.equal(feedbackRows().filter((r) => r.idempotency_key.startsWith(`${summary.runId}:`)).length, 4);

  await assert.rejects(
    runEnvironment({ kind: toolCallKind(), client, out, tasks: 3, rollouts: 2, parallel: 4, maxSteps: 4, seed: 11 }),
    /holds a run with other tasks \(2, now 3\)/,
  );
});
