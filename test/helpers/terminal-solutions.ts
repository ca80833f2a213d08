// Shell solutions to the terminal environment's task families (src/env/terminal-tasks.ts), written
// as a person would without reading the checkers: a right one and a plausible wrong one per family.

import type { TerminalTask } from '../../src/env/terminal-tasks.js';

/** A correct solution per family, written as a person would, without reading the checker. */
export function terminalSolution(task: TerminalTask): string {
  switch (task.family) {
    case 'count-matches':
      return 'grep -c ERROR log.txt > count.txt';
    case 'unique-sorted':
      return 'sort -u names.txt > unique.txt';
    case 'column-sum':
      return "awk -F, 'NR > 1 { s += $2 } END { print s }' sales.csv > total.txt";
    case 'script-args':
      return "printf '#!/bin/bash\\necho $(($1 + $2))\\n' > add.sh && chmod +x add.sh";
    case 'rename-ext':
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion
      return 'cd notes && for f in *.txt; do mv "$f" "${f%.txt}.md"; done';
    case 'edit-config':
      return `sed -i 's/^port=.*/port=${/set port to (\d+)/.exec(task.instruction)![1]}/' settings.conf`;
    default:
      throw new Error(`no solution for ${task.family}`);
  }
}

/** A plausible wrong attempt per family. */
export function terminalNearMiss(task: TerminalTask): string {
  switch (task.family) {
    case 'count-matches':
      return 'wc -l < log.txt > count.txt';
    case 'unique-sorted':
      return 'sort names.txt > unique.txt';
    case 'column-sum':
      return "awk -F, '{ s += $2 } END { print s + 1 }' sales.csv > total.txt";
    case 'script-args':
      return "printf '#!/bin/bash\\necho $1$2\\n' > add.sh && chmod +x add.sh";
    case 'rename-ext':
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion
      return 'cd notes && for f in *.txt; do cp "$f" "${f%.txt}.md"; done';
    case 'edit-config':
      return "sed -i 's/=[0-9]*$/=1/' settings.conf";
    default:
      throw new Error(`no near miss for ${task.family}`);
  }
}
