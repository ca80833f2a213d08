// Simple arithmetic word problems for the tool-call environment: one to four operations on
// two-digit numbers, from a few sentence templates, so that a tiny model can partly solve them,
// and only by calling the calculator (it cannot multiply 47 by 23 in its head). A problem with
// several operations is solved a step at a time, one calculator call each, every call after the
// first on the previous call's result: the steps a process judge rewards one by one. Each task is a pure function of (split, position):
// the `train` and `heldout` splits draw from different seed spaces, so a benchmark trains on one
// and measures on the other.

import { hash32, pick, rng, type Rng } from '../sim/random.js';
import { evaluate, formatNumber } from './calculator.js';

export type ArithmeticSplit = 'train' | 'heldout';

export interface ArithmeticProblem {
  /** `arith-<split>-<position>`. */
  id: string;
  /** The template's name: the task family. */
  template: string;
  question: string;
  /** The expression that solves it, with the question's numbers in the order they appear. */
  expression: string;
  /** The same solution one operation a step, each on the previous step's result: "12 * 7", "84 + 15". */
  steps: string[];
  answer: string;
}

type Operator = '+' | '-' | '*';

interface Template {
  name: string;
  /** How many numbers it takes, each drawn from [lo, hi]. */
  ranges: [number, number][];
  text: (n: number[], r: Rng) => string;
  /** Words only this template's sentence has: how a reader (the simulated judge) tells which it is. */
  cue: RegExp;
  /** Applied left to right: numbers[0] ops[0] numbers[1] ops[1] numbers[2]. */
  ops: Operator[];
}

const NAMES = ['Ada', 'Ben', 'Cleo', 'Dev', 'Eli', 'Fay', 'Gus', 'Hana', 'Ivo', 'Jun'];
const ITEMS = ['apples', 'stamps', 'marbles', 'books', 'coins', 'cards', 'shells', 'pencils'];

// The operators a template uses, one per template: the base model is taught a mix of them and
// learning has to find which one each sentence asks for.
const TEMPLATES: Template[] = [
  {
    name: 'add',
    cue: / and gets \d+ more\./,
    ranges: [
      [11, 60],
      [11, 60],
    ],
    text: ([a, b], r) => `${pick(r, NAMES)} has ${a} ${pick(r, ITEMS)} and gets ${b} more. How many are there now?`,
    ops: ['+'],
  },
  {
    name: 'sub',
    cue: / and gave away \d+\./,
    ranges: [
      [61, 99],
      [11, 59],
    ],
    text: ([a, b], r) => `${pick(r, NAMES)} had ${a} ${pick(r, ITEMS)} and gave away ${b}. How many are left?`,
    ops: ['-'],
  },
  {
    name: 'mul',
    cue: / boxes with \d+ /,
    ranges: [
      [11, 40],
      [11, 40],
    ],
    text: ([a, b], r) => `There are ${a} boxes with ${b} ${pick(r, ITEMS)} in each box. How many in total?`,
    ops: ['*'],
  },
  {
    name: 'mul-add',
    cue: / fills \d+ bags /,
    ranges: [
      [11, 30],
      [11, 30],
      [11, 60],
    ],
    text: ([a, b, c], r) =>
      `${pick(r, NAMES)} fills ${a} bags with ${b} ${pick(r, ITEMS)} each and has ${c} loose ones. How many in all?`,
    ops: ['*', '+'],
  },
  {
    name: 'add-sub',
    cue: /^A shop had /,
    ranges: [
      [40, 99],
      [11, 60],
      [11, 39],
    ],
    text: ([a, b, c], r) =>
      `A shop had ${a} ${pick(r, ITEMS)}, got ${b} more, then sold ${c}. How many does it have now?`,
    ops: ['+', '-'],
  },
  {
    name: 'mul-add-sub',
    cue: / packs \d+ crates /,
    ranges: [
      [11, 30],
      [11, 30],
      [11, 60],
      [11, 99],
    ],
    text: ([a, b, c, d], r) =>
      `${pick(r, NAMES)} packs ${a} crates of ${b} ${pick(r, ITEMS)}, adds ${c} more and then ships ${d}. ` +
      'How many are left?',
    ops: ['*', '+', '-'],
  },
  {
    name: 'mul-sub-add',
    cue: /^A hall has /,
    ranges: [
      [11, 30],
      [11, 30],
      [11, 99],
      [11, 60],
    ],
    text: ([a, b, c, d], r) =>
      `A hall has ${a} rows of ${b} chairs. ${c} chairs break and ${pick(r, NAMES)} brings ${d} new ones. ` +
      'How many chairs are there now?',
    ops: ['*', '-', '+'],
  },
  {
    name: 'mul-add-sub-add',
    cue: / stacks \d+ trays /,
    ranges: [
      [11, 30],
      [11, 30],
      [11, 60],
      [11, 99],
      [11, 60],
    ],
    text: ([a, b, c, d, e], r) =>
      `${pick(r, NAMES)} stacks ${a} trays of ${b} ${pick(r, ITEMS)}, adds ${c}, sells ${d} and then finds ${e} more. ` +
      'How many are there now?',
    ops: ['*', '+', '-', '+'],
  },
  {
    name: 'mul-sub-add-sub',
    cue: /^A farm has /,
    ranges: [
      [11, 30],
      [11, 30],
      [11, 99],
      [11, 60],
      [11, 30],
    ],
    text: ([a, b, c, d, e], r) =>
      `A farm has ${a} rows of ${b} trees. ${c} trees fall, ${pick(r, NAMES)} plants ${d} new ones and then ${e} ` +
      'are sold. How many trees are left?',
    ops: ['*', '-', '+', '-'],
  },
];

