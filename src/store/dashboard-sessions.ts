// What the dashboard reads about sessions: the most recently active ones, and one session's turns
// with their verdicts, votes, hints and samples (the steps are in dashboard-steps.ts).
// Conversation text (messages, responses, hints, vote answers) is included only when asked for:
// the caller decides (the operator's --dashboard-content), and without it no text leaves here.

import type { ChatMessage } from '../chat/messages.js';
import { decodeFloats } from './records.js';
import { stmt, type SqliteDatabase } from './sqlite.js';

export interface SessionSummary {
  id: string;
  source: string;
  createdAt: number;
  lastSeenAt: number;
  learning: boolean;
  turns: number;
  mainTurns: number;
  judged: number;
  /** Mean judge score of its judged turns (null: none judged). */
  scoreMean: number | null;
  samples: number;
}

/** A session's figures, over `from` (the sessions table, or a slice of it). */
const sessionSummary = (from: string) => `SELECT s.id, s.source, s.created_at, s.last_seen_at, s.learning,
    (SELECT count(*) FROM turns t WHERE t.session_id = s.id) AS turns,
    (SELECT count(*) FROM turns t WHERE t.session_id = s.id AND t.kind = 'main') AS main_turns,
    (SELECT count(*) FROM judgments j JOIN turns t ON t.id = j.turn_id
      WHERE t.session_id = s.id AND j.skipped IS NULL) AS judged,
    (SELECT avg(j.score) FROM judgments j JOIN turns t ON t.id = j.turn_id
      WHERE t.session_id = s.id AND j.skipped IS NULL) AS score_mean,
    (SELECT count(*) FROM samples x JOIN turns t ON t.id = x.turn_id WHERE t.session_id = s.id) AS samples
  FROM ${from} s`;

interface SessionSummaryRow {
  id: string;
  source: string;
  created_at: number;
  last_seen_at: number;
  learning: 0 | 1;
  turns: number;
  main_turns: number;
  judged: number;
  score_mean: number | null;
  samples: number;
}

/** Where a page of sessions ends: the next page starts after it (most recent first, ties by id). */
export interface SessionCursor {
  lastSeenAt: number;
  id: string;
}

/**
 * The `limit` most recently active sessions after `after` (none: from the most recent), most recent
 * first, and the cursor of the next page (null on the last one). Keyset paging: a session that
 * becomes active meanwhile moves to the first page instead of shifting every later one.
 */
export function recentSessions(
  db: SqliteDatabase,
  limit: number,
  after: SessionCursor | null = null,
): { sessions: SessionSummary[]; next: SessionCursor | null } {
  // The slice first: the figures' subqueries then run for `limit` sessions, not for all of them.
  const where = after ? 'WHERE last_seen_at < ? OR (last_seen_at = ? AND id > ?)' : '';
  const slice = `(SELECT * FROM sessions ${where} ORDER BY last_seen_at DESC, id LIMIT ?)`;
  const params = after ? [after.lastSeenAt, after.lastSeenAt, after.id, limit + 1] : [limit + 1];
  const rows = stmt(db, `${sessionSummary(slice)} ORDER BY s.last_seen_at DESC, s.id`).all(
    ...params,
  ) as SessionSummaryRow[];
  const sessions = rows.slice(0, limit).map(toSummary);
  const last = sessions[sessions.length - 1];
  return { sessions, next: rows.length > limit && last ? { lastSeenAt: last.lastSeenAt, id: last.id } : null };
}

function toSummary(r: SessionSummaryRow): SessionSummary {
  return {
    id: r.id,
    source: r.source,
    createdAt: r.created_at,
    lastSeenAt: r.last_seen_at,
    learning: r.learning === 1,
    turns: r.turns,
    mainTurns: r.main_turns,
    judged: r.judged,
    scoreMean: r.score_mean,
    samples: r.samples,
  };
}

/** One vote of the judge; `hint` and `raw` only with text. */
export interface TurnVote {
  kind: 'eval' | 'hint';
  idx: number;
  score: number | null;
  failure: string | null;
  hint?: string | null;
  raw?: string;
}

