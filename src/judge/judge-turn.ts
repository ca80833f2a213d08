// Judging one closed turn: m evaluative and m hint votes at once, each bounded in time and retried
// on transient failures, then the majority, the agreement and the hint choice. A vote that fails
// is a value with its reason; the only rejection is the caller's own abort (shutdown), so an
// interrupted turn is judged again later instead of being recorded as an abstention.

import type { ChatMessage } from '../chat/messages.js';
import type { ClosedTurn } from '../types.js';
import { JudgeClientError } from './errors.js';
import { evalVoteFrom, hintVoteFrom } from './parse.js';
import {
  buildEvalPrompt,
  buildHintPrompt,
  DEFAULT_PROMPT_LIMITS,
  nextStateText,
  type PromptLimits,
} from './prompts.js';
import type { HintVote, JudgeClient, JudgedTurn, JudgeVote, VoteFailure } from './types.js';
import { agreement, chooseHint, DEFAULT_HINT_CHOICE, majorityVote, type HintChoiceOptions } from './vote.js';

export interface JudgeTurnOptions {
  /** Evaluative votes per turn (m). */
  votes: number;
  /** Hint votes per turn; 0 skips the hint prompt (Binary RL alone needs none). */
  hintVotes: number;
  /** Identical prompts per vote: sampling is the only source of diversity. */
  temperature: number;
  maxTokens: number;
  /** Per attempt. */
  timeoutMs: number;
  /** Extra attempts after a transient failure (timeout, lost connection, 5xx, 408, 429). */
  retries: number;
  /** Wait before retry k (1-based): backoffMs * 2^(k-1), at most maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  /** Vote i of each kind gets seed + i; unset: the judge draws its own. */
  seed?: number;
  limits: PromptLimits;
  hintChoice: HintChoiceOptions;
  /** Aborting stops every request of the turn, and judgeTurn rejects with the abort reason. */
  signal?: AbortSignal;
}

export const DEFAULT_JUDGE_OPTIONS: JudgeTurnOptions = {
  votes: 3,
  hintVotes: 3,
  temperature: 0.6,
  maxTokens: 1024,
  timeoutMs: 60_000,
  retries: 2,
  backoffMs: 500,
  maxBackoffMs: 8_000,
  limits: DEFAULT_PROMPT_LIMITS,
  hintChoice: DEFAULT_HINT_CHOICE,
};

/** Defaults filled in and checked, so a bad setting fails at startup rather than on every turn. */
export function resolveJudgeOptions(options: Partial<JudgeTurnOptions> = {}): JudgeTurnOptions {
  const o: JudgeTurnOptions = {
    ...DEFAULT_JUDGE_OPTIONS,
    ...options,
    hintVotes: options.hintVotes ?? options.votes ?? DEFAULT_JUDGE_OPTIONS.hintVotes,
    limits: { ...DEFAULT_PROMPT_LIMITS, ...options.limits },
    hintChoice: { ...DEFAULT_HINT_CHOICE, ...options.hintChoice },
  };
  const check = (ok: boolean, what: string) => {
    if (!ok) throw new RangeError(`judge: ${what}`);
  };
  const count = (v: number, min: number) => Number.isInteger(v) && v >= min;
  check(count(o.votes, 1), `votes must be an integer >= 1, got ${o.votes}`);
  check(count(o.hintVotes, 0), `hintVotes must be an integer >= 0, got ${o.hintVotes}`);
  check(Number.isFinite(o.temperature) && o.temperature >= 0, `temperature must be >= 0, got ${o.temperature}`);
  check(count(o.maxTokens, 1), `maxTokens must be an integer >= 1, got ${o.maxTokens}`);
  check(Number.isFinite(o.timeoutMs) && o.timeoutMs > 0, `timeoutMs must be > 0, got ${o.timeoutMs}`);
  check(count(o.retries, 0), `retries must be an integer >= 0, got ${o.retries}`);
  check(o.backoffMs >= 0 && o.maxBackoffMs >= 0, 'backoffMs and maxBackoffMs must be >= 0');
  check(
    o.hintChoice.minChars < o.hintChoice.maxChars,
    `hint minChars (${o.hintChoice.minChars}) must be below maxChars (${o.hintChoice.maxChars})`,
  );
  return o;
}

