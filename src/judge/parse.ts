// Reading a judge's answer: the final score in \boxed{} and the hint between [HINT_START] and
// [HINT_END]. Pure and tolerant: what a person would read as a valid answer is accepted, anything
// else is null, and the raw text is always kept next to the result by the caller.

import type { HintVote, JudgeVote, Score } from './types.js';

export const HINT_START = '[HINT_START]';
export const HINT_END = '[HINT_END]';

// Whatever sits inside the braces (no nesting), with optional space between \boxed and "{".
const BOXED = /\\boxed\s*\{([^{}]*)\}/g;
// +1, 1, -1, 0, with surrounding spaces, a trailing ".0", and the Unicode minus or dashes some
// models write; "10", "1/2", "yes" are not scores.
const SCORE_VALUE = /^([+\-\u2212\u2013]?)\s*([01])(?:\.0*)?$/;

/**
 * The part of an answer after the judge's thinking. A `<think>` block is dropped, so a box
 * mentioned while reasoning cannot be the verdict (a defect of the reference, which takes the
 * last box anywhere). A lone `</think>` (the prompt opened the block) ends the thinking too; an
 * unclosed `<think>` means the answer never came.
 */
export function answerPart(text: string): string {
  const close = text.lastIndexOf('</think>');
  if (close >= 0) return text.slice(close + '</think>'.length);
  const open = text.indexOf('<think>');
  return open >= 0 ? text.slice(0, open) : text;
}

/** The score in the last `\boxed{}` of the answer; null when there is none or it is not +1, 1, -1 or 0. */
export function parseBoxed(text: string): Score | null {
  let last: string | null = null;
  for (const m of answerPart(text).matchAll(BOXED)) last = m[1]!;
  if (last === null) return null;
  // "$\boxed{\text{1}}$" does not match BOXED; "\boxed{ +1 }" and "\boxed{1.0}" do.
  const value = SCORE_VALUE.exec(last.trim());
  if (!value) return null;
  if (value[2] === '0') return 0;
  return value[1] === '' || value[1] === '+' ? 1 : -1;
}

/** The trimmed text of the last closed [HINT_START]...[HINT_END] block of the answer; null when absent or empty. */
export function parseHint(text: string): string | null {
  const answer = answerPart(text);
  const end = answer.lastIndexOf(HINT_END);
  if (end < 0) return null; // unclosed: the answer was cut off mid-hint, so the hint may be too
  const start = answer.lastIndexOf(HINT_START, end);
  if (start < 0) return null;
  const hint = answer.slice(start + HINT_START.length, end).trim();
  return hint === '' ? null : hint;
}

/** An evaluative vote from an answer that arrived. */
export function evalVoteFrom(raw: string, attempts: number, ms: number): JudgeVote {
  const score = parseBoxed(raw);
  return score === null
    ? { score, raw, failure: 'unparseable', detail: 'no final \\boxed{} with 1, -1 or 0 in the answer', attempts, ms }
    : { score, raw, failure: null, detail: null, attempts, ms };
}

/** A hint vote from an answer that arrived. The hint prompt allows only 1 and -1, so 0 is off-format. */
export function hintVoteFrom(raw: string, attempts: number, ms: number): HintVote {
  // The decision is read outside hint blocks: a hint about a math task may itself contain a \boxed{}.
  const score = parseBoxed(withoutHintBlocks(answerPart(raw)));
  if (score === null || score === 0) {
    return {
      score: null,
      hint: null,
      raw,
      failure: 'unparseable',
      detail: 'no final \\boxed{} with 1 or -1 in the answer',
      attempts,
      ms,
    };
  }
  return { score, hint: score === 1 ? parseHint(raw) : null, raw, failure: null, detail: null, attempts, ms };
}

// A block runs to its [HINT_END], or to the end of the text when the answer was cut off inside it.
const HINT_BLOCK = /\[HINT_START\][\s\S]*?(?:\[HINT_END\]|$)/g;

function withoutHintBlocks(text: string): string {
  return text.replace(HINT_BLOCK, ' ');
}
