// The part of better-sqlite3 the store calls, declared here (the Kysely way) so the queries depend
// on this narrow seam rather than on the library's types, and another backend (PostgreSQL for
// several gateways) can later sit behind the same store interface.

import Database from 'better-sqlite3';

export interface RunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

export interface SqliteStatement {
  run(...params: unknown[]): RunResult;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
}

export interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): void;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): Transaction<A, R>;
  close(): void;
  readonly open: boolean;
  readonly inTransaction: boolean;
}

/**
 * A transaction function (BEGIN, deferred). `immediate` takes the write lock first: a transaction
 * that reads and then writes, while another process may write to the same file, must, or its
 * upgrade from reader to writer fails at once with SQLITE_BUSY instead of waiting.
 */
export type Transaction<A extends unknown[], R> = ((...args: A) => R) & { immediate(...args: A): R };

/** How hard each commit waits for the disk. `normal` survives a crash of the process, `full` also a power loss. */
export type Durability = 'normal' | 'full';

export function openSqlite(path: string, durability: Durability): SqliteDatabase {
  const db = new Database(path) as unknown as SqliteDatabase;
  // Before anything creates a table (or WAL mode writes the header): a new store can then give
  // freed pages back to the file system (PRAGMA incremental_vacuum, after a retention purge).
  // On an older store it takes effect at its next VACUUM.
  db.pragma('auto_vacuum = INCREMENTAL');
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`);
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  // Deleted conversations are overwritten on disk, not just unlinked from the b-tree.
  db.pragma('secure_delete = ON');
  return db;
}

const statements = new WeakMap<SqliteDatabase, Map<string, SqliteStatement>>();

/** A prepared statement, compiled once per database. */
export function stmt(db: SqliteDatabase, sql: string): SqliteStatement {
  let cache = statements.get(db);
  if (!cache) statements.set(db, (cache = new Map()));
  let s = cache.get(sql);
  if (!s) cache.set(sql, (s = db.prepare(sql)));
  return s;
}
