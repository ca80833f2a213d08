// The worked steps of a GSM8K problem, as the simulated replies show them. GSM8K's test file has
// only the final answer, so the steps are made from the question's own numbers with correct
// arithmetic and end on the true answer: they look like a solution, which is all the users'
// rubrics (a matter of style) and the corpus need. Nobody grades their reasoning.

import type { Problem } from './problems.js';
import { pick, type Rng } from './random.js';

export interface Step {
  a: string;
  op: '+' | '-' | 'x' | '/';
  b: string;
  result: string;
}

export interface Work {
  steps: Step[];
  answer: string;
}

export function numbersIn(text: string): string[] {
  return (text.match(/\d+(?:\.\d+)?/g) ?? []).map((n) => String(Number(n)));
}

/** Two or three steps: the first two numbers combined, then the running result with the next number (or the answer). */
export function workFor(problem: Problem, r: Rng): Work {
  const numbers = numbersIn(problem.question.replace(/,(?=\d{3})/g, ''));
  while (numbers.length < 2) numbers.push(pick(r, ['2', '3', '4', '5', '10']));
  const answer = problem.answer.replace(/,/g, '');
  const steps: Step[] = [];
  let running = numbers[0]!;
  for (const next of numbers.slice(1, 3)) {
    const step = combine(running, next, r);
    steps.push(step);
    running = step.result;
  }
  if (running !== answer) {
    const diff = Number(answer) - Number(running);
    if (Number.isFinite(diff) && diff !== 0)
      steps.push({ a: running, op: diff > 0 ? '+' : '-', b: format(Math.abs(diff)), result: answer });
  }
  return { steps, answer };
}

function combine(a: string, b: string, r: Rng): Step {
  const x = Number(a),
    y = Number(b);
  const choices: Step['op'][] = ['+', 'x'];
  if (x > y) choices.push('-');
  if (y !== 0 && Number.isInteger(x / y) && y > 1) choices.push('/');
  const op = pick(r, choices);
  const value = op === '+' ? x + y : op === '-' ? x - y : op === 'x' ? x * y : x / y;
  return { a, op, b, result: format(value) };
}

function format(n: number): string {
  return String(Math.round(n * 100) / 100);
}

export const OP_SYMBOL: Record<Step['op'], string> = { '+': '+', '-': '-', x: 'x', '/': '/' };
