// The tool-call environment: its calculator (a parser, never eval), the answer it reads from the
// model's final message, and an episode through reset, step and outcome with hand-written turns.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import { CalculatorError, evaluate, formatNumber } from '../src/env/calculator.js';
import { calculatorResult, extractAnswer, toolCallKind, ToolCallEnvironment } from '../src/env/tool-call.js';

test('the calculator follows arithmetic precedence and associativity', () => {
  const cases: [string, number][] = [
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['10 - 4 - 3', 3],
    ['48 / 4 / 2', 6],
    ['2 ^ 3 ^ 2', 512],
    ['2 ** 10', 1024],
    ['-2 ^ 2', -4],
    ['2 ^ -1', 0.5],
    ['-(3 - 5) * +4', 8],
    ['.5 + 1.25e1', 13],
    ['((((7))))', 7],
    [' 12 * (30 + 6) / 9 ', 48],
  ];
  for (const [expression, value] of cases) assert.equal(evaluate(expression), value, expression);
});

test('the calculator refuses what is not arithmetic, with a reason', () => {
  const refused: [string, RegExp][] = [
    ['', /empty/],
    ['1 +', /expected a number/],
    ['(1 + 2', /missing "\)"/],
    ['1 + 2)', /unexpected "\)"/],
    ['2 3', /unexpected "3"/],
    ['1,000 + 1', /write 1000/],
    ['process.exit(1)', /unexpected "p"/],
    ['Math.max(1, 2)', /unexpected "M"/],
    ['1 / 0', /division by zero/],
    ['1 / (2 - 2)', /division by zero/],
    ['10 ^ 400', /not a finite number/],
    [`${'('.repeat(100)}1${')'.repeat(100)}`, /nests deeper/],
    [`${'1+'.repeat(300)}1`, /longer than/],
  ];
  for (const [expression, reason] of refused)
    assert.throws(
      () => evaluate(expression),
      (e: Error) => e instanceof CalculatorError && reason.test(e.message),
    );
});

test('results are printed short and exact enough', () => {
  assert.equal(formatNumber(0.1 + 0.2), '0.3');
  assert.equal(formatNumber(2 / 3), '0.666666666667');
  assert.equal(formatNumber(-0), '0');
  assert.equal(formatNumber(1200), '1200');
  assert.equal(calculatorResult('{"expression": "(3 + 4) * 6"}'), '42');
  assert.match(calculatorResult('{"expr": "1"}'), /^error: send \{"expression"/);
  assert.match(calculatorResult('not json'), /^error: the arguments are not JSON/);
  assert.match(calculatorResult('{"expression": "2 +"}'), /^error: expected a number/);
});

test('the final answer is the marked number, else the last one', () => {
  assert.equal(extractAnswer('First 3 + 4 = 7, then 7 * 2 = 14.\nAnswer: 14'), 14);
  assert.equal(extractAnswer('The answer is $1,200.'), 1200);
  assert.equal(extractAnswer('so \\boxed{-3.5} it is, not 7'), -3.5);
  assert.equal(extractAnswer('#### 36'), 36);
  assert.equal(extractAnswer('She has 5 apples, then 12.'), 12);
  assert.equal(extractAnswer('I do not know.'), null);
});

const call = (id: string, name: string, args: string): ChatMessage => ({
  role: 'assistant',
  content: '',
  tool_calls: [{ id, type: 'function', function: { name, arguments: args } }],
});

test('an episode: calculator calls are answered in order, the right final answer scores +1', async () => {
  const [task] = toolCallKind().tasks(1, 7);
  assert.ok(task);
  const env = new ToolCallEnvironment();
  const first = await env.reset(task);
  assert.deepEqual(
    first.map((m) => m.role),
    ['system', 'user'],
  );
  assert.equal(first[1]!.content, task.question);
  assert.equal(env.tools[0]!.function.name, 'calculator');

  const two: ChatMessage = {
    role: 'assistant',
    content: '',
    tool_calls: [
      { id: 'a', type: 'function', function: { name: 'calculator', arguments: '{"expression": "6 * 7"}' } },
      { id: 'b', type: 'function', function: { name: 'search', arguments: '{}' } },
    ],
  };
  const r1 = await env.step(two);
  assert.equal(r1.done, false);
  assert.deepEqual(
    r1.observations.map((m) => [m.role, m.tool_call_id, m.content]),
    [
      ['tool', 'a', '42'],
      ['tool', 'b', 'error: there is no tool "search"; the only tool is calculator'],
    ],
  );
  const r2 = await env.step(call('c', 'calculator', '{"expression": "1 / 0"}'));
  assert.equal(r2.observations[0]!.content, 'error: division by zero');

  const final = await env.step({ role: 'assistant', content: `So it is ${task.answer}.\nAnswer: ${task.answer}` });
  assert.deepEqual(final, { observations: [], done: true });
  const outcome = await env.outcome();
  assert.equal(outcome.reward, 1);
  assert.equal(outcome.success, true);
  await env.close();
});

test('a wrong answer, no number, or no final answer at all scores -1', async () => {
  const [task] = toolCallKind().tasks(1, 3);
  assert.ok(task);
  const wrong = Number(task.answer.replace(/,/g, '')) + 1;
  for (const [reply, detail] of [
    [`Answer: ${wrong}`, /^answer /],
    ['I cannot tell.', /no number/],
    [null, /step limit/],
  ] as const) {
    const env = new ToolCallEnvironment();
    await env.reset(task);
    await env.step(call('x', 'calculator', '{"expression": "1 + 1"}'));
    if (reply !== null) await env.step({ role: 'assistant', content: reply });
    const outcome = await env.outcome();
    assert.equal(outcome.reward, -1, String(reply));
    assert.equal(outcome.success, false);
    assert.match(outcome.detail, detail);
  }
});

test('tasks are GSM8K problems in a seeded order with stable ids', () => {
  const kind = toolCallKind();
  const a = kind.tasks(5, 1);
  assert.deepEqual(
    kind.tasks(5, 1).map((t) => t.id),
    a.map((t) => t.id),
  );
  assert.notDeepEqual(
    kind.tasks(5, 2).map((t) => t.id),
    a.map((t) => t.id),
  );
  assert.equal(new Set(kind.tasks(200, 1).map((t) => t.id)).size, 200);
  for (const t of a) assert.match(t.id, /^gsm8k-\d+$/);
  assert.throws(() => kind.tasks(100_000, 1), /has \d+ problems/);
});
