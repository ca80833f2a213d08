// Fixes for the SWE environment's task families (src/env/swe-tasks.ts), written from the issue as
// a person would: a right one and a plausible wrong one per family, each one sed command.

import type { SweTask } from '../../src/env/swe-tasks.js';

/** A correct fix per family. */
export function sweFix(task: SweTask): string {
  switch (task.family) {
    case 'wrong-operator':
      return "sed -i 's/return width + height/return width * height/' shop/geometry.py";
    case 'off-by-one':
      return "sed -i 's/range(first, last)/range(first, last + 1)/' shop/ranges.py";
    case 'boundary':
      return "sed -i 's/score > threshold/score >= threshold/' shop/grades.py";
    case 'case-insensitive':
      return "sed -i 's/text.split().count(word)/text.lower().split().count(word.lower())/' shop/words.py";
    case 'missing-key':
      return "sed -i 's/stock\\[name\\] + count/stock.get(name, 0) + count/' shop/inventory.py";
    case 'sort-order':
      return "sed -i 's/sorted(scores)\\[:k\\]/sorted(scores, reverse=True)[:k]/' shop/ranking.py";
    default:
      throw new Error(`no fix for ${task.family}`);
  }
}

/** A plausible wrong fix per family: it may pass the issue's own example, not the hidden calls. */
export function sweNearMiss(task: SweTask): string {
  switch (task.family) {
    case 'wrong-operator':
      return "sed -i 's/return width + height/return width * width/' shop/geometry.py";
    case 'off-by-one':
      return "sed -i 's/range(first, last)/range(first + 1, last + 1)/' shop/ranges.py";
    case 'boundary':
      return "sed -i 's/score > threshold/score >= threshold - 1/' shop/grades.py";
    case 'case-insensitive':
      return "sed -i 's/text.split().count(word)/text.lower().split().count(word)/' shop/words.py";
    case 'missing-key':
      return "sed -i 's/stock\\[name\\] + count/count/' shop/inventory.py";
    case 'sort-order':
      return "sed -i 's/sorted(scores)\\[:k\\]/sorted(scores)[-k:]/' shop/ranking.py";
    default:
      throw new Error(`no near miss for ${task.family}`);
  }
}
