// The simulated users and their rubrics: each reply style is accepted or rejected for the right
// reasons, and every correction names what to change in words the simulated judge reads back.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readNextState } from '../src/sim/judge-policy.js';
import { loadProblems } from '../src/sim/problems.js';
import { rng } from '../src/sim/random.js';
import { gradingReply, GRADING_STYLES, homeworkReply, HOMEWORK_STYLES, submissionFor } from '../src/sim/replies.js';
import { STUDENT_RUBRIC, TEACHER_RUBRIC } from '../src/sim/rubrics.js';
import { STUDENT, TEACHER } from '../src/sim/users.js';
import { workFor } from '../src/sim/work.js';

const problems = loadProblems().train.slice(0, 200);

test('the student accepts only natural prose with steps, and says what is wrong with the rest', () => {
  const r = rng(1);
  const expected = {
    markdown: ['bold', 'marker'],
    numbered: ['list', 'chatbot'],
    marker: ['marker'],
    terse: ['no_steps'],
    natural: [],
  };
  for (const style of HOMEWORK_STYLES) {
    for (const p of problems) {
      const reply = homeworkReply(style, workFor(p, r), r);
      assert.deepEqual(STUDENT_RUBRIC.judge(reply).violations, expected[style], `${style}: ${reply}`);
    }
  }
});

test('the teacher accepts only warm, detailed comments', () => {
  const r = rng(2);
  for (const style of GRADING_STYLES) {
    for (const p of problems) {
      const { work, submission } = submissionFor(p, r);
      const verdict = TEACHER_RUBRIC.judge(gradingReply(style, work, submission, r));
      assert.equal(verdict.accepted, style === 'warm', `${style}: ${verdict.violations.join(', ')}`);
      if (style !== 'warm') assert.ok(verdict.violations.includes('cold'), style);
    }
  }
  assert.deepEqual(TEACHER_RUBRIC.judge('**Score:** 9/10\n**Comments:** Good job, you got it.').violations, [
    'formatted',
    'short',
  ]);
});

test("the steps use the question's numbers with correct arithmetic and end on the true answer", () => {
  const r = rng(3);
  for (const p of problems) {
    const work = workFor(p, r);
    assert.equal(work.steps[work.steps.length - 1]!.result, work.answer, p.question);
    for (const s of work.steps) {
      const [a, b] = [Number(s.a), Number(s.b)];
      const value = s.op === '+' ? a + b : s.op === '-' ? a - b : s.op === 'x' ? a * b : a / b;
      assert.ok(Math.abs(value - Number(s.result)) < 0.01, `${s.a} ${s.op} ${s.b} = ${s.result}`);
    }
  }
});

test('a correction carries its direction: the judge reads back exactly the violations it names', () => {
  const r = rng(4);
  const cases = [
    ...(['bold', 'list', 'heading', 'marker', 'chatbot', 'no_steps'] as const).map((v) => ({
      user: STUDENT,
      violations: [v],
    })),
    { user: STUDENT, violations: ['bold', 'marker'] as const },
    { user: STUDENT, violations: ['list', 'chatbot'] as const },
    ...(['formatted', 'short', 'cold'] as const).map((v) => ({ user: TEACHER, violations: [v] })),
    { user: TEACHER, violations: ['formatted', 'short', 'cold'] as const },
  ];
  const seen = new Set<string>();
  for (const { user, violations } of cases) {
    for (let k = 0; k < 20; k++) {
      const text = user.correction([...violations], r);
      seen.add(text);
      assert.deepEqual(readNextState(text), { score: -1, lessons: [...violations] }, text);
    }
  }
  assert.ok(seen.size > cases.length * 3, `corrections should vary, got ${seen.size} distinct`);
});

test('acceptance, thanks and save requests read as progress with nothing to learn', () => {
  const r = rng(5);
  for (const user of [STUDENT, TEACHER]) {
    for (const p of problems.slice(0, 20)) {
      const task = user.task(p, r);
      for (const text of [user.acceptance(task, true, r), user.acceptance(task, false, r), user.saveRequest(task, r)]) {
        assert.deepEqual(readNextState(text), { score: 1, lessons: [] }, text);
      }
      assert.match(user.acceptance(task, true, r), new RegExp(task.file.replace('.', '\\.')));
    }
  }
});

test('the held-out problems are never among the training problems', () => {
  const { train, eval: held } = loadProblems();
  const questions = new Set(train.map((p) => p.question));
  assert.equal(held.length, 32);
  assert.ok(held.every((p) => !questions.has(p.question)));
});
