// The SQLite store: one file in the data folder, WAL mode, schema migrated on open. It implements
// what sessions/ needs (TurnStore) plus the learning queue and export. Each method is one
// transaction, so a turn, its closure, its next state and its queue entry appear together or not at all.
//
//   const store = openStore({ dir: 'data' });
//   for (const line of store.exportLines('main')) ...
//   const batch = store.claimClosedTurns(16); ...; store.finishClosedTurns(batch.map((c) => c.turn.id));

import { closeSync, existsSync } from 'node:fs';
import { makeFilesPrivate, makePrivateDir, openPrivateFile } from '../private-files.js';
import { join } from 'node:path';
import type { SessionUpsert, TurnClosure, TurnStore, TurnWrite } from '../sessions/recorder-contract.js';
import type { ClosedTurn, ClosureReason, RetemplateCheck, Rollout, Turn } from '../types.js';
import { heldSamplesOfSession, releaseAllHolds } from './batch-holds.js';
import { BackgroundCheckpointer } from './checkpointer.js';
import { FeedbackTables } from './feedback.js';
import { LearningTables } from './learning.js';
import { StepGroups } from './step-groups.js';
import { VersionTables } from './versions.js';
import { migrateUp } from './migrations/index.js';
import * as q from './queries.js';
import {
  encodeInputs,
  nextStateToRow,
  rowToClosedTurn,
  rowToExportLine,
  rowToTurn,
  turnToRow,
  type EncodedInputs,
  type ExportLine,
} from './records.js';
import { deleteSessionRows, exportSession, type SessionExport } from './session-data.js';
import { openSqlite, type Durability, type SqliteDatabase } from './sqlite.js';

export const STORE_FILE = 'openclaw-rl.sqlite';

export interface StoreOptions {
  /** Data folder; created if missing. The database is `<dir>/openclaw-rl.sqlite`. */
  dir: string;
  /** Default `normal`: every commit survives a process crash; `full` also a power loss (an fsync per commit). */
  durability?: Durability;
  /**
   * Put claimed queue entries back to pending and drop training batches' sample holds (default
   * true: the serving process; false for tools that open the store beside it, such as export).
   */
  recoverQueue?: boolean;
  /**
   * `inline` (default): SQLite checkpoints the WAL inside a commit now and then. `background`: a
   * worker thread does, so commits on the serving thread never pay for it (long-running servers).
   */
  checkpoints?: 'inline' | 'background';
  /** Called when the background checkpointer fails and the store goes back to inline checkpoints. */
  onCheckpointFailure?: (message: string) => void;
  now?: () => number;
}

export class Store implements TurnStore {
  readonly path: string;
  /** Judgments, samples and training steps (the learning loop's tables). */
  readonly learning: LearningTables;
  /** Outcomes and turn rewards from POST /v1/feedback. */
  readonly feedback: FeedbackTables;
  /** The `steps` method's task groups (waiting samples, their release). */
  readonly steps: StepGroups;
  /** Published versions and rollback requests. */
  readonly versions: VersionTables;
  private readonly now: () => number;

  // The request path's transactions, built once: db.transaction() builds its wrappers anew on every
  // call, a fifth of a turn's commit.
  private readonly writeTx: Store['writeTurns'];
  private checkpointer: BackgroundCheckpointer | null = null;
  /** Request sides encoded ahead of their commit, by the messages array they were encoded from. */
  private readonly prepared = new WeakMap<
    object,
    { tools: Turn['tools']; promptIds: readonly number[]; encoded: EncodedInputs }
  >();
  private readonly retemplateTx: Store['setRetemplates'];

  private constructor(
    readonly db: SqliteDatabase,
    path: string,
    now: () => number,
  ) {
    this.path = path;
    this.now = now;
    this.learning = new LearningTables(db, now);
    this.feedback = new FeedbackTables(db);
    this.steps = new StepGroups(db);
    this.versions = new VersionTables(db, now);
    this.writeTx = db.transaction(this.writeRows.bind(this));
    this.retemplateTx = db.transaction(this.retemplateRows.bind(this));
  }

