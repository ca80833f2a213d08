// The feedback table of POST /v1/feedback: an outcome for a session (its episode's result) or a
// reward for one of its main turns, each in [-1, 1] with an optional comment, idempotent per key.
// recordFeedback decides everything in one transaction (the key, the session, the turn, the
// insert and the episode's end), so two requests racing with one key store one row.

import * as q from './queries.js';
import { stmt, type SqliteDatabase } from './sqlite.js';

export interface FeedbackRecord {
  id: string;
  key: string;
  sessionId: string;
  /** Null for an outcome of the whole session. */
  turnId: string | null;
  reward: number;
  /** Free text from a person or an environment: conversation-like, never logged. */
  comment: string | null;
  createdAt: number;
}

export type FeedbackResult =
  /** Stored; an outcome closed the session's last open main turn (`episode_end`) when it had one. */
  | { status: 'stored'; feedback: FeedbackRecord; closedTurnId: string | null }
  /** The key was used before with this same feedback: nothing new stored. */
  | { status: 'duplicate'; feedback: FeedbackRecord }
  /** The key was used before with different feedback. */
  | { status: 'key_conflict'; feedback: FeedbackRecord }
  /** The session already has an outcome (or the turn a reward) under another key. */
  | { status: 'already_given'; feedback: FeedbackRecord }
  | { status: 'session_not_found' }
  | { status: 'turn_not_found' }
  | { status: 'side_turn' }
  | { status: 'opted_out' };

interface FeedbackRow {
  id: string;
  idempotency_key: string;
  session_id: string;
  turn_id: string | null;
  reward: number;
  comment: string | null;
  created_at: number;
}

export class FeedbackTables {
  private readonly recordTx: (input: FeedbackRecord) => FeedbackResult;

  constructor(private readonly db: SqliteDatabase) {
    this.recordTx = db.transaction((input: FeedbackRecord) => this.recordRows(input));
  }

  /** Stores `input` (its id and createdAt are used when it is new), or says why not. */
  recordFeedback(input: FeedbackRecord): FeedbackResult {
    return this.recordTx(input);
  }

  /** The session's outcome, or undefined. */
  outcome(sessionId: string): FeedbackRecord | undefined {
    const row = stmt(this.db, 'SELECT * FROM feedback WHERE session_id = ? AND turn_id IS NULL').get(sessionId) as
      | FeedbackRow
      | undefined;
    return row && toRecord(row);
  }

  /** Every feedback row of the session, in arrival order. */
  ofSession(sessionId: string): FeedbackRecord[] {
    const rows = stmt(this.db, 'SELECT * FROM feedback WHERE session_id = ? ORDER BY rowid').all(
      sessionId,
    ) as FeedbackRow[];
    return rows.map(toRecord);
  }

  private recordRows(input: FeedbackRecord): FeedbackResult {
    const byKey = stmt(this.db, 'SELECT * FROM feedback WHERE idempotency_key = ?').get(input.key) as
      | FeedbackRow
      | undefined;
    if (byKey) {
      const same =
        byKey.session_id === input.sessionId &&
        byKey.turn_id === input.turnId &&
        byKey.reward === input.reward &&
        byKey.comment === input.comment;
      return { status: same ? 'duplicate' : 'key_conflict', feedback: toRecord(byKey) };
    }
    const session = q.findSession(this.db, input.sessionId);
    if (!session) return { status: 'session_not_found' };
    if (session.learning === 0) return { status: 'opted_out' };
    if (input.turnId !== null) {
      const turn = stmt(this.db, 'SELECT kind FROM turns WHERE id = ? AND session_id = ?').get(
        input.turnId,
        input.sessionId,
      ) as { kind: string } | undefined;
      if (!turn) return { status: 'turn_not_found' };
      if (turn.kind !== 'main') return { status: 'side_turn' };
    }
    const earlier = stmt(
      this.db,
      input.turnId === null
        ? 'SELECT * FROM feedback WHERE session_id = ? AND turn_id IS NULL'
        : 'SELECT * FROM feedback WHERE turn_id = ?',
    ).get(input.turnId ?? input.sessionId) as FeedbackRow | undefined;
    if (earlier) return { status: 'already_given', feedback: toRecord(earlier) };
    stmt(
      this.db,
      `INSERT INTO feedback (id, idempotency_key, session_id, turn_id, reward, comment, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?)`,
    ).run(input.id, input.key, input.sessionId, input.turnId, input.reward, input.comment, input.createdAt);
    let closedTurnId: string | null = null;
    if (input.turnId === null) {
      // The episode is over: its last step gets no next state, and is judged and trained now.
      const open = stmt(
        this.db,
        `SELECT id FROM turns WHERE session_id = ? AND kind = 'main' AND closure_reason IS NULL
        ORDER BY received_at DESC, rowid DESC LIMIT 1`,
      ).get(input.sessionId) as { id: string } | undefined;
      if (open && q.setClosure(this.db, open.id, 'episode_end', input.createdAt)) {
        q.enqueueClosedTurn(this.db, open.id, 'pending', input.createdAt);
        closedTurnId = open.id;
      }
    }
    return { status: 'stored', feedback: input, closedTurnId };
  }
}

function toRecord(r: FeedbackRow): FeedbackRecord {
  return {
    id: r.id,
    key: r.idempotency_key,
    sessionId: r.session_id,
    turnId: r.turn_id,
    reward: r.reward,
    comment: r.comment,
    createdAt: r.created_at,
  };
}
