// The published versions' record and the rollback requests (schema 9). A version row says what a
// version was published from (a trained batch, a rollback, a restart), when, at which optimizer
// step, and where its weights live; a request row is a rollback asked for by the CLI, the admin
// route or the guard, which the trainer applies in order and answers in the same transaction
// that records the version it published.

import { existsSync } from 'node:fs';
import { stmt, type SqliteDatabase } from './sqlite.js';

export type VersionSource = 'train' | 'rollback' | 'restart';
export type RollbackRequester = 'cli' | 'admin' | 'guard';

/** One publication, as the trainer records it. */
export interface VersionRecord {
  version: number;
  publishedAt: number;
  /** The optimizer step its weights are at. */
  step: number;
  source: VersionSource;
  /** A rollback: the version serving when it was made, and the version whose weights it serves. */
  rolledBackFrom: number | null;
  restores: number | null;
  requestedBy: RollbackRequester | null;
  /** Its folder (a PEFT adapter or a model folder); null: it was published in memory only. */
  weightsPath: string | null;
}

/** What the guard concluded about a trained version (learn/guard.ts). */
export interface GuardVerdict {
  decision: 'kept' | 'rolled_back';
  /** The version it was compared with, and the judged turns and mean score on each side. */
  previous: number;
  previousTurns: number;
  previousMean: number | null;
  turns: number;
  mean: number | null;
  /** One-sided p-value of "worse by more than the margin"; null when it could not be computed. */
  p: number | null;
  reason: string;
}

/** A version as `versions list` and GET /admin/versions show it. */
export interface VersionSummary extends VersionRecord {
  /** Whether the folder is still there (false: pruned by --keep-versions, or never written). */
  weightsKept: boolean;
  serving: boolean;
  guard: GuardVerdict | null;
  /** Main-line turns it served, those with a judge verdict, and their mean score. */
  turns: number;
  judged: number;
  scoreMean: number | null;
}

export interface RollbackRequest {
  id: number;
  target: number;
  requestedBy: RollbackRequester;
  requestedAt: number;
  status: 'pending' | 'done' | 'refused';
  publishedVersion: number | null;
  message: string | null;
  finishedAt: number | null;
}

/** A judged turn with a verdict: not skipped (it had a next state) and at least one valid vote. */
const HAS_VERDICT = 'j.skipped IS NULL AND j.agreement IS NOT NULL';

