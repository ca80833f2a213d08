// Numbered migrations, applied in order. The database's `PRAGMA user_version` is the number of the
// last one applied. Add a file NNN-name.ts and list it here; never edit one that has shipped.

import type { SqliteDatabase } from '../sqlite.js';
import { migration001 } from './001-initial.js';
import { migration002 } from './002-learning.js';

export interface Migration {
  version: number;
  name: string;
  up: string;
  down: string;
}

export const MIGRATIONS: readonly Migration[] = [migration001, migration002];

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
    throw new StoreVersionError(`the store at ${where} has schema ${current}, newer than this build knows (${LATEST_VERSION}): upgrade openclaw-rl`);
  }
  const applied: number[] = [];
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue;
    db.transaction(() => {
      db.exec(m.up);
      db.pragma(`user_version = ${m.version}`);
    })();
    applied.push(m.version);
  }
  return applied;
}

/** Reverts migrations down to `target` (tests and manual rollbacks). */
export function migrateDown(db: SqliteDatabase, target: number): void {
  for (const m of [...MIGRATIONS].reverse()) {
    if (m.version <= target || m.version > schemaVersion(db)) continue;
    db.transaction(() => {
      db.exec(m.down);
      db.pragma(`user_version = ${m.version - 1}`);
    })();
  }
}
