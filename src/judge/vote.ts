// Turning votes into a judgment: the majority score, how much the votes agreed, and which hint
// (if any) to teach with. Pure functions over vote records; table-driven tests in test/judge-vote.

import type { HintRejection, HintVote, Score } from './types.js';

/**
 * Majority of the valid scores (reference section 13.1): nulls are dropped; no valid score, or a
 * tie for the top count, abstains with 0.
 */
export function majorityVote(scores: readonly (Score | null)[]): Score {
  return majority(scores).score;
}

/** The majority, and whether it is an abstention (no valid score, or a tie) rather than a vote for 0. */
export function majority(scores: readonly (Score | null)[]): { score: Score; abstained: boolean } {
  const counts = new Map<Score, number>();
  for (const s of scores) if (s !== null) counts.set(s, (counts.get(s) ?? 0) + 1);
  let top: Score = 0;
  let topCount = 0;
  let tied = false;
  for (const [score, count] of counts) {
    if (count > topCount) {
      top = score;
      topCount = count;
      tied = false;
    } else if (count === topCount) tied = true;
  }
  return topCount === 0 || tied ? { score: 0, abstained: true } : { score: top, abstained: false };
}

/** Fraction of valid scores equal to `majority`; null when there is no valid score. */
export function agreement(scores: readonly (Score | null)[], majority: Score): number | null {
  const valid = scores.filter((s) => s !== null);
  return valid.length === 0 ? null : valid.filter((s) => s === majority).length / valid.length;
}

export interface HintChoiceOptions {
  /** A hint must be longer than this many characters (trimmed). Reference: 10. */
  minChars: number;
  /** ...and at most this long. A 1-3 sentence hint fits easily; longer is off-format. */
  maxChars: number;
  /** copiesText threshold: the share of the hint's word trigrams found in the next state. */
  copyThreshold: number;
  /**
   * `majority`: a hint is taught only when more than half of the valid hint votes are positive.
   * `any`: one positive vote suffices (the reference, its defect 13): with 3 votes of which 20% err,
   * half of the turns with nothing to learn would get an invented hint, and the OPD term then pulls
   * the policy back toward the teacher's unhinted (base) behaviour.
   */
  quorum: 'majority' | 'any';
}

export const DEFAULT_HINT_CHOICE: HintChoiceOptions = {
  minChars: 10,
  maxChars: 600,
  copyThreshold: 0.8,
  quorum: 'majority',
};

export interface HintChoice {
  hint: string | null;
  /** Index of the chosen vote; null when none. */
  vote: number | null;
  rejections: HintRejection[];
}

/**
 * The hint to teach with: among positive votes, the longest acceptable hint (the first on ties),
 * provided the positive votes are the majority (see `quorum`). `nextStateText` is the next state
 * in full.
 */
export function chooseHint(
  votes: readonly HintVote[],
  nextStateText: string,
  opts: Partial<HintChoiceOptions> = {},
): HintChoice {
  const o = { ...DEFAULT_HINT_CHOICE, ...opts };
  const choice: HintChoice = { hint: null, vote: null, rejections: [] };
  votes.forEach((v, i) => {
    if (v.score !== 1) return;
    const hint = v.hint?.trim() ?? '';
    const reason =
      hint === ''
        ? 'missing'
        : hint.length <= o.minChars
          ? 'too_short'
          : hint.length > o.maxChars
            ? 'too_long'
            : copiesText(hint, nextStateText, o.copyThreshold)
              ? 'copies_next_state'
              : null;
    if (reason) choice.rejections.push({ vote: i, reason });
    else if (choice.hint === null || hint.length > choice.hint.length) {
      choice.hint = hint;
      choice.vote = i;
    }
  });
  const valid = votes.filter((v) => v.score !== null).length;
  const positive = votes.filter((v) => v.score === 1).length;
  if (choice.vote !== null && o.quorum === 'majority' && positive * 2 <= valid) {
    choice.rejections.push({ vote: choice.vote, reason: 'outvoted' });
    choice.hint = null;
    choice.vote = null;
  }
  return choice;
}

/** Lower-case words of letters and digits (any script), so punctuation and spacing do not matter. */
export function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * Share of the hint's word n-grams (trigrams; unigrams for hints under three words) that also
 * occur in `source`. 1 means every phrase of the hint is lifted from it; a hint that restates a
 * correction in its own words ("Answer in French from the start") shares a few words but few
 * trigrams.
 */
export function overlap(hint: string, source: string): number {
  const h = words(hint);
  if (h.length === 0) return 0;
  const n = h.length >= 3 ? 3 : 1;
  const have = new Set(ngrams(words(source), n));
  const mine = ngrams(h, n);
  return mine.filter((g) => have.has(g)).length / mine.length;
}

/** The hint merely copies `source`: most of its phrases are taken from it word for word. */
export function copiesText(hint: string, source: string, threshold = DEFAULT_HINT_CHOICE.copyThreshold): boolean {
  return overlap(hint, source) >= threshold;
}

function ngrams(ws: readonly string[], n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i + n <= ws.length; i++) out.push(ws.slice(i, i + n).join(' '));
  return out;
}
