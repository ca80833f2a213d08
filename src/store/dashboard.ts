// What the dashboard reads: the training steps with the judge's figures between them, the most
// recently active sessions, and one session's turns with their verdicts, votes, hints and samples.
// Conversation text (messages, responses, hints, vote answers) is included only when asked for:
// the caller decides (the operator's --dashboard-content), and without it no text leaves here.

import type { ChatMessage } from '../chat/messages.js';
import { exportSession, type SessionExportTurn } from './session-data.js';
import { stmt, type SqliteDatabase } from './sqlite.js';

/** One optimizer step and what the judge did since the step before it. */
export interface StepPoint {
  step: number;
  batch: number;
  version: number;
  /** Epoch ms the step was committed. */
  at: number;
  samples: number;
  tokens: number;
  loss: number;
  rewardMean: number;
  clipFraction: number;
  approxKl: number;
  /** Samples of the step that carried a teacher (an accepted hint). */
  hints: number;
  staleDropped: number;
  seconds: number;
  tokensPerSecond: number;
  /** Queues the step's batch left behind (null on steps recorded before schema 6 kept them). */
  samplesQueued: number | null;
  turnsWaiting: number | null;
  /** Turns judged since the previous step (skipped ones excluded) and their mean agreement. */
  judged: number;
  agreementMean: number | null;
  /** Judged turns whose hint was accepted, and hint votes rejected, since the previous step. */
  hintsAccepted: number;
  hintsRejected: number;
}

interface StepRow {
  step: number;
  batch: number;
  version: number;
  created_at: number;
  prev_at: number;
  samples: number;
  tokens: number;
  loss: number;
  reward_mean: number;
  clip_fraction: number;
  approx_kl: number;
  hints: number;
  stale_dropped: number;
  seconds: number;
  tokens_per_second: number;
  samples_queued: number | null;
  turns_waiting: number | null;
}

/** Steps after `after`, oldest first, at most `limit`. */
export function stepHistory(db: SqliteDatabase, after: number, limit: number): StepPoint[] {
  const rows = stmt(
    db,
    `SELECT * FROM (SELECT *, lag(created_at, 1, 0) OVER (ORDER BY step) AS prev_at FROM train_steps)
    WHERE step > ? ORDER BY step LIMIT ?`,
  ).all(after, limit) as StepRow[];
  if (rows.length === 0) return [];
  // One pass over the judgments in the steps' time span, bucketed by the step that followed them.
  const judged = stmt(
    db,
    `SELECT finished_at AS at, agreement, hint IS NOT NULL AS accepted, json_array_length(hint_rejections) AS rejected
    FROM judgments WHERE skipped IS NULL AND finished_at > ? AND finished_at <= ? ORDER BY finished_at`,
  ).all(rows[0]!.prev_at, rows[rows.length - 1]!.created_at) as {
    at: number;
    agreement: number | null;
    accepted: 0 | 1;
    rejected: number;
  }[];
  let j = 0;
  return rows.map((r) => {
    let n = 0;
    let agreementSum = 0;
    let agreementN = 0;
    let accepted = 0;
    let rejected = 0;
    while (j < judged.length && judged[j]!.at <= r.prev_at) j++;
    while (j < judged.length && judged[j]!.at <= r.created_at) {
      const x = judged[j++]!;
      n++;
      if (x.agreement !== null) {
        agreementSum += x.agreement;
        agreementN++;
      }
      accepted += x.accepted;
      rejected += x.rejected;
    }
    return {
      step: r.step,
      batch: r.batch,
      version: r.version,
      at: r.created_at,
      samples: r.samples,
      tokens: r.tokens,
      loss: r.loss,
      rewardMean: r.reward_mean,
      clipFraction: r.clip_fraction,
      approxKl: r.approx_kl,
      hints: r.hints,
      staleDropped: r.stale_dropped,
      seconds: r.seconds,
      tokensPerSecond: r.tokens_per_second,
      samplesQueued: r.samples_queued,
      turnsWaiting: r.turns_waiting,
      judged: n,
      agreementMean: agreementN > 0 ? agreementSum / agreementN : null,
      hintsAccepted: accepted,
      hintsRejected: rejected,
    };
  });
}

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

