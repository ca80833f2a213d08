// The retention purge's SQL: old turns with everything hanging off them, in bounded transactions,
// then the freed pages given back to the file system. What the learning loop still needs stays:
// open main turns (the recorder holds them), turns being judged (claimed), and turns whose sample
// a training batch in progress holds. Training steps (numbers, no conversation) are kept.

import { existsSync, statSync } from 'node:fs';
import { stmt, type SqliteDatabase } from './sqlite.js';

/** Rows one purge deleted, per table (the cascade's children counted before their turns go). */
export interface PurgeCounts {
  turns: number;
  payloads: number;
  nextStates: number;
  queueEntries: number;
  judgments: number;
  votes: number;
  samples: number;
  sessions: number;
}

export const NO_ROWS: PurgeCounts = {
  turns: 0,
  payloads: 0,
  nextStates: 0,
  queueEntries: 0,
  judgments: 0,
  votes: 0,
  samples: 0,
  sessions: 0,
};

export function addCounts(a: PurgeCounts, b: PurgeCounts): PurgeCounts {
  const out = { ...a };
  for (const k of Object.keys(b) as (keyof PurgeCounts)[]) out[k] += b[k];
  return out;
}

// A turn is protected while the recorder may still close it, the judge holds it, or a batch holds its sample.
const PROTECTED = `(t.kind = 'main' AND t.closure_reason IS NULL)
  OR EXISTS (SELECT 1 FROM closed_turns c WHERE c.turn_id = t.id AND c.status = 'claimed')
  OR EXISTS (SELECT 1 FROM samples s JOIN batch_holds h ON h.sample_id = s.id WHERE s.turn_id = t.id)`;

const IN_BATCH = 'IN (SELECT value FROM json_each(?))';

/** How much one purge transaction may delete. */
export interface PurgeBounds {
  /** Turns (and sessions) at most. */
  rows: number;
  /**
   * Prompt + completion tokens at most (at least one turn is taken): a turn's size grows with its
   * tokens, and secure_delete overwrites every byte deleted, so this is what bounds a transaction's time.
   */
  tokens: number;
}

/**
 * Deletes the oldest turns completed before `cutoff` (ms) and not protected, within `bounds`, with
 * their payloads, next states, queue entries, judgments, votes and samples; then up to bounds.rows
 * sessions last seen before `cutoff` that have no turn left. One transaction, write lock taken first.
 * `full` is false when fewer old turns were left than the bounds would have taken.
 */
export function purgeBatch(db: SqliteDatabase, cutoff: number, bounds: PurgeBounds): PurgeCounts & { full: boolean } {
  return db
    .transaction(() => {
      const candidates = stmt(
        db,
        `SELECT t.id, t.prompt_tokens + t.completion_tokens AS tokens FROM turns t
        WHERE t.completed_at < ? AND NOT (${PROTECTED}) ORDER BY t.completed_at LIMIT ?`,
      ).all(cutoff, bounds.rows) as { id: string; tokens: number }[];
      const ids: string[] = [];
      let tokens = 0;
      for (const c of candidates) {
        if (ids.length > 0 && tokens + c.tokens > bounds.tokens) break;
        ids.push(c.id);
        tokens += c.tokens;
      }
      const counts = { ...NO_ROWS, full: ids.length < candidates.length || candidates.length === bounds.rows };
      if (ids.length > 0) {
        const batch = JSON.stringify(ids);
        const del = (table: string, column = 'turn_id') =>
          stmt(db, `DELETE FROM ${table} WHERE ${column} ${IN_BATCH}`).run(batch).changes;
        // Children first, so each table's count is its own; the turns' delete cascades to anything else.
        counts.votes = del('judge_votes');
        counts.judgments = del('judgments');
        counts.samples = del('samples');
        counts.queueEntries = del('closed_turns');
        counts.nextStates = del('next_states');
        counts.payloads = del('turn_payloads');
        counts.turns = del('turns', 'id');
      }
      counts.sessions = stmt(
        db,
        `DELETE FROM sessions WHERE id IN (SELECT id FROM sessions s WHERE s.last_seen_at < ?
        AND NOT EXISTS (SELECT 1 FROM turns WHERE session_id = s.id) LIMIT ?)`,
      ).run(cutoff, bounds.rows).changes;
      if (counts.sessions === bounds.rows) counts.full = true;
      return counts;
    })
    .immediate();
}

/** Turns completed before `cutoff` that the purge keeps because the learning loop still needs them. */
export function protectedTurns(db: SqliteDatabase, cutoff: number): number {
  return (
    stmt(db, `SELECT count(*) AS n FROM turns t WHERE t.completed_at < ? AND (${PROTECTED})`).get(cutoff) as {
      n: number;
    }
  ).n;
}

export function freePages(db: SqliteDatabase): number {
  return db.pragma('freelist_count', { simple: true }) as number;
}

/** Whether freed pages can be given back a chunk at a time (auto_vacuum = INCREMENTAL). */
export function vacuumsIncrementally(db: SqliteDatabase): boolean {
  return db.pragma('auto_vacuum', { simple: true }) === 2;
}

/** Gives up to `pages` free pages back (a short write transaction of its own). */
export function vacuumPages(db: SqliteDatabase, pages: number): void {
  db.pragma(`incremental_vacuum(${Math.max(1, Math.floor(pages))})`);
}

/**
 * Rewrites a store created before auto_vacuum = INCREMENTAL (a full VACUUM: the whole file once,
 * with as much free disk) so that later purges can shrink it a chunk at a time.
 */
export function convertToIncrementalVacuum(db: SqliteDatabase): void {
  db.pragma('auto_vacuum = INCREMENTAL');
  db.exec('VACUUM');
}

/** Moves the WAL into the database and empties it; the database file shrinks to its pages then. */
export function checkpointTruncate(db: SqliteDatabase): void {
  db.pragma('wal_checkpoint(TRUNCATE)');
}

/** The store's bytes on disk: the database file and its WAL. */
export function storeBytes(path: string): number {
  const size = (p: string) => (existsSync(p) ? statSync(p).size : 0);
  return size(path) + size(`${path}-wal`);
}