  static open(opts: StoreOptions): Store {
    makePrivateDir(opts.dir);
    const path = join(opts.dir, STORE_FILE);
    // SQLite gives its -wal and -shm files the database file's mode, so a database created 0600
    // keeps all three private; an existing one (an older version's 0644) is tightened.
    if (!existsSync(path)) closeSync(openPrivateFile(path, 'a'));
    makeFilesPrivate([path, `${path}-wal`, `${path}-shm`]);
    const db = openSqlite(path, opts.durability ?? 'normal');
    try {
      migrateUp(db, path);
      const store = new Store(db, path, opts.now ?? Date.now);
      if (opts.recoverQueue ?? true) {
        q.releaseClaimed(db, store.now());
        releaseAllHolds(db);
      }
      if (opts.checkpoints === 'background')
        store.checkpointer = new BackgroundCheckpointer(db, path, opts.onCheckpointFailure);
      return store;
    } catch (e) {
      db.close();
      throw e;
    }
  }

  get isOpen(): boolean {
    return this.db.open;
  }

  /** Where WAL checkpoints run now (`background` falls back to `inline` if its thread fails), and what it did. */
  get checkpoints(): { mode: 'inline' | 'background'; pages: number; failure: string | null } {
    const c = this.checkpointer;
    return { mode: c?.running ? 'background' : 'inline', pages: c?.pages ?? 0, failure: c?.failure ?? null };
  }

  close(): void {
    this.checkpointer?.stop();
    if (this.db.open) this.db.close();
  }

  sessionLearning(sessionId: string): boolean | undefined {
    const row = q.findSession(this.db, sessionId);
    return row === undefined ? undefined : row.learning === 1;
  }

  sessionRollout(sessionId: string): Rollout | null {
    return q.sessionRollout(this.db, sessionId);
  }

  /** The recorder's writes, many in one transaction (its group commit). */
  writeTurns(writes: readonly TurnWrite[]): void {
    this.writeTx(writes);
  }

  /**
   * Encodes a request's messages, tools and prompt ids now, while the engine generates; the commit
   * of a turn that carries these same arrays (by identity) then skips that work. For a long agent
   * session (100 kB of messages, 25k prompt tokens) it is 0.3 ms of the commit the response waits for.
   */
  prepareInputs(messages: Turn['messages'], tools: Turn['tools'], promptIds: readonly number[]): void {
    this.prepared.set(messages, { tools, promptIds, encoded: encodeInputs(messages, tools, promptIds) });
  }

  /** Inserts or updates the session row and, when given, inserts the turn, in one transaction. */
  recordTurn(
    session: SessionUpsert | null,
    turn: Turn | null,
    closure?: { reason: ClosureReason; closedAt: number },
  ): void {
    this.writeTx([{ type: 'record', session, turn, ...(closure ? { closure } : {}) }]);
  }

  /** Closes an open main turn: reason, next state and a learning-queue entry, in one transaction. */
  closeTurn(close: TurnClosure): void {
    this.writeTx([{ type: 'close', close }]);
  }

  private writeRows(writes: readonly TurnWrite[]): void {
    for (const w of writes) {
      if (w.type === 'record') this.recordRows(w.session, w.turn, w.closure);
      else this.closeRows(w.close);
    }
  }

  private recordRows(
    session: SessionUpsert | null,
    turn: Turn | null,
    closure?: { reason: ClosureReason; closedAt: number },
  ): void {
    if (session) {
      q.upsertSession(this.db, {
        id: session.id,
        source: session.source,
        created_at: session.seenAt,
        last_seen_at: session.seenAt,
        learning: session.learning ? 1 : 0,
      });
      if (session.rollout) q.setSessionRollout(this.db, session.id, session.rollout);
      if (!session.learning) {
        q.excludeSessionFromQueue(this.db, session.id, this.now());
        q.deleteQueuedSamplesOfSession(this.db, session.id);
      }
    }
    if (!turn) return;
    const early = this.prepared.get(turn.messages);
    const inputs =
      early && early.tools === turn.tools && early.promptIds === turn.promptIds ? early.encoded : undefined;
    q.insertTurn(this.db, turnToRow(turn, closure, inputs));
    if (closure)
      q.enqueueClosedTurn(this.db, turn.id, session?.learning === false ? 'excluded' : 'pending', closure.closedAt);
  }

