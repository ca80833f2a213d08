// The SWE environment's tasks: small Python repositories generated from a seed, each with one bug,
// an issue that reports it as a user would (what was called, what came back, what was expected),
// and tests beside the code that show it. The verdict comes from hidden calls (other arguments
// than the issue's, and the module's other functions, which must keep working) whose expected
// results never enter the sandbox: swe.ts runs the calls there and compares outside.

import { createRng, type Rng } from '../engine/local/sampling/random.js';
import type { ShellTask } from './shell.js';

/** A JSON value a hidden call returns (Python's int, float, str, list, dict, bool, None). */
export type CallValue = number | string | boolean | null | CallValue[] | { [key: string]: CallValue };

export interface HiddenCall {
  /** The module's import name, e.g. `shop.geometry`. */
  module: string;
  function: string;
  args: CallValue[];
  /** The right result; numbers compare within 1e-9. */
  expected: CallValue;
}

/** `instruction` is the issue; `files` the repository. */
export interface SweTask extends ShellTask {
  /** Calls whose results decide the outcome; never visible during the episode. */
  hidden: HiddenCall[];
}

type Draft = Omit<SweTask, 'id' | 'family'>;

const int = (r: Rng, lo: number, hi: number) => lo + Math.floor(r.next() * (hi - lo + 1));
const WORDS = ['apple', 'river', 'stone', 'cloud', 'maple', 'ember', 'tiger', 'lemon'];

/** The repository's layout: a package with the module, and unittest tests beside it. */
function repository(module: string, code: string, tests: string): Record<string, string> {
  return {
    'shop/__init__.py': '',
    'tests/__init__.py': '',
    [`shop/${module}.py`]: code,
    [`tests/test_${module}.py`]: `import unittest\n\nfrom shop import ${module}\n\n\n${tests}`,
    'README.md': `# shop\n\nRun the tests with \`python3 -m unittest discover -s tests -t .\`\n`,
  };
}

const ISSUE_TAIL = ' The code is in shop/, the tests in tests/. Fix the bug, then reply without a tool call.';

