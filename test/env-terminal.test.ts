// The terminal environment: every task family is solved by a correct shell solution and failed by
// a wrong or missing one, through reset, step (bash tool calls in the sandbox) and outcome (the
// checker, run in the sandbox afterwards); the checker's files are never visible to the agent.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { DEFAULT_LIMITS, probeSandbox } from '../src/env/sandbox.js';
import { terminalKind } from '../src/env/terminal.js';
import { FAMILIES, terminalTasks, type TerminalTask } from '../src/env/terminal-tasks.js';
import { bashCalls as bash, playShell } from './helpers/shell-episode.js';
import { terminalNearMiss, terminalSolution } from './helpers/terminal-solutions.js';

const setup = await probeSandbox();
const kind = terminalKind(setup, { ...DEFAULT_LIMITS, commandSeconds: 5 });

const play = (task: TerminalTask, commands: string[]) => playShell(kind, task, commands);

test('each family: the right solution passes its checker, a near miss and doing nothing fail', async () => {
  const families = Object.keys(FAMILIES);
  const tasks = terminalTasks(families.length, 5);
  assert.deepEqual(
    tasks.map((t) => t.family),
    families,
  );
  for (const task of tasks) {
    const right = await play(task, [terminalSolution(task)]);
    assert.equal(right.observations[0]!.content, 'exit code 0', `${task.id}: ${right.observations[0]!.content}`);
    assert.deepEqual(right.outcome, { reward: 1, success: true, detail: 'checker: exit 0' }, task.id);
    const wrong = await play(task, [terminalNearMiss(task)]);
    assert.equal(wrong.outcome.reward, -1, `${task.id}: the near miss passed`);
    const idle = await play(task, []);
    assert.equal(idle.outcome.success, false, `${task.id}: doing nothing passed`);
  }
});

test('tool results carry exit code and output; the checker and its answers are hidden during the episode', async () => {
  const [task] = terminalTasks(2, 9).filter((t) => t.family === 'unique-sorted');
  assert.ok(task);
  const env = kind.create();
  try {
    await env.reset(task);
    const r = await env.step(bash('ls; ls /check', 'exit 3'));
    assert.equal(r.observations.length, 2);
    assert.deepEqual(
      r.observations.map((m) => [m.role, m.tool_call_id, m.name]),
      [
        ['tool', 'call_0', 'bash'],
        ['tool', 'call_1', 'bash'],
      ],
    );
    assert.match(String(r.observations[0]!.content), /^exit code 2\nnames\.txt\nls: cannot access '\/check'/);
    assert.equal(r.observations[1]!.content, 'exit code 3');
    const odd = await env.step({
      role: 'assistant',
      content: '',
      tool_calls: [
        { id: 'x', type: 'function', function: { name: 'python', arguments: '{}' } },
        { id: 'y', type: 'function', function: { name: 'bash', arguments: '{"cmd": "ls"}' } },
      ],
    });
    assert.match(String(odd.observations[0]!.content), /no tool "python"/);
    assert.match(String(odd.observations[1]!.content), /send \{"command"/);
  } finally {
    await env.close();
  }
});

test('an episode whose folder outgrows its limit ends at once and fails; close removes the folder', async () => {
  const small = terminalKind(setup, { ...DEFAULT_LIMITS, directoryMb: 1, fileMb: 2 });
  const [task] = terminalTasks(1, 1);
  assert.ok(task);
  const env = small.create();
  await env.reset(task);
  const r = await env.step(bash('head -c 1500000 /dev/zero > fill'));
  assert.equal(r.done, true);
  const outcome = await env.outcome();
  assert.deepEqual(outcome, { reward: -1, success: false, detail: "the episode's folder went over 1 MB" });
  const root = (env as unknown as { sandbox: { root: string } }).sandbox.root;
  assert.equal(existsSync(root), true);
  await env.close();
  assert.equal(existsSync(root), false);
  await env.close();
});

test('tasks are stable per seed and cycle through the families', () => {
  const a = terminalTasks(12, 3);
  assert.deepEqual(terminalTasks(12, 3), a);
  assert.notDeepEqual(terminalTasks(12, 4), a);
  assert.equal(new Set(a.map((t) => t.id)).size, 12);
  assert.equal(new Set(a.map((t) => t.family)).size, Object.keys(FAMILIES).length);
});