export async function judgeTurn(
  client: JudgeClient,
  closed: ClosedTurn,
  options: Partial<JudgeTurnOptions> = {},
): Promise<JudgedTurn> {
  const o = resolveJudgeOptions(options);
  const startedAt = Date.now();
  const next = closed.nextState;
  const base = { turnId: closed.turn.id, judge: client.name, startedAt };
  if (next === null || next.messages.length === 0) {
    return {
      ...base,
      nextTurnId: null,
      skipped: 'no_next_state',
      evalVotes: [],
      hintVotes: [],
      score: 0,
      agreement: null,
      hint: null,
      hintVote: null,
      hintRejections: [],
      finishedAt: Date.now(),
    };
  }
  o.signal?.throwIfAborted();
  const evalPrompt = buildEvalPrompt(closed.turn, next, o.limits);
  const hintPrompt = buildHintPrompt(closed.turn, next, o.limits);
  const seedOf = (i: number) => (o.seed === undefined ? undefined : o.seed + i);
  const [evalVotes, hintVotes] = await Promise.all([
    Promise.all(
      range(o.votes).map(async (i): Promise<JudgeVote> => {
        const a = await ask(client, evalPrompt, o, seedOf(i));
        return 'raw' in a ? evalVoteFrom(a.raw, a.attempts, a.ms) : { score: null, raw: '', ...a };
      }),
    ),
    Promise.all(
      range(o.hintVotes).map(async (i): Promise<HintVote> => {
        const a = await ask(client, hintPrompt, o, seedOf(i));
        return 'raw' in a ? hintVoteFrom(a.raw, a.attempts, a.ms) : { score: null, hint: null, raw: '', ...a };
      }),
    ),
  ]);
  const scores = evalVotes.map((v) => v.score);
  const score = majorityVote(scores);
  const choice = chooseHint(hintVotes, nextStateText(next), o.hintChoice);
  return {
    ...base,
    nextTurnId: next.nextTurnId,
    skipped: null,
    evalVotes,
    hintVotes,
    score,
    agreement: agreement(scores, score),
    hint: choice.hint,
    hintVote: choice.vote,
    hintRejections: choice.rejections,
    finishedAt: Date.now(),
  };
}

type Answer = { raw: string; attempts: number; ms: number };
type Failed = { failure: VoteFailure; detail: string; attempts: number; ms: number };
type Attempt = { raw: string } | { failure: VoteFailure; detail: string; transient: boolean };

/** One vote's request, retried with back-off while the failure is transient. */
async function ask(
  client: JudgeClient,
  messages: ChatMessage[],
  o: JudgeTurnOptions,
  seed: number | undefined,
): Promise<Answer | Failed> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    const result = await attemptOnce(client, messages, o, seed);
    if ('raw' in result) return { raw: result.raw, attempts: attempt, ms: Date.now() - started };
    if (!result.transient || attempt > o.retries)
      return { failure: result.failure, detail: result.detail, attempts: attempt, ms: Date.now() - started };
    await sleep(Math.min(o.maxBackoffMs, o.backoffMs * 2 ** (attempt - 1)), o.signal);
  }
}

/**
 * One request, bounded by timeoutMs even if the client ignores its signal: the wait races the
 * abort, and the abandoned request's outcome is swallowed.
 */
async function attemptOnce(
  client: JudgeClient,
  messages: ChatMessage[],
  o: JudgeTurnOptions,
  seed: number | undefined,
): Promise<Attempt> {
  o.signal?.throwIfAborted(); // the listener below only hears aborts that happen from now on
  const stop = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    stop.abort();
  }, o.timeoutMs);
  const onCallerAbort = () => stop.abort();
  o.signal?.addEventListener('abort', onCallerAbort, { once: true });
  const stopped = new Promise<never>((_, reject) =>
    stop.signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true }),
  );
  stopped.catch(() => {});
  try {
    const call = client.complete(messages, {
      temperature: o.temperature,
      maxTokens: o.maxTokens,
      signal: stop.signal,
      ...(seed !== undefined ? { seed } : {}),
    });
    call.catch(() => {});
    return { raw: await Promise.race([call, stopped]) };
  } catch (e) {
    if (o.signal?.aborted) throw o.signal.reason;
    if (timedOut) return { failure: 'timeout', detail: `no answer within ${o.timeoutMs} ms`, transient: true };
    if (e instanceof JudgeClientError) return { failure: e.failure, detail: e.message, transient: e.transient };
    return { failure: 'error', detail: e instanceof Error ? e.message : String(e), transient: false };
  } finally {
    clearTimeout(timer);
    o.signal?.removeEventListener('abort', onCallerAbort);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