const SESSION_SUMMARY = `SELECT s.id, s.source, s.created_at, s.last_seen_at, s.learning,
    (SELECT count(*) FROM turns t WHERE t.session_id = s.id) AS turns,
    (SELECT count(*) FROM turns t WHERE t.session_id = s.id AND t.kind = 'main') AS main_turns,
    (SELECT count(*) FROM judgments j JOIN turns t ON t.id = j.turn_id
      WHERE t.session_id = s.id AND j.skipped IS NULL) AS judged,
    (SELECT avg(j.score) FROM judgments j JOIN turns t ON t.id = j.turn_id
      WHERE t.session_id = s.id AND j.skipped IS NULL) AS score_mean,
    (SELECT count(*) FROM samples x JOIN turns t ON t.id = x.turn_id WHERE t.session_id = s.id) AS samples
  FROM sessions s`;

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

/** The `limit` most recently active sessions, most recent first. */
export function recentSessions(db: SqliteDatabase, limit: number): SessionSummary[] {
  const rows = stmt(db, `${SESSION_SUMMARY} ORDER BY s.last_seen_at DESC, s.id LIMIT ?`).all(
    limit,
  ) as SessionSummaryRow[];
  return rows.map(toSummary);
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
  /** Only with text: what the turn answered (the messages since the model's previous answer, no system prompt), its answer, its next state. */
  text?: { input: ChatMessage[]; response: ChatMessage; nextState: ChatMessage[] | null };
}

export interface SessionView {
  session: SessionSummary;
  /** Whether conversation text is included (the server's setting, not the request's). */
  text: boolean;
  turns: TurnView[];
}

/** One session's turns, oldest first; null when there is no such session. */
export function sessionView(db: SqliteDatabase, sessionId: string, withText: boolean): SessionView | null {
  return db.transaction(() => {
    const data = exportSession(db, sessionId);
    if (!data) return null;
    const row = stmt(db, `${SESSION_SUMMARY} WHERE s.id = ?`).get(sessionId) as SessionSummaryRow;
    return { session: toSummary(row), text: withText, turns: data.turns.map((t) => turnView(t, withText)) };
  })();
}

function turnView(t: SessionExportTurn, withText: boolean): TurnView {
  const j = t.judgment;
  const s = t.sample;
  const view: TurnView = {
    id: t.turn_id,
    kind: t.kind,
    model: t.model,
    policyVersion: t.policy_version,
    receivedAt: t.received_at,
    completedAt: t.completed_at,
    promptTokens: t.prompt_ids.length,
    completionTokens: t.completion_ids.length,
    finishReason: t.finish_reason,
    closureReason: t.closure_reason,
    queueStatus: t.queue_status,
    verdict: j && {
      score: j.score,
      agreement: j.agreement,
      skipped: j.skipped,
      noSample: j.no_sample,
      hintAccepted: j.hint !== null,
      hintRejections: Array.isArray(j.hint_rejections) ? j.hint_rejections.length : 0,
      votes: j.votes.map((v) => ({
        kind: v.kind,
        idx: v.idx,
        score: v.score,
        failure: v.failure,
        ...(withText ? { hint: v.hint, raw: v.raw } : {}),
      })),
      ...(withText ? { hint: j.hint } : {}),
    },
    sample: s && {
      status: s.status,
      source: s.source,
      inBatch: s.in_batch,
      rlAdvantage: s.rl_advantage,
      opdWeight: s.opd_weight,
      opdAdvantageMean: s.teacher_logprobs ? meanGap(s.teacher_logprobs, t.logprobs) : null,
      trainedStep: s.trained_step,
    },
  };
  if (withText)
    view.text = { input: inputOf(t.messages), response: t.response, nextState: t.next_state?.messages ?? null };
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