/** Inserts a version row; the caller's transaction (a batch's commit) makes it atomic with the rest. */
export function insertVersion(db: SqliteDatabase, v: VersionRecord): void {
  stmt(
    db,
    `INSERT INTO policy_versions (version, published_at, step, source, rolled_back_from, restores, requested_by, weights_path)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(v.version, v.publishedAt, v.step, v.source, v.rolledBackFrom, v.restores, v.requestedBy, v.weightsPath);
}

export class VersionTables {
  constructor(
    private readonly db: SqliteDatabase,
    private readonly now: () => number,
  ) {}

  /** Records a publication alone (a restart's); a rollback's goes through finishRollback. */
  record(v: VersionRecord): void {
    insertVersion(this.db, v);
  }

  get(version: number): VersionRecord | undefined {
    const r = stmt(this.db, 'SELECT * FROM policy_versions WHERE version = ?').get(version) as VersionRow | undefined;
    return r && recordOf(r);
  }

  /** The newest recorded version below `version` (0, the base, when none). */
  previous(version: number): number {
    const r = stmt(this.db, 'SELECT max(version) AS v FROM policy_versions WHERE version < ?').get(version) as {
      v: number | null;
    };
    return r.v ?? 0;
  }

  /** The newest rollbacks (automatic ones have requestedBy 'guard'), newest first. */
  rollbacks(limit: number): VersionRecord[] {
    const rows = stmt(this.db, `SELECT * FROM policy_versions WHERE source = 'rollback' ORDER BY version DESC LIMIT ?`);
    return (rows.all(limit) as VersionRow[]).map(recordOf);
  }

  maxVersion(): number {
    return (stmt(this.db, 'SELECT coalesce(max(version), 0) AS v FROM policy_versions').get() as { v: number }).v;
  }

  /** Every recorded version and the base (0), newest first, with its turns and their judge scores. */
  list(servingVersion: number | null): VersionSummary[] {
    const stats = new Map<number, { turns: number; judged: number; mean: number | null }>();
    const rows = stmt(
      this.db,
      `SELECT t.policy_version AS version, count(*) AS turns,
        sum(CASE WHEN ${HAS_VERDICT} THEN 1 ELSE 0 END) AS judged,
        avg(CASE WHEN ${HAS_VERDICT} THEN j.score END) AS mean
      FROM turns t LEFT JOIN judgments j ON j.turn_id = t.id WHERE t.kind = 'main' GROUP BY t.policy_version`,
    ).all() as { version: number; turns: number; judged: number; mean: number | null }[];
    for (const r of rows) stats.set(r.version, r);
    const versions = (stmt(this.db, 'SELECT * FROM policy_versions ORDER BY version DESC').all() as VersionRow[]).map(
      (r) => ({ ...recordOf(r), guard: r.guard === null ? null : (JSON.parse(r.guard) as GuardVerdict) }),
    );
    const base = {
      version: 0,
      publishedAt: 0,
      step: 0,
      source: 'train' as const,
      rolledBackFrom: null,
      restores: null,
      requestedBy: null,
      weightsPath: null,
      guard: null,
    };
    return [...versions, base].map((v) => {
      const s = stats.get(v.version);
      return {
        ...v,
        // The base's weights are the model folder and the learner's seeded start: always there.
        weightsKept: v.version === 0 || (v.weightsPath !== null && existsSync(v.weightsPath)),
        serving: v.version === servingVersion,
        turns: s?.turns ?? 0,
        judged: s?.judged ?? 0,
        scoreMean: s?.mean ?? null,
      };
    });
  }

  /** Judge scores of a version's main-line turns with a verdict: its first `limit`, or with `newest` its last. */
  judgedScores(version: number, limit: number, newest = false): number[] {
    const rows = stmt(
      this.db,
      `SELECT j.score FROM turns t JOIN judgments j ON j.turn_id = t.id
      WHERE t.policy_version = ? AND t.kind = 'main' AND ${HAS_VERDICT} ORDER BY t.rowid ${newest ? 'DESC' : 'ASC'} LIMIT ?`,
    ).all(version, limit) as { score: number }[];
    return rows.map((r) => r.score);
  }

  verdictOf(version: number): GuardVerdict | null {
    const r = stmt(this.db, 'SELECT guard FROM policy_versions WHERE version = ?').get(version) as
      | { guard: string | null }
      | undefined;
    return r?.guard ? (JSON.parse(r.guard) as GuardVerdict) : null;
  }

  setGuard(version: number, verdict: GuardVerdict): void {
    stmt(this.db, 'UPDATE policy_versions SET guard = ? WHERE version = ?').run(JSON.stringify(verdict), version);
  }

  /** Queues a rollback request; returns its id. */
  request(target: number, by: RollbackRequester): number {
    if (!(Number.isInteger(target) && target >= 0))
      throw new RangeError(`a version is a non-negative integer, got ${String(target)}`);
    const r = stmt(
      this.db,
      `INSERT INTO rollback_requests (target, requested_by, requested_at, status) VALUES (?, ?, ?, 'pending')`,
    ).run(target, by, this.now());
    return Number(r.lastInsertRowid);
  }

  pendingRequests(): RollbackRequest[] {
    const rows = stmt(this.db, `SELECT * FROM rollback_requests WHERE status = 'pending' ORDER BY id`).all();
    return (rows as RequestRow[]).map(requestOf);
  }

  requestById(id: number): RollbackRequest | undefined {
    const r = stmt(this.db, 'SELECT * FROM rollback_requests WHERE id = ?').get(id) as RequestRow | undefined;
    return r && requestOf(r);
  }

  /** A rollback done: its version row and the request's answer, together. */
  finishRollback(requestId: number, v: VersionRecord): void {
    this.db.transaction(() => {
      insertVersion(this.db, v);
      this.answer(requestId, 'done', v.version, null);
    })();
  }

  refuse(requestId: number, message: string): void {
    this.answer(requestId, 'refused', null, message);
  }

  private answer(id: number, status: 'done' | 'refused', version: number | null, message: string | null): void {
    const r = stmt(
      this.db,
      `UPDATE rollback_requests SET status = ?, published_version = ?, message = ?, finished_at = ? WHERE id = ? AND status = 'pending'`,
    ).run(status, version, message, this.now(), id);
    if (r.changes !== 1) throw new Error(`rollback request ${id} is not pending`);
  }
}

interface VersionRow {
  version: number;
  published_at: number;
  step: number;
  source: VersionSource;
  rolled_back_from: number | null;
  restores: number | null;
  requested_by: RollbackRequester | null;
  weights_path: string | null;
  guard: string | null;
}

interface RequestRow {
  id: number;
  target: number;
  requested_by: RollbackRequester;
  requested_at: number;
  status: RollbackRequest['status'];
  published_version: number | null;
  message: string | null;
  finished_at: number | null;
}

function recordOf(r: VersionRow): VersionRecord {
  return {
    version: r.version,
    publishedAt: r.published_at,
    step: r.step,
    source: r.source,
    rolledBackFrom: r.rolled_back_from,
    restores: r.restores,
    requestedBy: r.requested_by,
    weightsPath: r.weights_path,
  };
}

function requestOf(r: RequestRow): RollbackRequest {
  return {
    id: r.id,
    target: r.target,
    requestedBy: r.requested_by,
    requestedAt: r.requested_at,
    status: r.status,
    publishedVersion: r.published_version,
    message: r.message,
    finishedAt: r.finished_at,
  };
}
