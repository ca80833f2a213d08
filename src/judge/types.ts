// The judge's records: one per vote (evaluative or hint), and one per judged turn, which is what
// the learning loop consumes and the store keeps. Types only; every field documented.
// A failed vote is a value (with a reason), never an exception, so the other votes still count.

import type { ChatMessage } from '../chat/messages.js';

/** An evaluative score: +1 the turn made progress, -1 it needed a correction/redo or caused an error, 0 unclear. */
export type Score = 1 | -1 | 0;

/**
 * Why a vote produced no score. Each is counted as a metric (`judge/votes/<reason>`).
 * - `timeout`: no answer within the per-attempt time limit, on every attempt;
 * - `http`: the endpoint answered with an error status, or with something that is not a chat completion;
 * - `connection`: the endpoint could not be reached, or closed the connection before answering;
 * - `refused`: the judge model declined to answer (an OpenAI `refusal`, or `content_filter`);
 * - `unparseable`: an answer arrived, but without a valid final `\boxed{}` (or, for hints, with 0 in it);
 * - `error`: anything else (a local engine failure, a prompt longer than the judge's context).
 */
export type VoteFailure = 'timeout' | 'http' | 'connection' | 'refused' | 'unparseable' | 'error';

export const VOTE_FAILURES: readonly VoteFailure[] = [
  'timeout',
  'http',
  'connection',
  'refused',
  'unparseable',
  'error',
];

/** One evaluative vote. */
export interface JudgeVote {
  /** The last `\boxed{}` of the answer; null when the vote failed. */
  score: Score | null;
  /** The judge's whole answer as returned (thinking included); '' when none arrived. Kept for audits and re-parsing. */
  raw: string;
  failure: VoteFailure | null;
  /** What went wrong, for a person (status, error code, timings); never conversation text. Null on success. */
  detail: string | null;
  /** Requests made for this vote (1 + retries used). */
  attempts: number;
  /** Wall time of the vote, all attempts and back-off included. */
  ms: number;
}

/** One hint vote: `\boxed{1}` with a hint, or `\boxed{-1}` (nothing to learn). */
export interface HintVote {
  /** 1: the next state holds useful hindsight; -1: it does not; null when the vote failed. */
  score: 1 | -1 | null;
  /** The text between the last [HINT_START] and [HINT_END], trimmed; null when absent or empty. */
  hint: string | null;
  raw: string;
  failure: VoteFailure | null;
  detail: string | null;
  attempts: number;
  ms: number;
}

/**
 * Why a hint vote's hint was not chosen (only positive votes are considered):
 * - `missing`: `\boxed{1}` without a closed [HINT_START]...[HINT_END] block;
 * - `too_short`: not longer than minChars (the reference's "> 10 characters");
 * - `too_long`: longer than maxChars (a 1-3 sentence hint is short; a long one is off-format);
 * - `copies_next_state`: mostly the next state's own words, which teaches nothing the teacher prompt would not;
 * - `outvoted`: the hint that would have been chosen, when the positive hint votes were not a majority.
 */
export type HintRejectionReason = 'missing' | 'too_short' | 'too_long' | 'copies_next_state' | 'outvoted';

export const HINT_REJECTION_REASONS: readonly HintRejectionReason[] = [
  'missing',
  'too_short',
  'too_long',
  'copies_next_state',
  'outvoted',
];

export interface HintRejection {
  /** Index into JudgedTurn.hintVotes. */
  vote: number;
  reason: HintRejectionReason;
}

/** The judgment of one closed main turn. */
export interface JudgedTurn {
  /** The turn judged (Turn.id). */
  turnId: string;
  /** The turn whose request carried the next state (NextState.nextTurnId); null when skipped. */
  nextTurnId: string | null;
  /** Which judge voted (JudgeClient.name), e.g. `openai:gpt-4o-mini` or `self:base`. */
  judge: string;
  /** Set when no judge was asked: the turn has no next state to learn from. Votes are then empty. */
  skipped: 'no_next_state' | null;
  evalVotes: JudgeVote[];
  hintVotes: HintVote[];
  /** Majority of the valid eval votes; ties and no valid vote give 0 (abstain). */
  score: Score;
  /** Fraction of valid eval votes equal to `score`; null when no vote was valid. 1 = unanimous. */
  agreement: number | null;
  /** The accepted hint (the longest acceptable one, first on ties); null when none. */
  hint: string | null;
  /** Index into hintVotes of the accepted hint; null when none. */
  hintVote: number | null;
  /** Positive hint votes whose hint was not accepted, and why. */
  hintRejections: HintRejection[];
  /** Epoch milliseconds when judging started and ended. */
  startedAt: number;
  finishedAt: number;
}

/** Sampling settings for one judge request. */
export interface CompleteOptions {
  temperature: number;
  maxTokens: number;
  /** For reproducible votes where the judge supports it. */
  seed?: number;
  /** Aborting it must end the request promptly (the caller also stops waiting for it). */
  signal?: AbortSignal;
}

/**
 * Any chat model that can act as a judge. Implementations throw JudgeClientError so the vote can
 * say why it failed; anything else thrown counts as failure `error`.
 */
export interface JudgeClient {
  /** Recorded on every JudgedTurn; must not contain secrets. */
  readonly name: string;
  /** The judge's answer text (thinking included if the model writes it inline). */
  complete(messages: ChatMessage[], opts: CompleteOptions): Promise<string>;
}