export interface TurnView {
  id: string;
  kind: 'main' | 'side';
  model: string;
  policyVersion: number;
  receivedAt: number;
  completedAt: number;
  promptTokens: number;
  completionTokens: number;
  finishReason: string;
  closureReason: string | null;
  queueStatus: string | null;
  verdict: {
    score: number;
    agreement: number | null;
    skipped: string | null;
    noSample: string | null;
    hintAccepted: boolean;
    hintRejections: number;
    votes: TurnVote[];
    /** The accepted hint; only with text. */
    hint?: string | null;
  } | null;
  sample: {
    status: string;
    source: string;
    inBatch: boolean;
    rlAdvantage: number;
    opdWeight: number;
    /** Mean over the completion of teacher minus rollout log-prob: the OPD advantage at sampling time. */
    opdAdvantageMean: number | null;
    trainedStep: number | null;
  } | null;
  /**
   * Only with text: what the turn answered (the messages since the model's previous answer, no system
   * prompt), its answer, its next state.
   */
  text?: { input: ChatMessage[]; response: ChatMessage; nextState: ChatMessage[] | null };
}

export interface SessionView {
  session: SessionSummary;
  /** Whether conversation text is included (the server's setting, not the request's). */
  text: boolean;
  turns: TurnView[];
}

/** One session's turns, oldest first (one read transaction); null when there is no such session. */
export function sessionView(db: SqliteDatabase, sessionId: string, withText: boolean): SessionView | null {
  return db.transaction(() => {
    const session = stmt(db, `${sessionSummary('sessions')} WHERE s.id = ?`).get(sessionId) as
      | SessionSummaryRow
      | undefined;
    if (!session) return null;
    // Token data is never read (a long agent session holds megabytes of it), text columns only with text.
    const text = withText ? 'p.messages, p.response, n.messages AS next_messages' : 'NULL AS messages';
    const turns = stmt(
      db,
      `SELECT t.id, t.kind, t.model, t.policy_version, t.received_at, t.completed_at, t.prompt_tokens,
      t.completion_tokens, t.finish_reason, t.closure_reason, c.status AS queue_status, ${text}
      FROM turns t JOIN turn_payloads p ON p.turn_id = t.id LEFT JOIN closed_turns c ON c.turn_id = t.id
      LEFT JOIN next_states n ON n.turn_id = t.id WHERE t.session_id = ? ORDER BY t.rowid`,
    ).all(sessionId) as TurnRow[];
    const ofSession = <R>(sql: string) => stmt(db, sql).all(sessionId) as R[];
    const judgments = byTurn(
      ofSession<JudgmentRow>(`SELECT j.turn_id, j.score, j.agreement, j.skipped, j.no_sample, j.hint,
      json_array_length(j.hint_rejections) AS rejections FROM judgments j JOIN turns t ON t.id = j.turn_id
      WHERE t.session_id = ?`),
    );
    const votes = new Map<string, VoteRow[]>();
    for (const v of ofSession<VoteRow>(`SELECT v.turn_id, v.kind, v.idx, v.score, v.failure, v.hint, v.raw
      FROM judge_votes v JOIN turns t ON t.id = v.turn_id WHERE t.session_id = ? ORDER BY v.turn_id, v.kind, v.idx`))
      votes.set(v.turn_id, [...(votes.get(v.turn_id) ?? []), v]);
    const samples = byTurn(
      ofSession<SampleRow>(`SELECT x.turn_id, x.status, x.source, x.rl_advantage, x.opd_weight, x.teacher_logprobs,
      x.trained_step, EXISTS (SELECT 1 FROM batch_holds h WHERE h.sample_id = x.id) AS in_batch, p.logprobs
      FROM samples x JOIN turns t ON t.id = x.turn_id JOIN turn_payloads p ON p.turn_id = x.turn_id
      WHERE t.session_id = ?`),
    );
    return {
      session: toSummary(session),
      text: withText,
      turns: turns.map((t) => turnView(t, judgments.get(t.id), votes.get(t.id) ?? [], samples.get(t.id), withText)),
    };
  })();
}

