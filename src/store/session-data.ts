// One session's data, for the person it belongs to: everything recorded about it as one JSON
// document (turns with their token data, next states, the judge's verdicts and votes, samples), and
// its deletion, refused while a training batch in progress holds one of its samples.

import { heldSamplesOfSession, releaseDeadHolds } from './batch-holds.js';
import * as q from './queries.js';
import { decodeFloats, rowToExportLine, type ExportLine } from './records.js';
import { stmt, type SqliteDatabase } from './sqlite.js';
import type { SessionRow } from './tables.js';

export interface SessionExport {
  session: {
    id: string;
    source: string;
    created_at: number;
    last_seen_at: number;
    learning: boolean;
    task_id: string | null;
    rollout_index: number | null;
    rollout_count: number | null;
  };
  turns: SessionExportTurn[];
  /** POST /v1/feedback: the session's outcome (turn_id null) and rewards given to its turns. */
  feedback: ExportedFeedback[];
}

export interface ExportedFeedback {
  id: string;
  idempotency_key: string;
  turn_id: string | null;
  reward: number;
  comment: string | null;
  created_at: number;
}

/** A turn as `openclaw-rl export` writes it, with what the learning loop made of it. */
export interface SessionExportTurn extends ExportLine {
  /** Its learning-queue entry: pending, claimed (being judged), done or excluded; null when never queued. */
  queue_status: string | null;
  judgment: ExportedJudgment | null;
  sample: ExportedSample | null;
}

export interface ExportedJudgment {
  next_turn_id: string | null;
  judge: string;
  skipped: string | null;
  score: number;
  agreement: number | null;
  hint: string | null;
  hint_vote: number | null;
  hint_rejections: unknown;
  no_sample: string | null;
  started_at: number;
  finished_at: number;
  votes: ExportedVote[];
}

export interface ExportedVote {
  kind: 'eval' | 'hint';
  idx: number;
  score: number | null;
  hint: string | null;
  raw: string;
  failure: string | null;
  detail: string | null;
  attempts: number;
  ms: number;
}

export interface ExportedSample {
  id: number;
  /** queued, trained, stale or too_long */
  status: string;
  /** A training batch in progress holds it. */
  in_batch: boolean;
  source: string;
  policy_version: number;
  score: number;
  rl_advantage: number;
  opd_weight: number;
  teacher_logprobs: number[] | null;
  teacher_version: number | null;
  created_at: number;
  trained_step: number | null;
  trained_at: number | null;
  /** The steps method: the step's reward and its index in the rollout (null for other methods). */
  reward: number | null;
  step_index: number | null;
}

type JudgmentRow = Omit<ExportedJudgment, 'votes' | 'hint_rejections'> & { hint_rejections: string };
type SampleRow = Omit<ExportedSample, 'teacher_logprobs' | 'in_batch'> & {
  teacher_logprobs: Uint8Array | null;
  in_batch: 0 | 1;
};

/** The session's data as of one moment (one read transaction), or null when there is no such session. */
export function exportSession(db: SqliteDatabase, sessionId: string): SessionExport | null {
  return db.transaction(() => {
    const session = q.findSession(db, sessionId) as SessionWithRollout | undefined;
    if (!session) return null;
    const ids = stmt(db, 'SELECT id FROM turns WHERE session_id = ? ORDER BY rowid').all(sessionId) as {
      id: string;
    }[];
    const feedback = stmt(
      db,
      'SELECT id, idempotency_key, turn_id, reward, comment, created_at FROM feedback WHERE session_id = ? ORDER BY rowid',
    ).all(sessionId) as ExportedFeedback[];
    return { session: exportedSession(session), turns: ids.map(({ id }) => exportTurn(db, id)), feedback };
  })();
}

/** A sessions row with the rollout grouping its first request gave (schema 7). */
type SessionWithRollout = SessionRow & {
  task_id: string | null;
  rollout_index: number | null;
  rollout_count: number | null;
};

function exportedSession(row: SessionWithRollout): SessionExport['session'] {
  return {
    id: row.id,
    source: row.source,
    created_at: row.created_at,
    last_seen_at: row.last_seen_at,
    learning: row.learning === 1,
    task_id: row.task_id,
    rollout_index: row.rollout_index,
    rollout_count: row.rollout_count,
  };
}

function exportTurn(db: SqliteDatabase, turnId: string): SessionExportTurn {
  const judgment = stmt(
    db,
    `SELECT next_turn_id, judge, skipped, score, agreement, hint, hint_vote, hint_rejections, no_sample, started_at,
    finished_at FROM judgments WHERE turn_id = ?`,
  ).get(turnId) as JudgmentRow | undefined;
  const votes = stmt(
    db,
    `SELECT kind, idx, score, hint, raw, failure, detail, attempts, ms FROM judge_votes
    WHERE turn_id = ? ORDER BY kind, idx`,
  ).all(turnId) as ExportedVote[];
  const sample = stmt(
    db,
    `SELECT id, status, source, policy_version, score, rl_advantage, opd_weight, teacher_logprobs, teacher_version,
    created_at, trained_step, trained_at, reward, step_index, EXISTS (SELECT 1 FROM batch_holds WHERE sample_id = samples.id) AS in_batch
    FROM samples WHERE turn_id = ?`,
  ).get(turnId) as SampleRow | undefined;
  return {
    ...rowToExportLine(q.turnWithNextState(db, turnId)!),
    queue_status: q.queueEntry(db, turnId)?.status ?? null,
    judgment: judgment ? { ...judgment, hint_rejections: JSON.parse(judgment.hint_rejections), votes } : null,
    sample: sample
      ? {
          ...sample,
          in_batch: sample.in_batch === 1,
          teacher_logprobs: sample.teacher_logprobs && decodeFloats(sample.teacher_logprobs),
        }
      : null,
  };
}

/** Deleting the session would take samples from the training batch in progress. */
export class SessionInTrainingError extends Error {
  constructor(
    readonly sessionId: string,
    readonly heldSamples: number,
  ) {
    super(
      `session "${sessionId}" has ${heldSamples} sample(s) in the training batch in progress, which needs them until ` +
        'its step is committed (seconds to minutes): nothing was deleted; retry once the batch is done',
    );
    this.name = 'SessionInTrainingError';
  }
}

/**
 * Deletes a session and, by cascade, every turn, payload, next state, queue entry, judgment, vote
 * and sample of it, in one transaction that takes the write lock first (another process may be
 * serving on the same file). Returns the number of turns deleted, or null when there is no such
 * session; throws SessionInTrainingError, deleting nothing, while a batch holds one of its samples.
 */
export function deleteSessionRows(db: SqliteDatabase, sessionId: string): number | null {
  return db
    .transaction(() => {
      releaseDeadHolds(db);
      const held = heldSamplesOfSession(db, sessionId);
      if (held > 0) throw new SessionInTrainingError(sessionId, held);
      const turns = q.countSessionTurns(db, sessionId);
      return q.deleteSessionRow(db, sessionId) ? turns : null;
    })
    .immediate();
}
