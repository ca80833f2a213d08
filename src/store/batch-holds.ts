// The samples a training batch in progress holds (schema 8's batch_holds): taken with the batch,
// released when its step rows commit or when it is abandoned. Retention and deletion leave held
// samples alone; SQLite's foreign key refuses to delete one anyway. A hold names its process, so
// another process (`openclaw-rl data delete`) can tell a live batch from one a crash left behind.

import { stmt, type SqliteDatabase } from './sqlite.js';

export function holdSamples(db: SqliteDatabase, sampleIds: readonly number[], now: number): void {
  const hold = stmt(db, 'INSERT INTO batch_holds (sample_id, holder_pid, held_at) VALUES (?, ?, ?)');
  for (const id of sampleIds) hold.run(id, process.pid, now);
}

export function releaseSamples(db: SqliteDatabase, sampleIds: readonly number[]): void {
  const release = stmt(db, 'DELETE FROM batch_holds WHERE sample_id = ?');
  for (const id of sampleIds) release.run(id);
}

/** Every hold goes: the process that opens the store to serve owns all training on it. */
export function releaseAllHolds(db: SqliteDatabase): number {
  return stmt(db, 'DELETE FROM batch_holds').run().changes;
}

/** Drops holds whose process no longer runs (a crash mid-batch); returns how many. */
export function releaseDeadHolds(db: SqliteDatabase): number {
  const pids = stmt(db, 'SELECT DISTINCT holder_pid AS pid FROM batch_holds').all() as { pid: number }[];
  let released = 0;
  for (const { pid } of pids) {
    if (!processRuns(pid)) released += stmt(db, 'DELETE FROM batch_holds WHERE holder_pid = ?').run(pid).changes;
  }
  return released;
}

/** How many of a session's samples a batch in progress holds. */
export function heldSamplesOfSession(db: SqliteDatabase, sessionId: string): number {
  return (
    stmt(
      db,
      `SELECT count(*) AS n FROM batch_holds h JOIN samples s ON s.id = h.sample_id
      JOIN turns t ON t.id = s.turn_id WHERE t.session_id = ?`,
    ).get(sessionId) as { n: number }
  ).n;
}

function processRuns(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0); // signal 0 only asks whether the process exists
    return true;
  } catch (e) {
    // EPERM: it exists, under another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
