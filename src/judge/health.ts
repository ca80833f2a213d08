// Whether the judge is answering: over its most recent votes, the share that produced no score.
// A judge that can never answer (a model that cannot follow the prompt, a dead endpoint) would
// otherwise show only as counters while no sample is ever trained.

import type { VoteFailure } from './types.js';

export type VoteOutcome = VoteFailure | 'ok';

export interface JudgeHealth {
  /** `unknown` until enough votes have arrived to say; `failing` when most recent votes failed. */
  state: 'ok' | 'failing' | 'unknown';
  /** Votes in the window (evaluative and hint votes alike). */
  votes: number;
  failed: number;
  /** Failed votes in the window by reason. */
  reasons: Partial<Record<VoteFailure, number>>;
  /** One line for a person when failing, e.g. "18 of 20 recent judge votes failed (unparseable 18)"; else null. */
  summary: string | null;
}

/** How many votes the window keeps, how many it needs before judging, and the failing share. */
export const HEALTH_WINDOW = 50;
export const HEALTH_MIN_VOTES = 10;
export const HEALTH_FAILING_SHARE = 0.5;

/** The judge's health from its recent vote outcomes, oldest first. */
export function judgeHealth(outcomes: readonly VoteOutcome[]): JudgeHealth {
  const recent = outcomes.slice(-HEALTH_WINDOW);
  const reasons: Partial<Record<VoteFailure, number>> = {};
  let failed = 0;
  for (const o of recent) {
    if (o === 'ok') continue;
    failed += 1;
    reasons[o] = (reasons[o] ?? 0) + 1;
  }
  const state =
    recent.length < HEALTH_MIN_VOTES ? 'unknown' : failed >= HEALTH_FAILING_SHARE * recent.length ? 'failing' : 'ok';
  const byReason = Object.entries(reasons)
    .sort((a, b) => b[1] - a[1])
    .map(([r, n]) => `${r} ${n}`)
    .join(', ');
  return {
    state,
    votes: recent.length,
    failed,
    reasons,
    summary: state === 'failing' ? `${failed} of ${recent.length} recent judge votes failed (${byReason})` : null,
  };
}

/** The last HEALTH_WINDOW vote outcomes. */
export class RecentVotes {
  private readonly outcomes: VoteOutcome[] = [];

  add(outcome: VoteOutcome): void {
    this.outcomes.push(outcome);
    if (this.outcomes.length > HEALTH_WINDOW) this.outcomes.shift();
  }

  health(): JudgeHealth {
    return judgeHealth(this.outcomes);
  }
}
