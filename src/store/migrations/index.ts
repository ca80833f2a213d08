// Numbered migrations, applied in order. The database's `PRAGMA user_version` is the number of the
// last one applied. Add a file NNN-name.ts and list it here; never edit one that has shipped.
// Numbers increase but need not be contiguous: reverting one leaves the number of the one before.

import type { SqliteDatabase } from '../sqlite.js';
import { migration001 } from './001-initial.js';
import { migration002 } from './002-learning.js';
import { migration003 } from './003-turn-payloads.js';
import { migration004 } from './004-step-queues.js';
import { migration005 } from './005-too-long.js';
import { migration006 } from './006-next-state-raw.js';
import { migration007 } from './007-feedback-steps.js';
import { migration008 } from './008-retention.js';
import { migration009 } from './009-policy-versions.js';

export interface Migration {
  version: number;
  name: string;
  up: string;
  down: string;
  /**
   * It drops and recreates a table others reference (SQLite's 12-step rebuild). It then runs with
   * foreign keys off, or dropping the parent would delete its children by cascade, and commits
   * only when PRAGMA foreign_key_check finds no row without its parent.
   */
  rebuildsTables?: boolean;
}

export const MIGRATIONS: readonly Migration[] = [
  migration001,
  migration002,
  migration003,
  migration004,
  migration005,
  migration006,
  migration007,
  migration008,
  migration009,
];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

export class StoreVersionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreVersionError';
  }
}

export function schemaVersion(db: SqliteDatabase): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/** Applies every migration above the current version, each in its own transaction. */
export function migrateUp(db: SqliteDatabase, where: string): number[] {
  const current = schemaVersion(db);
  if (current > LATEST_VERSION) {
    throw new StoreVersionError(
      `the store at ${where} has schema ${current}, newer than this build knows (${LATEST_VERSION}): upgrade openclaw-rl`,
    );
  }
  const applied: number[] = [];
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue;
    apply(db, m, m.up, m.version);
    applied.push(m.version);
  }
  return applied;
}

/** Reverts migrations down to `target` (tests and manual rollbacks). */
export function migrateDown(db: SqliteDatabase, target: number): void {
  for (let i = MIGRATIONS.length - 1; i >= 0; i--) {
    const m = MIGRATIONS[i]!;
    if (m.version <= target || m.version > schemaVersion(db)) continue;
    apply(db, m, m.down, i === 0 ? 0 : MIGRATIONS[i - 1]!.version);
  }
}

/** Runs one direction of a migration in its own transaction, leaving the schema at `version`. */
function apply(db: SqliteDatabase, m: Migration, sql: string, version: number): void {
  const run = db.transaction(() => {
    db.exec(sql);
    if (m.rebuildsTables) assertNoOrphans(db, m);
    db.pragma(`user_version = ${version}`);
  });
  if (!m.rebuildsTables) return run();
  const foreignKeys = db.pragma('foreign_keys', { simple: true }) as number;
  db.pragma('foreign_keys = OFF');
  try {
    // PRAGMA foreign_keys is a silent no-op inside a transaction.
    if (db.pragma('foreign_keys', { simple: true }) !== 0)
      throw new Error(`migration ${m.version} (${m.name}) rebuilds tables and cannot run inside a transaction`);
    run();
  } finally {
    db.pragma(`foreign_keys = ${foreignKeys}`);
  }
}

function assertNoOrphans(db: SqliteDatabase, m: Migration): void {
  const orphans = db.pragma('foreign_key_check') as { table: string; rowid: number | null; parent: string }[];
  if (orphans.length === 0) return;
  const some = orphans
    .slice(0, 5)
    .map((o) => `${o.table} rowid ${o.rowid} (no row in ${o.parent})`)
    .join(', ');
  throw new Error(
    `migration ${m.version} (${m.name}) rolled back: PRAGMA foreign_key_check finds ${orphans.length} rows without their parent row, e.g. ${some}`,
  );
}
