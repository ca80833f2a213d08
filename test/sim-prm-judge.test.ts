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
  assert.equal(new Set(train.map((p) => p.template)).size, 9);
  for (const p of [...train, ...heldout]) {
    assert.equal(solveArithmetic(p.question)?.answer, Number(p.answer), p.question);
    assert.equal(evaluate(p.expression), Number(p.answer));
    assert.deepEqual(numbersIn(p.expression), numbersIn(p.question));
    // Step by step: one step per operation, each on the last one's result, ending at the answer.
    assert.equal(p.steps.length, numbersIn(p.question).length - 1);
    assert.equal(evaluate(p.steps.at(-1)!), Number(p.answer));
    assert.deepEqual(solveArithmetic(p.question)!.values, p.steps.map(evaluate));
  }
  const twoStep = train.find((p) => p.template === 'mul-add')!;
  const [a, b, c] = numbersIn(twoStep.question);
  assert.deepEqual(twoStep.steps, [`${a} * ${b}`, `${a! * b!} + ${c}`]);
  const threeStep = train.find((p) => p.template === 'mul-sub-add')!;
  const [w, x, y, z] = numbersIn(threeStep.question);
  assert.deepEqual(threeStep.steps, [`${w} * ${x}`, `${w! * x!} - ${y}`, `${w! * x! - y!} + ${z}`]);
  const fourStep = train.find((p) => p.template === 'mul-add-sub-add')!;
  const [f, g, h, i, j] = numbersIn(fourStep.question);
  const three = f! * g! + h! - i!;
  assert.deepEqual(fourStep.steps, [`${f} * ${g}`, `${f! * g!} + ${h}`, `${f! * g! + h!} - ${i}`, `${three} + ${j}`]);
  // Multi-step tasks only: every template of two or more operations, and nothing shorter.
  const multi = arithmeticProblems('train', 200, 0, 2);
  assert.ok(multi.every((p) => p.steps.length >= 2));
  assert.deepEqual(new Set(multi.map((p) => p.steps.length)), new Set([2, 3, 4]));
  const four = arithmeticProblems('train', 100, 0, 4);
  assert.deepEqual(new Set(four.map((p) => p.template)), new Set(['mul-add-sub-add', 'mul-sub-add-sub']));
  assert.ok(
    [...train, ...heldout].every((p) => Number(p.answer) > 0),
    'every answer is a positive count',
  );
  assert.deepEqual(arithmeticProblems('train', 5, 7, 2), arithmeticProblems('train', 5, 7, 2));
  assert.throws(() => arithmeticProblems('train', 1, 0, 5), /no arithmetic template has 5 or more operations/);
  const seen = new Set(train.map((p) => p.question));
  assert.ok(heldout.filter((p) => seen.has(p.question)).length <= 3, 'held-out questions are (almost all) new');
  assert.equal(solveArithmetic('What is the weather like?'), null);
  // The environment kind: seeds take disjoint positions, the same seed the same tasks.
  const kind = arithmeticKind('heldout');
  assert.deepEqual(kind.tasks(3, 0), kind.tasks(3, 0));
  assert.notEqual(kind.tasks(1, 0)[0]!.id, kind.tasks(1, 1)[0]!.id);
});