export const SWE_FAMILIES: Record<string, (r: Rng) => Draft> = {
  'wrong-operator': (r) => {
    const [w, h] = [int(r, 3, 19), int(r, 3, 19)];
    const code = [
      'def rectangle_area(width, height):',
      '    return width + height',
      '',
      '',
      'def rectangle_perimeter(width, height):',
      '    return 2 * (width + height)',
      '',
    ].join('\n');
    const tests = [
      'class GeometryTest(unittest.TestCase):',
      '    def test_perimeter(self):',
      '        self.assertEqual(geometry.rectangle_perimeter(2, 5), 14)',
      '',
      '    def test_area(self):',
      `        self.assertEqual(geometry.rectangle_area(${w}, ${h}), ${w * h})`,
      '',
    ].join('\n');
    const cases = Array.from({ length: 4 }, () => [int(r, 2, 40), int(r, 2, 40)] as const);
    return {
      instruction: `rectangle_area(${w}, ${h}) returns ${w + h}, but a ${w} by ${h} rectangle has an area of ${w * h}.${ISSUE_TAIL}`,
      files: repository('geometry', code, tests),
      hidden: [
        ...cases.map(([a, b]) => call('geometry', 'rectangle_area', [a, b], a * b)),
        call('geometry', 'rectangle_perimeter', [cases[0]![0], cases[0]![1]], 2 * (cases[0]![0] + cases[0]![1])),
      ],
    };
  },
  'off-by-one': (r) => {
    const a = int(r, 1, 9);
    const b = a + int(r, 3, 9);
    const sum = (x: number, y: number) => ((y - x + 1) * (x + y)) / 2;
    const code = [
      'def inclusive_sum(first, last):',
      '    """The sum of the whole numbers from first to last, both included."""',
      '    return sum(range(first, last))',
      '',
      '',
      'def count_between(values, low, high):',
      '    return len([v for v in values if low <= v <= high])',
      '',
    ].join('\n');
    const tests = [
      'class RangesTest(unittest.TestCase):',
      '    def test_count_between(self):',
      '        self.assertEqual(ranges.count_between([1, 5, 9], 2, 9), 2)',
      '',
      '    def test_inclusive_sum(self):',
      `        self.assertEqual(ranges.inclusive_sum(${a}, ${b}), ${sum(a, b)})`,
      '',
    ].join('\n');
    const cases = Array.from({ length: 4 }, () => {
      const x = int(r, 0, 20);
      return [x, x + int(r, 0, 30)] as const;
    });
    return {
      instruction:
        `inclusive_sum(${a}, ${b}) returns ${sum(a, b) - b}: it leaves out ${b}. The sum from ${a} to ${b}, ` +
        `both included, is ${sum(a, b)}.${ISSUE_TAIL}`,
      files: repository('ranges', code, tests),
      hidden: [
        ...cases.map(([x, y]) => call('ranges', 'inclusive_sum', [x, y], sum(x, y))),
        call('ranges', 'count_between', [[3, 8, 13, 21], 8, 21], 3),
      ],
    };
  },
  boundary: (r) => {
    const threshold = int(r, 40, 70);
    const code = [
      'def passed(score, threshold):',
      '    return score > threshold',
      '',
      '',
      'def best(scores):',
      '    return max(scores)',
      '',
    ].join('\n');
    const tests = [
      'class GradesTest(unittest.TestCase):',
      '    def test_best(self):',
      '        self.assertEqual(grades.best([3, 9, 4]), 9)',
      '',
      '    def test_exactly_the_threshold_passes(self):',
      `        self.assertTrue(grades.passed(${threshold}, ${threshold}))`,
      '',
    ].join('\n');
    const t = int(r, 30, 80);
    return {
      instruction: `passed(${threshold}, ${threshold}) returns False, but a score equal to the threshold passes.${ISSUE_TAIL}`,
      files: repository('grades', code, tests),
      hidden: [
        call('grades', 'passed', [t, t], true),
        call('grades', 'passed', [t + 1, t], true),
        call('grades', 'passed', [t - 1, t], false),
        call('grades', 'best', [[t, t + 4, t - 2]], t + 4),
      ],
    };
  },
  'case-insensitive': (r) => {
    const word = WORDS[int(r, 0, WORDS.length - 1)]!;
    const title = word[0]!.toUpperCase() + word.slice(1);
    const code = [
      'def count_word(text, word):',
      '    return text.split().count(word)',
      '',
      '',
      'def first_word(text):',
      '    return text.split()[0]',
      '',
    ].join('\n');
    const text = `${title} pie and ${word} jam`;
    const tests = [
      'class WordsTest(unittest.TestCase):',
      '    def test_first_word(self):',
      '        self.assertEqual(words.first_word("hello there"), "hello")',
      '',
      '    def test_count_ignores_case(self):',
      `        self.assertEqual(words.count_word("${text}", "${word}"), 2)`,
      '',
    ].join('\n');
    const other = WORDS[(WORDS.indexOf(word) + 1) % WORDS.length]!;
    return {
      instruction: `count_word("${text}", "${word}") returns 1, expected 2: counting must ignore case.${ISSUE_TAIL}`,
      files: repository('words', code, tests),
      hidden: [
        call('words', 'count_word', [`${other.toUpperCase()} ${other} ${title}`, other], 2),
        call('words', 'count_word', [`${word} ${word} ${word.toUpperCase()}`, title], 3),
        call('words', 'count_word', [`${title} pie`, other], 0),
        call('words', 'first_word', [`${other} and ${word}`], other),
      ],
    };
  },
  'missing-key': (r) => {
    const n = int(r, 2, 9);
    const code = [
      'def restock(stock, name, count):',
      '    """A new stock with count more of name; an item not in stock yet starts at 0."""',
      '    updated = dict(stock)',
      '    updated[name] = stock[name] + count',
      '    return updated',
      '',
      '',
      'def total(stock):',
      '    return sum(stock.values())',
      '',
    ].join('\n');
    const tests = [
      'class InventoryTest(unittest.TestCase):',
      '    def test_total(self):',
      '        self.assertEqual(inventory.total({"pen": 2, "ink": 3}), 5)',
      '',
      '    def test_restock_a_new_item(self):',
      `        self.assertEqual(inventory.restock({}, "pen", ${n}), {"pen": ${n}})`,
      '',
    ].join('\n');
    const [a, b] = [int(r, 1, 20), int(r, 1, 20)];
    return {
      instruction: `restock({}, "pen", ${n}) raises KeyError; an item not in stock yet should start at 0.${ISSUE_TAIL}`,
      files: repository('inventory', code, tests),
      hidden: [
        call('inventory', 'restock', [{ ink: a }, 'cap', b], { ink: a, cap: b }),
        call('inventory', 'restock', [{ ink: a }, 'ink', b], { ink: a + b }),
        call('inventory', 'total', [{ ink: a, cap: b }], a + b),
      ],
    };
  },
  'sort-order': (r) => {
    const scores = Array.from({ length: 5 }, () => int(r, 1, 99));
    const top2 = [...scores].sort((x, y) => y - x).slice(0, 2);
    const code = [
      'def top(scores, k):',
      '    """The k highest scores, highest first."""',
      '    return sorted(scores)[:k]',
      '',
      '',
      'def average(scores):',
      '    return sum(scores) / len(scores)',
      '',
    ].join('\n');
    const tests = [
      'class RankingTest(unittest.TestCase):',
      '    def test_average(self):',
      '        self.assertEqual(ranking.average([2, 4]), 3)',
      '',
      '    def test_top(self):',
      `        self.assertEqual(ranking.top(${JSON.stringify(scores)}, 2), ${JSON.stringify(top2)})`,
      '',
    ].join('\n');
    const hidden = Array.from({ length: 6 }, () => int(r, 1, 99));
    const desc = [...hidden].sort((x, y) => y - x);
    return {
      instruction:
        `top(${JSON.stringify(scores)}, 2) returns ${JSON.stringify([...scores].sort((x, y) => x - y).slice(0, 2))}, ` +
        `expected the two highest, highest first: ${JSON.stringify(top2)}.${ISSUE_TAIL}`,
      files: repository('ranking', code, tests),
      hidden: [
        call('ranking', 'top', [hidden, 3], desc.slice(0, 3)),
        call('ranking', 'top', [hidden, 1], desc.slice(0, 1)),
        call('ranking', 'average', [[hidden[0]!, hidden[1]!]], (hidden[0]! + hidden[1]!) / 2),
      ],
    };
  },
};

function call(module: string, fn: string, args: CallValue[], expected: CallValue): HiddenCall {
  return { module: `shop.${module}`, function: fn, args, expected };
}

/** `count` tasks cycling through the families, each drawn from (seed, position): stable ids. */
export function sweTasks(count: number, seed: number): SweTask[] {
  const families = Object.keys(SWE_FAMILIES);
  return Array.from({ length: count }, (_, i) => {
    const family = families[i % families.length]!;
    const rng = createRng(seed * 100_019 + i);
    return { id: `swe-${family}-s${seed}-${i}`, family, ...SWE_FAMILIES[family]!(rng) };
  });
}
