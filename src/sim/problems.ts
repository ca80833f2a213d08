// GSM8K problems for the personalization benchmark, split once and for all: the last EVAL_COUNT
// problems are the held-out set the score is measured on; every other problem may appear in the
// pre-training corpus and in the simulated users' conversations.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface Problem {
  /** Position in the GSM8K test file: stable, so sessions and reports can name a problem. */
  index: number;
  question: string;
  /** GSM8K's numeric answer as written there (e.g. "36"). */
  answer: string;
}

export const EVAL_COUNT = 32;

/** The copy in the repository (src/sim/data, see its README), found from dist/src/sim. */
export const DEFAULT_GSM8K_PATH = fileURLToPath(new URL('../../../src/sim/data/gsm8k-test.json', import.meta.url));

export interface ProblemSplit {
  train: Problem[];
  /** Held out: never in the corpus, never talked about during training. */
  eval: Problem[];
}

export function loadProblems(path = process.env.OPENCLAW_RL_GSM8K ?? DEFAULT_GSM8K_PATH): ProblemSplit {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new Error(
      `cannot read the GSM8K problems at ${path} (${(e as Error).message}); set OPENCLAW_RL_GSM8K to the file`,
    );
  }
  if (!Array.isArray(raw)) throw new Error(`${path}: expected a JSON array of {question, ground_truth_answer}`);
  const all = raw.map((item: { question?: unknown; ground_truth_answer?: unknown }, index): Problem => {
    if (typeof item?.question !== 'string' || typeof item.ground_truth_answer !== 'string') {
      throw new Error(`${path}: item ${index} lacks a string question or ground_truth_answer`);
    }
    return { index, question: item.question.trim(), answer: item.ground_truth_answer.trim() };
  });
  if (all.length <= EVAL_COUNT * 2)
    throw new Error(`${path}: ${all.length} problems are too few (need more than ${EVAL_COUNT * 2})`);
  return { train: all.slice(0, all.length - EVAL_COUNT), eval: all.slice(all.length - EVAL_COUNT) };
}
