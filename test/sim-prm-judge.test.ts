// The agents benchmark's pieces that decide its numbers: the arithmetic task generator (splits,
// solutions a reader can recover from the text), the base model's traces (their stated error
// mix), and the simulated PRM judge's faultless vote and its error rate.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { arithmeticProblems, numbersIn, solveArithmetic } from '../src/env/arithmetic-tasks.js';
import { evaluate } from '../src/env/calculator.js';
import { arithmeticKind } from '../src/env/tool-call.js';
import { prmPolicy, prmTruth } from '../src/sim/prm-judge-policy.js';
import { buildEvalPrompt } from '../src/judge/prompts.js';
import { rng } from '../src/sim/random.js';
import { buildToolCorpus, DEFAULT_TOOL_CORPUS } from '../src/sim/tool-corpus.js';

test('arithmetic tasks: every template is solvable from its text, and the splits never share a question', () => {
  const train = arithmeticProblems('train', 300);
  const heldout = arithmeticProblems('heldout', 300);
  assert.equal(new Set(train.map((p) => p.template)).size, 5);
  for (const p of [...train, ...heldout]) {
    assert.equal(solveArithmetic(p.question)?.answer, Number(p.answer), p.question);
    assert.equal(evaluate(p.expression), Number(p.answer));
    assert.deepEqual(numbersIn(p.expression), numbersIn(p.question));
  }
  const seen = new Set(train.map((p) => p.question));
  assert.ok(heldout.filter((p) => seen.has(p.question)).length <= 3, 'held-out questions are (almost all) new');
  assert.equal(solveArithmetic('What is the weather like?'), null);
  // The environment kind: seeds take disjoint positions, the same seed the same tasks.
  const kind = arithmeticKind('heldout');
  assert.deepEqual(kind.tasks(3, 0), kind.tasks(3, 0));
  assert.notEqual(kind.tasks(1, 0)[0]!.id, kind.tasks(1, 1)[0]!.id);
});

test('tool traces: one calculator call whose result the tool returns, with the stated error mix', () => {
  const traces = buildToolCorpus({ ...DEFAULT_TOOL_CORPUS, traces: 2000 });
  let wrongCall = 0,
    miscopied = 0;
  for (const t of traces) {
    const question = t[1]!.content as string;
    const call = JSON.parse(t[2]!.tool_calls![0]!.function.arguments) as { expression: string };
    assert.equal(t[3]!.content, String(evaluate(call.expression)));
    if (evaluate(call.expression) !== solveArithmetic(question)!.answer) wrongCall++;
    if (t[4]!.content !== `Answer: ${t[3]!.content as string}`) miscopied++;
  }
  // A wrong operator or a mistyped number: 1 - (1 - 0.35)(1 - 0.15) = 0.45 (a few wrong operators give the same value).
  assert.ok(Math.abs(wrongCall / 2000 - 0.45) < 0.05, `wrong calls ${wrongCall / 2000}`);
  assert.ok(Math.abs(miscopied / 2000 - 0.2) < 0.04, `miscopied answers ${miscopied / 2000}`);
});

test('PRM judge: +1 only for a well-formed call on the problem numbers that solves it', () => {
  const q = 'There are 12 boxes with 30 cards in each box. How many in total?';
  const call = (expression: string) => `[calls tool calculator] ${JSON.stringify({ expression })}`;
  assert.equal(prmTruth(q, call('12 * 30'), '360'), 1);
  assert.equal(prmTruth(q, call('12 * 30'), '[TOOL calculator]\n360'), 1, 'the prompt heads tool outputs');
  assert.equal(
    prmTruth(
      `${q}\n[The assistant already took 1 step on this request; the reply below is the next one.]`,
      call('30*12'),
      '360',
    ),
    1,
  );
  assert.equal(prmTruth(q, call('12 + 30'), '42'), -1, 'wrong operation');
  assert.equal(prmTruth(q, call('6 * 60'), '360'), -1, 'numbers not in the problem');
  assert.equal(prmTruth(q, call('12 * (30'), 'error: missing ")" at the end'), -1, 'calculator error');
  assert.equal(prmTruth(q, 'The answer is 360.', '(nothing)'), -1, 'no call');
  assert.equal(prmTruth(q, `${call('12 * 30')}\n${call('1 + 1')}`, '360'), -1, 'two calls');
});

test('PRM judge endpoint policy: reads the real eval prompt, and flips votes at the error rate', () => {
  const turn = {
    messages: [
      { role: 'system' as const, content: 'Solve the math word problem.' },
      { role: 'user' as const, content: 'Ada has 20 coins and gets 15 more. How many are there now?' },
    ],
    response: {
      role: 'assistant' as const,
      content: '',
      tool_calls: [
        { id: 'c', type: 'function' as const, function: { name: 'calculator', arguments: '{"expression":"20 + 15"}' } },
      ],
    },
  };
  const prompt = buildEvalPrompt(
    turn as never,
    { messages: [{ role: 'tool', tool_call_id: 'c', content: '35' }] } as never,
  );
  const r = rng(7);
  let plus = 0,
    wrong = 0;
  for (let i = 0; i < 2000; i++) {
    const vote = prmPolicy(prompt, 0.2, r)!;
    assert.equal(vote.kind, 'eval');
    const score = Number(/\\boxed\{(-?\d)\}/.exec(vote.content)![1]);
    if (score === 1) plus++;
    if (vote.wrong) wrong++;
    assert.equal(vote.wrong, score !== 1);
  }
  assert.equal(plus + wrong, 2000);
  assert.ok(Math.abs(wrong / 2000 - 0.2) < 0.03, `error rate ${wrong / 2000}`);
  assert.equal(prmPolicy([{ role: 'user', content: 'hello' }], 0.2, r), null);
});
