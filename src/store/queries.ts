// Typed queries: one small function per statement, the database (or a transaction's database)
// first. No business rules here; store.ts composes them into transactions.

import type { QueueStatus, Rollout } from '../types.js';
import { stmt, type SqliteDatabase } from './sqlite.js';
import type { ClosedTurnRow, FullTurnRow, NextStateRow, SessionRow, TurnWithNextStateRow } from './tables.js';

const TURN_COLUMNS = `id, session_id, session_source, kind, kind_reason, compaction, trace_id, model, sampling, finish_reason,
  policy_version, prompt_tokens, completion_tokens, received_at, first_token_at, completed_at, tool_call_errors, retemplate,
  closure_reason, closed_at`;
const PAYLOAD_COLUMNS = 'messages, tools, prompt_ids, completion_ids, logprobs, sampled_logprobs, response';

const names = (columns: string) => columns.split(',').map((c) => c.trim());
const params = (columns: string) =>
  names(columns)
    .map((c) => `@${c}`)
    .join(', ');

// A turn with its payload (FullTurnRow), and with its next state too (TurnWithNextStateRow).
const PAYLOAD = names(PAYLOAD_COLUMNS)
  .map((c) => `p.${c}`)
  .join(', ');
const FULL_TURN = `SELECT t.*, ${PAYLOAD} FROM turns t JOIN turn_payloads p ON p.turn_id = t.id`;
const WITH_NEXT_STATE = `SELECT t.*, ${PAYLOAD},
  n.next_turn_id AS ns_next_turn_id, n.messages AS ns_messages, n.arrived_at AS ns_arrived_at,
  n.raw_messages AS ns_raw_messages
  FROM turns t JOIN turn_payloads p ON p.turn_id = t.id LEFT JOIN next_states n ON n.turn_id = t.id`;

export function upsertSession(db: SqliteDatabase, row: SessionRow): void {
  stmt(
    db,
    `INSERT INTO sessions (id, source, created_at, last_seen_at, learning) VALUES (@id, @source, @created_at, @last_seen_at, @learning)
    ON CONFLICT (id) DO UPDATE SET last_seen_at = max(last_seen_at, excluded.last_seen_at), learning = min(learning, excluded.learning)`,
  ).run(row);
}

export function findSession(db: SqliteDatabase, id: string): SessionRow | undefined {
  return stmt(db, 'SELECT * FROM sessions WHERE id = ?').get(id) as SessionRow | undefined;
}

/** Gives the session its rollout grouping unless it has one (the first request's values are kept). */
export function setSessionRollout(db: SqliteDatabase, id: string, rollout: Rollout): void {
  stmt(
    db,
    `UPDATE sessions SET task_id = ?, rollout_index = ?, rollout_count = ?
    WHERE id = ? AND task_id IS NULL AND rollout_index IS NULL AND rollout_count IS NULL`,
  ).run(rollout.taskId, rollout.index, rollout.count, id);
}

export function sessionRollout(db: SqliteDatabase, id: string): Rollout | null {
  const r = stmt(db, 'SELECT task_id, rollout_index, rollout_count FROM sessions WHERE id = ?').get(id) as
    | { task_id: string | null; rollout_index: number | null; rollout_count: number | null }
    | undefined;
  if (!r || (r.task_id === null && r.rollout_index === null && r.rollout_count === null)) return null;
  return { taskId: r.task_id, index: r.rollout_index, count: r.rollout_count };
}

const INSERT_TURN = `INSERT INTO turns (${TURN_COLUMNS}) VALUES (${params(TURN_COLUMNS)})`;
const INSERT_PAYLOAD = `INSERT INTO turn_payloads (turn_id, ${PAYLOAD_COLUMNS}) VALUES (@id, ${params(PAYLOAD_COLUMNS)})`;

/** Inserts a turn and its payload, both or neither. */
export function insertTurn(db: SqliteDatabase, row: FullTurnRow): void {
  // In the caller's transaction when there is one: a savepoint would add a tenth to a turn's commit.
  if (!db.inTransaction) return db.transaction(insertTurn)(db, row);
  stmt(db, INSERT_TURN).run(row);
  stmt(db, INSERT_PAYLOAD).run(row);
}

// The updates below touch only the small turns row: the payload, in its own table, is not rewritten.

/** Sets the closure of an open turn; returns false when there is no such open turn. */
export function setClosure(db: SqliteDatabase, turnId: string, reason: string, closedAt: number): boolean {
  return (
    stmt(db, 'UPDATE turns SET closure_reason = ?, closed_at = ? WHERE id = ? AND closure_reason IS NULL').run(
      reason,
      closedAt,
      turnId,
    ).changes === 1
  );
}

