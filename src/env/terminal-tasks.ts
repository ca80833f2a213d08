// The terminal environment's tasks: six families of shell work (counting, sorting, sums over a
// CSV, a small script, renaming files, editing a config), each drawn from a seed with its files,
// its instruction and a checker script. The checker runs inside the episode's sandbox after the
// episode, from a read-only /check folder the agent never sees; exit code 0 means solved.

import { createRng, type Rng } from '../engine/local/sampling/random.js';
import type { ShellTask } from './shell.js';

export interface TerminalTask extends ShellTask {
  /** Bash, run with the home folder as working directory. */
  checker: string;
  /** Files the checker reads from /check (expected outputs); never visible during the episode. */
  expected: Record<string, string>;
}

type Draft = Omit<TerminalTask, 'id' | 'family'>;

const WORDS = ['alpha', 'bravo', 'cedar', 'delta', 'ember', 'falcon', 'garnet', 'harbor', 'indigo', 'juniper'];
const NAMES = ['ana', 'ben', 'chloe', 'dmitri', 'eva', 'farid', 'grace', 'hugo', 'ines', 'jonas', 'kemal', 'lena'];

const int = (r: Rng, lo: number, hi: number) => lo + Math.floor(r.next() * (hi - lo + 1));
const pick = <T>(r: Rng, items: readonly T[]): T => items[Math.floor(r.next() * items.length)]!;
/** The file's text must equal `expected` up to trailing newlines. */
const sameText = (file: string, expected: string) =>
  `test -f ${file} && [ "$(cat ${file})" = "$(cat /check/${expected})" ]`;
const sameNumber = (file: string, n: number) => `test -f ${file} && [ "$(tr -d '[:space:]' < ${file})" = "${n}" ]`;

export const FAMILIES: Record<string, (r: Rng) => Draft> = {
  'count-matches': (r) => {
    const lines = Array.from({ length: int(r, 12, 40) }, (_, i) => {
      const level = pick(r, ['INFO', 'INFO', 'WARN', 'ERROR']);
      return `2026-01-${String((i % 28) + 1).padStart(2, '0')} ${level} ${pick(r, WORDS)} ${int(r, 1, 999)}`;
    });
    const count = lines.filter((l) => l.includes('ERROR')).length;
    return {
      instruction: 'Count the lines of log.txt that contain ERROR and write that number to count.txt.',
      files: { 'log.txt': `${lines.join('\n')}\n` },
      checker: sameNumber('count.txt', count),
      expected: {},
    };
  },
  'unique-sorted': (r) => {
    const names = Array.from({ length: int(r, 10, 30) }, () => pick(r, NAMES));
    const unique = [...new Set(names)].sort();
    return {
      instruction:
        'Write the distinct names of names.txt to unique.txt, sorted alphabetically, one per line, each once.',
      files: { 'names.txt': `${names.join('\n')}\n` },
      checker: sameText('unique.txt', 'unique.txt'),
      expected: { 'unique.txt': `${unique.join('\n')}\n` },
    };
  },
  'column-sum': (r) => {
    const rows = Array.from({ length: int(r, 5, 20) }, () => [pick(r, WORDS), int(r, 1, 500), int(r, 1, 9)]);
    const total = rows.reduce((a, row) => a + (row[1] as number), 0);
    return {
      instruction: 'sales.csv has a header line. Write the sum of its amount column to total.txt.',
      files: { 'sales.csv': `item,amount,qty\n${rows.map((row) => row.join(',')).join('\n')}\n` },
      checker: sameNumber('total.txt', total),
      expected: {},
    };
  },
  'script-args': (r) => {
    const cases = Array.from({ length: 3 }, () => [int(r, -50, 500), int(r, 0, 500)] as const);
    return {
      instruction:
        'Write an executable bash script add.sh in the current folder that prints the sum of its two integer ' +
        'arguments (./add.sh 2 3 prints 5).',
      files: {},
      checker: ['test -x add.sh', ...cases.map(([a, b]) => `[ "$(./add.sh ${a} ${b})" = "${a + b}" ]`)].join(' && '),
      expected: {},
    };
  },
  'rename-ext': (r) => {
    const names = [...new Set(Array.from({ length: int(r, 3, 6) }, () => pick(r, WORDS)))];
    const files = Object.fromEntries(names.map((n) => [`notes/${n}.txt`, `${n} note ${int(r, 1, 99)}\n`]));
    return {
      instruction:
        'Rename every .txt file in the notes folder so that it ends in .md instead; keep names and contents.',
      files,
      checker: [
        '[ -z "$(ls notes | grep "\\.txt$")" ]',
        ...names.map((n) => `cmp -s notes/${n}.md /check/${n}`),
        `[ "$(ls notes | wc -l)" = "${names.length}" ]`,
      ].join(' && '),
      expected: Object.fromEntries(names.map((n) => [n, files[`notes/${n}.txt`]!])),
    };
  },
  'edit-config': (r) => {
    const from = int(r, 1000, 8999);
    const to = from + int(r, 1, 999);
    const lines = [`name=${pick(r, WORDS)}`, `port=${from}`, `workers=${int(r, 1, 16)}`, `backup_port=${from}`];
    const edited = lines.map((l) => (l === `port=${from}` ? `port=${to}` : l));
    return {
      instruction: `In settings.conf, set port to ${to} (only the line that starts with port=; change nothing else).`,
      files: { 'settings.conf': `${lines.join('\n')}\n` },
      checker: sameText('settings.conf', 'settings.conf'),
      expected: { 'settings.conf': `${edited.join('\n')}\n` },
    };
  },
};

/** `count` tasks cycling through the families, each drawn from (seed, position): stable ids. */
export function terminalTasks(count: number, seed: number): TerminalTask[] {
  const families = Object.keys(FAMILIES);
  return Array.from({ length: count }, (_, i) => {
    const family = families[i % families.length]!;
    const rng = createRng(seed * 100_003 + i);
    return { id: `${family}-s${seed}-${i}`, family, ...FAMILIES[family]!(rng) };
  });
}
