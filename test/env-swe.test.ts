// The SWE environment: in every task family the repository's own tests fail before a right fix and
// pass after it, the hidden calls accept the right fix and refuse a near miss and an untouched
// repository, and code under test can neither read the expected results nor fake a passing probe.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_LIMITS, probeSandbox } from '../src/env/sandbox.js';
import { probeResults, sameValue, sweKind } from '../src/env/swe.js';
import { SWE_FAMILIES, sweTasks, type SweTask } from '../src/env/swe-tasks.js';
import { playShell } from './helpers/shell-episode.js';
import { sweFix, sweNearMiss } from './helpers/swe-solutions.js';

const kind = sweKind(await probeSandbox(), { ...DEFAULT_LIMITS, commandSeconds: 10 });
const RUN_TESTS = 'python3 -m unittest discover -s tests -t . 2>&1 | tail -n 1';

const play = (task: SweTask, commands: string[]) => playShell(kind, task, commands);

test('each family: the tests show the bug, a right fix passes every hidden call, a near miss and no fix fail', async () => {
  const families = Object.keys(SWE_FAMILIES);
  const tasks = sweTasks(families.length, 3);
  assert.deepEqual(
    tasks.map((t) => t.family),
    families,
  );
  for (const task of tasks) {
    const n = task.hidden.length;
    const right = await play(task, [RUN_TESTS, sweFix(task), RUN_TESTS]);
    assert.match(right.outputs[0]!, /\nFAILED \((failures|errors)=1\)\n?$/, `${task.id}: the bug shows in the tests`);
    assert.equal(right.outputs[1], 'exit code 0', task.id);
    assert.match(right.outputs[2]!, /^exit code 0\nOK\n?$/, `${task.id}: the tests pass after the fix`);
    assert.deepEqual(right.outcome, { reward: 1, success: true, detail: `hidden calls: ${n}/${n} right` }, task.id);
    const near = await play(task, [sweNearMiss(task)]);
    assert.equal(near.outcome.success, false, `${task.id}: the near miss passed`);
    assert.equal(near.outcome.reward, -1);
    const untouched = await play(task, []);
    assert.equal(untouched.outcome.success, false, `${task.id}: the untouched repository passed`);
  }
});

test('code under test cannot see the expected results or fake the probe', async () => {
  const [task] = sweTasks(1, 11);
  assert.ok(task && task.family === 'wrong-operator');
  // At import: read the calls, answer each with its expected value if the sandbox holds one, print
  // a probe line of its own and leave before the real probe prints.
  const cheat = [
    'import json, os',
    "calls = json.load(open('/probe/calls.json'))",
    "print('openclaw-rl-probe:' + json.dumps([{'value': c.get('expected', 0)} for c in calls]), flush=True)",
    'os._exit(0)',
  ].join('\n');
  const r = await play(task, [`printf '%s\\n' '${cheat.replaceAll("'", "'\\''")}' >> shop/geometry.py`]);
  assert.equal(r.outputs[0], 'exit code 0');
  assert.equal(r.outcome.success, false);
  assert.match(r.outcome.detail, /^hidden calls: 0\/5 right$/);
  // An import that fails is every call's error, not a crash of the verdict.
  const broken = await play(task, ["echo 'def (' > shop/geometry.py"]);
  assert.deepEqual(broken.outcome, { reward: -1, success: false, detail: 'hidden calls: 0/5 right' });
});

test('probe output and value comparison', () => {
  assert.deepEqual(probeResults('noise\nopenclaw-rl-probe:[{"value": 3.0}, {"error": "KeyError"}]\n', 2), [
    { value: 3 },
    { error: 'KeyError' },
  ]);
  assert.equal(probeResults('openclaw-rl-probe:[{"value": 1}]', 2), null, 'one result per call');
  assert.equal(probeResults('openclaw-rl-probe:[{"value": ', 1), null);
  assert.equal(probeResults('no mark here', 0), null);
  assert.ok(sameValue(3, 3.0000000000001));
  assert.ok(!sameValue(3, 3.001));
  assert.ok(sameValue({ a: [1, 2], b: 'x' }, { b: 'x', a: [1, 2] }));
  assert.ok(!sameValue({ a: 1 }, { a: 1, b: 2 }));
  assert.ok(!sameValue([1, 2], [2, 1]));
  assert.ok(!sameValue(true, 1));
  assert.ok(!sameValue(null, 0));
  assert.ok(!sameValue('3', 3));
});