export function setRetemplate(db: SqliteDatabase, turnId: string, json: string): void {
  stmt(db, 'UPDATE turns SET retemplate = ? WHERE id = ?').run(json, turnId);
}

export function insertNextState(db: SqliteDatabase, row: NextStateRow): void {
  stmt(
    db,
    `INSERT INTO next_states (turn_id, next_turn_id, messages, arrived_at, raw_messages)
    VALUES (@turn_id, @next_turn_id, @messages, @arrived_at, @raw_messages)`,
  ).run(row);
}

export function enqueueClosedTurn(db: SqliteDatabase, turnId: string, status: QueueStatus, now: number): void {
  stmt(db, 'INSERT INTO closed_turns (turn_id, status, enqueued_at, updated_at) VALUES (?, ?, ?, ?)').run(
    turnId,
    status,
    now,
    now,
  );
}

/** Takes pending entries of a session out of the learning queue (the session opted out). */
export function excludeSessionFromQueue(db: SqliteDatabase, sessionId: string, now: number): number {
  return stmt(
    db,
    `UPDATE closed_turns SET status = 'excluded', updated_at = ?
    WHERE status IN ('pending', 'claimed') AND turn_id IN (SELECT id FROM turns WHERE session_id = ?)`,
  ).run(now, sessionId).changes;
}

/** Deletes a session's samples that were not trained yet (the session opted out of learning). */
export function deleteQueuedSamplesOfSession(db: SqliteDatabase, sessionId: string): number {
  return stmt(
    db,
    `DELETE FROM samples WHERE status IN ('queued', 'waiting') AND turn_id IN (SELECT id FROM turns WHERE session_id = ?)`,
  ).run(sessionId).changes;
}

export function pendingQueueIds(db: SqliteDatabase, limit: number): string[] {
  return (
    stmt(db, `SELECT turn_id FROM closed_turns WHERE status = 'pending' ORDER BY rowid LIMIT ?`).all(limit) as {
      turn_id: string;
    }[]
  ).map((r) => r.turn_id);
}

export function setQueueStatus(
  db: SqliteDatabase,
  turnId: string,
  status: QueueStatus,
  now: number,
  countAttempt: boolean,
): void {
  stmt(db, 'UPDATE closed_turns SET status = ?, updated_at = ?, attempts = attempts + ? WHERE turn_id = ?').run(
    status,
    now,
    countAttempt ? 1 : 0,
    turnId,
  );
}

/** Claimed entries go back to pending (after a restart, nothing is half-consumed). */
export function releaseClaimed(db: SqliteDatabase, now: number): number {
  return stmt(db, `UPDATE closed_turns SET status = 'pending', updated_at = ? WHERE status = 'claimed'`).run(now)
    .changes;
}

export function queueEntry(db: SqliteDatabase, turnId: string): ClosedTurnRow | undefined {
  return stmt(db, 'SELECT * FROM closed_turns WHERE turn_id = ?').get(turnId) as ClosedTurnRow | undefined;
}

export function turnWithNextState(db: SqliteDatabase, turnId: string): TurnWithNextStateRow | undefined {
  return stmt(db, `${WITH_NEXT_STATE} WHERE t.id = ?`).get(turnId) as TurnWithNextStateRow | undefined;
}

export function openMainTurnRows(db: SqliteDatabase): FullTurnRow[] {
  return stmt(
    db,
    `${FULL_TURN} WHERE t.kind = 'main' AND t.closure_reason IS NULL ORDER BY t.completed_at, t.rowid`,
  ).all() as FullTurnRow[];
}

export function iterateTurns(db: SqliteDatabase, kind: 'main' | 'side' | null): IterableIterator<TurnWithNextStateRow> {
  return stmt(db, `${WITH_NEXT_STATE} WHERE (@kind IS NULL OR t.kind = @kind) ORDER BY t.rowid`).iterate({
    kind,
  }) as IterableIterator<TurnWithNextStateRow>;
}

export function countSessionTurns(db: SqliteDatabase, sessionId: string): number {
  return (stmt(db, 'SELECT count(*) AS n FROM turns WHERE session_id = ?').get(sessionId) as { n: number }).n;
}

export function deleteSessionRow(db: SqliteDatabase, sessionId: string): boolean {
  return stmt(db, 'DELETE FROM sessions WHERE id = ?').run(sessionId).changes === 1;
}

/** Row counts per table (health checks and tests). */
export function tableCounts(db: SqliteDatabase): Record<'sessions' | 'turns' | 'next_states' | 'closed_turns', number> {
  const n = (table: string) => (stmt(db, `SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  return { sessions: n('sessions'), turns: n('turns'), next_states: n('next_states'), closed_turns: n('closed_turns') };
}