interface TurnRow {
  id: string;
  kind: 'main' | 'side';
  model: string;
  policy_version: number;
  received_at: number;
  completed_at: number;
  prompt_tokens: number;
  completion_tokens: number;
  finish_reason: string;
  closure_reason: string | null;
  queue_status: string | null;
  messages: string | null;
  response?: string;
  next_messages?: string | null;
}

interface JudgmentRow {
  turn_id: string;
  score: number;
  agreement: number | null;
  skipped: string | null;
  no_sample: string | null;
  hint: string | null;
  rejections: number;
}

interface VoteRow {
  turn_id: string;
  kind: 'eval' | 'hint';
  idx: number;
  score: number | null;
  failure: string | null;
  hint: string | null;
  raw: string;
}

interface SampleRow {
  turn_id: string;
  status: string;
  source: string;
  rl_advantage: number;
  opd_weight: number;
  teacher_logprobs: Uint8Array | null;
  trained_step: number | null;
  in_batch: 0 | 1;
  logprobs: Uint8Array;
}

function byTurn<R extends { turn_id: string }>(rows: R[]): Map<string, R> {
  return new Map(rows.map((r) => [r.turn_id, r]));
}

function turnView(
  t: TurnRow,
  j: JudgmentRow | undefined,
  votes: VoteRow[],
  s: SampleRow | undefined,
  withText: boolean,
): TurnView {
  const view: TurnView = {
    id: t.id,
    kind: t.kind,
    model: t.model,
    policyVersion: t.policy_version,
    receivedAt: t.received_at,
    completedAt: t.completed_at,
    promptTokens: t.prompt_tokens,
    completionTokens: t.completion_tokens,
    finishReason: t.finish_reason,
    closureReason: t.closure_reason,
    queueStatus: t.queue_status,
    verdict: j
      ? {
          score: j.score,
          agreement: j.agreement,
          skipped: j.skipped,
          noSample: j.no_sample,
          hintAccepted: j.hint !== null,
          hintRejections: j.rejections,
          votes: votes.map((v) => ({
            kind: v.kind,
            idx: v.idx,
            score: v.score,
            failure: v.failure,
            ...(withText ? { hint: v.hint, raw: v.raw } : {}),
          })),
          ...(withText ? { hint: j.hint } : {}),
        }
      : null,
    sample: s
      ? {
          status: s.status,
          source: s.source,
          inBatch: s.in_batch === 1,
          rlAdvantage: s.rl_advantage,
          opdWeight: s.opd_weight,
          opdAdvantageMean: s.teacher_logprobs
            ? meanGap(decodeFloats(s.teacher_logprobs), decodeFloats(s.logprobs))
            : null,
          trainedStep: s.trained_step,
        }
      : null,
  };
  if (withText && t.messages !== null && t.response !== undefined)
    view.text = {
      input: inputOf(JSON.parse(t.messages) as ChatMessage[]),
      response: JSON.parse(t.response) as ChatMessage,
      nextState: t.next_messages ? (JSON.parse(t.next_messages) as ChatMessage[]) : null,
    };
  return view;
}

/**
 * The messages after the model's last answer in the prompt, the system prompt left out (an agent's
 * runs to thousands of tokens and repeats in every session): what this turn responds to.
 */
function inputOf(messages: readonly ChatMessage[]): ChatMessage[] {
  let i = messages.length;
  while (i > 0 && messages[i - 1]!.role !== 'assistant') i--;
  return messages.slice(i).filter((m) => m.role !== 'system' && m.role !== 'developer');
}

function meanGap(teacher: readonly number[], rollout: readonly number[]): number | null {
  const n = Math.min(teacher.length, rollout.length);
  if (n === 0) return null;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += teacher[i]! - rollout[i]!;
  return sum / n;
}