export const ARITHMETIC_FAMILIES: readonly string[] = TEMPLATES.map((t) => t.name);

/** The whole solution in one expression (left to right is also the precedence of every template). */
function expressionOf(numbers: number[], ops: Operator[]): string {
  return ops.reduce((e, op, i) => `${e} ${op} ${numbers[i + 1]}`, String(numbers[0]));
}

/** The solution a step at a time: each step's expression and its result. */
export function stepwise(numbers: number[], ops: readonly Operator[]): { expression: string; value: number }[] {
  const out: { expression: string; value: number }[] = [];
  let prev = String(numbers[0]);
  ops.forEach((op, i) => {
    const expression = `${prev} ${op} ${numbers[i + 1]}`;
    const value = evaluate(expression);
    out.push({ expression, value });
    prev = formatNumber(value);
  });
  return out;
}

/**
 * The task at `position` of `split`: the same every time. `minOperations` keeps to the templates
 * with at least that many operations (the multi-step tasks where a process judge has steps to
 * reward); a position then holds one of those.
 */
export function arithmeticProblem(split: ArithmeticSplit, position: number, minOperations = 1): ArithmeticProblem {
  const r = rng(hash32(`arithmetic:${split}:${position}`));
  const templates = TEMPLATES.filter((t) => t.ops.length >= minOperations);
  if (templates.length === 0) throw new RangeError(`no arithmetic template has ${minOperations} or more operations`);
  const template = pick(r, templates);
  const numbers = template.ranges.map(([lo, hi]) => lo + Math.floor(r.next() * (hi - lo + 1)));
  const expression = expressionOf(numbers, template.ops);
  return {
    id: `arith-${split}-${position}`,
    template: template.name,
    question: template.text(numbers, r),
    expression,
    steps: stepwise(numbers, template.ops).map((x) => x.expression),
    answer: formatNumber(evaluate(expression)),
  };
}

/** `count` tasks of `split` starting at position `from`. */
export function arithmeticProblems(
  split: ArithmeticSplit,
  count: number,
  from = 0,
  minOperations = 1,
): ArithmeticProblem[] {
  return Array.from({ length: count }, (_, i) => arithmeticProblem(split, from + i, minOperations));
}

/**
 * The solution of a question written by one of the templates, read from the text alone (its cue
 * words and its numbers): what a judge that works the problem out itself would get, with the
 * value each step reaches (the last is the answer). Null for any other text.
 */
export function solveArithmetic(question: string): { expression: string; answer: number; values: number[] } | null {
  const template = TEMPLATES.find((t) => t.cue.test(question));
  const numbers = numbersIn(question);
  if (template === undefined || numbers.length !== template.ranges.length) return null;
  const expression = expressionOf(numbers, template.ops);
  return { expression, answer: evaluate(expression), values: stepwise(numbers, template.ops).map((x) => x.value) };
}

/** The whole numbers a text mentions, in order (what a judge can check a tool call against). */
export function numbersIn(text: string): number[] {
  return [...text.matchAll(/\d+(?:\.\d+)?/g)].map((m) => Number(m[0]));
}