  private closeRows(close: TurnClosure): void {
    // A turn that was never stored (opted out) or was deleted has nothing to close.
    if (!q.setClosure(this.db, close.turnId, close.reason, close.closedAt)) return;
    if (close.nextState) q.insertNextState(this.db, nextStateToRow(close.turnId, close.nextState));
    q.enqueueClosedTurn(this.db, close.turnId, close.learning ? 'pending' : 'excluded', close.closedAt);
  }

  openMainTurns(): Turn[] {
    return q.openMainTurnRows(this.db).map(rowToTurn);
  }

  /** Saves token-exactness results, many at once in one transaction. */
  setRetemplates(results: readonly [string, RetemplateCheck][]): void {
    this.retemplateTx(results);
  }

  private retemplateRows(results: readonly [string, RetemplateCheck][]): void {
    for (const [turnId, check] of results) q.setRetemplate(this.db, turnId, JSON.stringify(check));
  }

  getTurn(turnId: string): { turn: Turn; closedTurn: ClosedTurn | null } | undefined {
    const row = q.turnWithNextState(this.db, turnId);
    if (!row) return undefined;
    return { turn: rowToTurn(row), closedTurn: row.closure_reason === null ? null : rowToClosedTurn(row) };
  }

  /**
   * Hands up to `limit` pending closed turns to the learning loop, oldest first, marking them
   * claimed. Claimed entries return to pending when the store is reopened (a crash mid-batch).
   */
  claimClosedTurns(limit: number): ClosedTurn[] {
    return this.db.transaction(() => {
      const now = this.now();
      return q.pendingQueueIds(this.db, limit).map((id) => {
        q.setQueueStatus(this.db, id, 'claimed', now, true);
        return rowToClosedTurn(q.turnWithNextState(this.db, id)!);
      });
    })();
  }

  /** Marks claimed closed turns as consumed (`done`) or puts them back (`pending`). */
  finishClosedTurns(turnIds: readonly string[], status: 'done' | 'pending' = 'done'): void {
    this.db.transaction(() => {
      const now = this.now();
      for (const id of turnIds) q.setQueueStatus(this.db, id, status, now, false);
    })();
  }

  queueStatus(turnId: string): string | undefined {
    return q.queueEntry(this.db, turnId)?.status;
  }

  /** Every recorded turn (optionally one kind) in the order it was committed, as export lines. Streams from disk. */
  *exportLines(kind: 'main' | 'side' | null = null): Generator<ExportLine> {
    for (const row of q.iterateTurns(this.db, kind)) yield rowToExportLine(row);
  }

  /**
   * Deletes a session with every turn, next state, queue entry, judgment and sample it has, then
   * checkpoints the WAL so the deleted pages do not linger in it. Returns the number of turns
   * deleted, or null when there is no such session; throws SessionInTrainingError, deleting
   * nothing, while a training batch in progress holds one of its samples.
   */
  deleteSession(sessionId: string): number | null {
    const deleted = deleteSessionRows(this.db, sessionId);
    if (deleted !== null) this.db.pragma('wal_checkpoint(TRUNCATE)');
    return deleted;
  }

  /** Everything recorded about one session, as one JSON document; null when there is no such session. */
  exportSession(sessionId: string): SessionExport | null {
    return exportSession(this.db, sessionId);
  }

  /** How many of a session's samples the training batch in progress holds (deletion waits for them). */
  heldSamplesOfSession(sessionId: string): number {
    return heldSamplesOfSession(this.db, sessionId);
  }

  counts(): ReturnType<typeof q.tableCounts> {
    return q.tableCounts(this.db);
  }
}

export function openStore(opts: StoreOptions): Store {
  return Store.open(opts);
}