test('tool traces: one calculator call per operation, on the last result, with the stated error mix', () => {
  const traces = buildToolCorpus({ ...DEFAULT_TOOL_CORPUS, traces: 3000 });
  let wrong = 0,
    expectedWrong = 0,
    miscopied = 0;
  const { wrongOperator, wrongNumber } = DEFAULT_TOOL_CORPUS;
  for (const t of traces) {
    const question = t[1]!.content as string;
    const solution = solveArithmetic(question)!;
    const calls = t.filter((m) => m.role === 'assistant' && m.tool_calls);
    const results = t.filter((m) => m.role === 'tool').map((m) => m.content as string);
    assert.equal(calls.length, solution.values.length, 'a call per operation');
    calls.forEach((m, i) => {
      const { expression } = JSON.parse(m.tool_calls![0]!.function.arguments) as { expression: string };
      assert.equal(results[i], String(evaluate(expression)), 'the tool returns the call result');
      if (i > 0) assert.ok(expression.startsWith(`${results[i - 1]} `), 'a later call starts from the last result');
    });
    if (Number(results.at(-1)) !== solution.answer) wrong++;
    // Every call right: (1 - wrong operator)(1 - wrong number) each (a wrong one rarely lands right).
    expectedWrong += 1 - ((1 - wrongOperator) * (1 - wrongNumber)) ** calls.length;
    if (t.at(-1)!.content !== `Answer: ${results.at(-1)}`) miscopied++;
  }
  assert.ok(Math.abs(wrong - expectedWrong) / 3000 < 0.04, `wrong results ${wrong / 3000} vs ${expectedWrong / 3000}`);
  assert.ok(Math.abs(miscopied / 3000 - 0.2) < 0.03, `miscopied answers ${miscopied / 3000}`);
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
    -1,
    'the one call this problem needs, made again after a first step: wasted',
  );
  assert.equal(prmTruth(q, call('12 + 30'), '42'), -1, 'wrong operation');
  assert.equal(prmTruth(q, call('6 * 60'), '360'), -1, 'numbers not in the problem');
  assert.equal(prmTruth(q, call('12 * (30'), 'error: missing ")" at the end'), -1, 'calculator error');
  assert.equal(prmTruth(q, 'The answer is 360.', '(nothing)'), -1, 'no call');
  assert.equal(prmTruth(q, `${call('12 * 30')}\n${call('1 + 1')}`, '360'), -1, 'two calls');

  // Two operations, a step each: the first step's value, then the answer from it.
  const two = 'Ada fills 12 bags with 7 stamps each and has 15 loose ones. How many in all?';
  const later = `${two}\n[The assistant already took 1 step on this request; the reply below is the next one.]`;
  assert.equal(prmTruth(two, call('12 * 7'), '84'), 1, 'the first step');
  assert.equal(prmTruth(later, call('84 + 15'), '99'), 1, "the second step, on the first one's value");
  assert.equal(prmTruth(two, call('12 * 7 + 15'), '99'), 1, 'both at once');
  assert.equal(prmTruth(later, call('84 - 15'), '69'), -1, 'wrong operation in the second step');
  assert.equal(prmTruth(later, call('85 + 15'), '100'), -1, 'a wrong first value carried on');
  assert.equal(prmTruth(two, call('12 + 7'), '19'), -1, 'wrong operation in the first step');

  // Three operations: the third step starts from the second step's value.
  const three = 'Ben packs 12 crates of 7 coins, adds 15 more and then ships 20. How many are left?';
  assert.equal(prmTruth(three, call('12 * 7'), '84'), 1, 'the first of three');
  assert.equal(prmTruth(three, call('84 + 15'), '99'), 1, 'the second of three');
  assert.equal(prmTruth(three, call('99 - 20'), '79'), 1, "the third, on the second one's value");
  assert.equal(prmTruth(three, call('99 + 20'), '119'), -1, 'wrong operation in the third step');

  // A call after as many steps as the solution has operations is a loop or a wasted step.
  const after = (n: number) =>
    `${three}\n[The assistant already took ${n} step${n === 1 ? '' : 's'} on this request; the reply below is the next one.]`;
  assert.equal(prmTruth(after(2), call('99 - 20'), '79'), 1, 'the third call, after two steps');
  assert.equal(prmTruth(after(3), call('99 - 20'), '79'), -1, 'the answer computed again after three steps');
  assert.equal(prmTruth(after(4), call('12 * 7'), '84'), -1, 'a first value computed again');
  assert.equal(prmTruth(`${two}\n[The assistant already took 1 step on this request; x]`, call('84 + 15'), '99'), 1);
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
