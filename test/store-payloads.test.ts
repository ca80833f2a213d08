// Schema 3's turn_payloads: migrating a schema-2 store that holds every kind of row keeps every
// value, rowid and foreign key (no cascade from rebuilding `turns`), down restores schema 2's
// layout, a foreign-key violation rolls the rebuild back, and the updates a turn gets after its
// insert (closure, re-template check) no longer rewrite its payload.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { LearningTables } from '../src/store/learning.js';
import { MIGRATIONS, migrateDown, migrateUp, schemaVersion } from '../src/store/migrations/index.js';
import { enqueueClosedTurn, insertTurn, setQueueStatus, upsertSession } from '../src/store/queries.js';
import { nextStateToRow, rowToExportLine, turnToRow, type ExportLine } from '../src/store/records.js';
import { openSqlite, type SqliteDatabase } from '../src/store/sqlite.js';
import { openStore, STORE_FILE } from '../src/store/store.js';
import type { TurnWithNextStateRow } from '../src/store/tables.js';
import type { ChatMessage } from '../src/chat/messages.js';
import type { NextState, Turn } from '../src/types.js';
import { freshDir } from './helpers/gateway.js';
import { judgedFixture, learnTurn, rlDraft, stepMetrics } from './helpers/learning-fixtures.js';

/** A database at `version`, made by the migrations themselves (as an older build left it). */
function databaseAt(version: number): { dir: string; db: SqliteDatabase } {
  const dir = freshDir(`store-v${version}-`);
  const db = openSqlite(join(dir, STORE_FILE), 'normal');
  for (const m of MIGRATIONS.filter((x) => x.version <= version)) {
    db.exec(m.up);
    db.pragma(`user_version = ${m.version}`);
  }
  return { dir, db };
}

// Schema 2's turns row is the flat row turnToRow builds, one column per key.
function insertV2Turn(
  db: SqliteDatabase,
  turn: Turn,
  closure?: { reason: 'next_state' | 'no_next_state' | 'cancelled'; closedAt: number },
): void {
  const row = turnToRow(turn, closure);
  const columns = Object.keys(row);
  db.prepare(`INSERT INTO turns (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`).run(row);
}

// Schema 2's next_states row: schema 6 added raw_messages.
function insertV2NextState(db: SqliteDatabase, turnId: string, next: NextState): void {
  const { raw_messages: _raw, ...row } = nextStateToRow(turnId, next);
  db.prepare(
    'INSERT INTO next_states (turn_id, next_turn_id, messages, arrived_at) VALUES (@turn_id, @next_turn_id, @messages, @arrived_at)',
  ).run(row);
}

const TABLES = [
  'closure_reasons',
  'sessions',
  'next_states',
  'closed_turns',
  'judgments',
  'judge_votes',
  'samples',
  'train_steps',
];

/** Every row of every table with its rowid, turns in schema 2's shape whatever the schema. */
function dump(db: SqliteDatabase): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {};
  for (const t of TABLES) out[t] = db.prepare(`SELECT rowid AS _rowid, * FROM ${t} ORDER BY rowid`).all();
  // Schema 4's step queue columns, NULL on steps trained before it, are checked apart.
  out.train_steps = out.train_steps!.map((r) => {
    const { samples_queued: _queued, turns_waiting: _waiting, ...row } = r as Record<string, unknown>;
    return row;
  });
  // Schema 5's raw next-state messages, NULL on next states stored before it, likewise.
  out.next_states = out.next_states!.map((r) => {
    const { raw_messages: _raw, ...row } = r as Record<string, unknown>;
    return row;
  });
  // Schema 7's rollout grouping, sample rewards and step indexes (NULL on rows before it), and its closure reason.
  const without = (rows: unknown[], columns: string[]) =>
    rows.map((r) => Object.fromEntries(Object.entries(r as object).filter(([k]) => !columns.includes(k))));
  out.sessions = without(out.sessions!, ['task_id', 'rollout_index', 'rollout_count']);
  out.samples = without(out.samples!, ['reward', 'step_index']);
  out.closure_reasons = out.closure_reasons!.filter((r) => (r as { reason: string }).reason !== 'episode_end');
  out.sqlite_sequence = db.prepare('SELECT * FROM sqlite_sequence ORDER BY name').all();
  out.turns =
    schemaVersion(db) >= 3
      ? db
          .prepare(
            'SELECT t.rowid AS _rowid, t.*, p.* FROM turns t JOIN turn_payloads p ON p.turn_id = t.id ORDER BY t.rowid',
          )
          .all()
          .map((r) => {
            const { turn_id: _payloadKey, ...row } = r as Record<string, unknown>;
            return row;
          })
      : db.prepare('SELECT rowid AS _rowid, * FROM turns ORDER BY rowid').all();
  return out;
}

/** The schema as text, ignoring layout and the quotes ALTER TABLE RENAME puts around a name. */
function schema(db: SqliteDatabase): string[] {
  return (
    db.prepare(`SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name`).all() as { sql: string }[]
  ).map((r) => r.sql.replace(/"(\w+)"/g, '$1').replace(/\s+/g, ' '));
}

const foreignKeyCheck = (db: SqliteDatabase) => db.pragma('foreign_key_check');

test("migration 3 moves a schema-2 store's payloads to turn_payloads: every row, value and rowid intact, nothing cascaded away; down restores schema 2", () => {
  const { dir, db } = databaseAt(2);
  const big = 'long agent session '.repeat(3000); // overflow pages
  const turns = {
    judged: learnTurn({
      sessionId: 'a',
      messages: [{ role: 'user', content: big }],
      retemplate: { match: true, renderedTokens: 7, recordedTokens: 7 },
    }),
    queued: learnTurn({
      sessionId: 'a',
      tools: [{ type: 'function', function: { name: 'read', parameters: { type: 'object' } } }],
    }),
    open: learnTurn({ sessionId: 'b', promptIds: Array.from({ length: 5000 }, (_, i) => i * 7) }),
    side: learnTurn({ sessionId: null, sessionSource: 'none', kind: 'side' }),
    cancelled: learnTurn({ sessionId: 'b', finishReason: 'cancelled' }),
    idle: learnTurn({ sessionId: 'b' }),
  };
  upsertSession(db, { id: 'a', source: 'x-session-id', created_at: 1, last_seen_at: 2, learning: 1 });
  upsertSession(db, { id: 'b', source: 'x-session-id', created_at: 1, last_seen_at: 3, learning: 0 });
  insertV2Turn(db, turns.judged, { reason: 'next_state', closedAt: 2001 });
  // A gap in the rowids, which a copy must keep (export reads turns in rowid order).
  const deleted = learnTurn({ sessionId: 'a' });
  insertV2Turn(db, deleted);
  insertV2Turn(db, turns.queued, { reason: 'next_state', closedAt: 2002 });
  insertV2Turn(db, turns.open);
  insertV2Turn(db, turns.side);
  insertV2Turn(db, turns.cancelled, { reason: 'cancelled', closedAt: 2003 });
  insertV2Turn(db, turns.idle, { reason: 'no_next_state', closedAt: 2004 });
  db.prepare('DELETE FROM turns WHERE id = ?').run(deleted.id);
  for (const t of [turns.judged, turns.queued]) {
    const thanks: ChatMessage = { role: 'user', content: `thanks for ${t.id}` };
    insertV2NextState(db, t.id, { messages: [thanks], nextTurnId: `${t.id}_next`, arrivedAt: 2000 });
  }
  for (const t of [turns.judged, turns.queued]) enqueueClosedTurn(db, t.id, 'pending', 2005);
  for (const t of [turns.cancelled, turns.idle]) enqueueClosedTurn(db, t.id, 'excluded', 2005);
  const learning = new LearningTables(db, () => 3000);
  for (const t of [turns.judged, turns.queued]) setQueueStatus(db, t.id, 'claimed', 2006, true);
  // recordJudgment writes schema 5's no_sample column: it exists only for these two calls.
  db.exec('ALTER TABLE judgments ADD COLUMN no_sample TEXT');
  const trained = learning.recordJudgment(
    judgedFixture(turns.judged.id),
    rlDraft(turns.judged, { teacherLogprobs: [-1, -2, -3], teacherVersion: 0, source: 'opd+rl' }),
  )!;
  learning.recordJudgment(judgedFixture(turns.queued.id), rlDraft(turns.queued));
  db.exec('ALTER TABLE judgments DROP COLUMN no_sample');
  // A step as schema 2's build recorded it (recordBatch writes schema 4's columns).
  db.prepare(`UPDATE samples SET status = 'trained', trained_step = 1, trained_at = 3000 WHERE id = ?`).run(trained);
  const m = stepMetrics(1);
  db.prepare(`INSERT INTO train_steps (step, batch, version, samples, tokens, loss, grad_norm, applied, lr, clip_fraction, approx_kl, entropy, tis_mean,
    rollout_abs_diff, reward_mean, hints, stale_dropped, seconds, yielded_ms, tokens_per_second, created_at) VALUES (1, 1, 1, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, 1, 1, 0, ?, ?, ?, 3000)`).run(
    m.samples,
    m.tokens,
    m.loss,
    m.gradNorm,
    m.lr,
    m.clipFraction,
    m.approxKl,
    m.entropy,
    m.tisMean,
    m.rolloutAbsDiff,
    m.seconds,
    m.yieldedMs,
    m.tokensPerSecond,
  );
  const before = dump(db);
  const v2Schema = schema(db);
  // Export as schema 2's build read it: the turn row itself, with its next state (no raw messages before schema 5).
  const exportBefore = (
    db
      .prepare(`SELECT t.*, n.next_turn_id AS ns_next_turn_id, n.messages AS ns_messages, n.arrived_at AS ns_arrived_at,
    NULL AS ns_raw_messages FROM turns t LEFT JOIN next_states n ON n.turn_id = t.id ORDER BY t.rowid`)
      .all() as TurnWithNextStateRow[]
  ).map(rowToExportLine);
  db.close();
  assert.equal(before.turns!.length, 6);
  for (const t of ['next_states', 'closed_turns', 'judgments', 'judge_votes', 'samples', 'train_steps'])
    assert.ok(before[t]!.length > 0, t);

  const store = openStore({ dir });
  assert.equal(schemaVersion(store.db), 9);
  const raw = store.db.prepare('SELECT raw_messages FROM next_states').all();
  assert.deepEqual(raw, [{ raw_messages: null }, { raw_messages: null }], 'stored as received before schema 6');
  assert.deepEqual(
    store.db.prepare('SELECT samples_queued, turns_waiting FROM train_steps').all(),
    [{ samples_queued: null, turns_waiting: null }],
    'unknown for a step trained before schema 4',
  );
  assert.equal(store.db.pragma('foreign_keys', { simple: true }), 1, 'foreign keys back on');
  assert.deepEqual(foreignKeyCheck(store.db), []);
  const judgmentsAt5 = before.judgments!.map((r) => ({ ...(r as object), no_sample: null }));
  assert.deepEqual(dump(store.db), { ...before, judgments: judgmentsAt5 }, 'every row of every table, with its rowid');
  assert.deepEqual(
    (store.db.pragma('table_info(turns)') as { name: string }[]).filter((c) =>
      ['messages', 'prompt_ids', 'response'].includes(c.name),
    ),
    [],
  );
  const exported: ExportLine[] = [...store.exportLines()];
  assert.deepEqual(exported, exportBefore, 'export reads the same records, in the same order');
  for (const t of Object.values(turns)) assert.deepEqual(store.getTurn(t.id)!.turn, t);
  assert.deepEqual(store.openMainTurns(), [turns.open]);
  const queued = store.learning.queuedSamples(10);
  assert.deepEqual(
    queued.map((s) => [s.turnId, s.promptIds, s.completionIds, s.rolloutLogprobs]),
    [[turns.queued.id, turns.queued.promptIds, turns.queued.completionIds, turns.queued.logprobs]],
  );
  assert.deepEqual(store.learning.sample(trained)!.teacherLogprobs, [-1, -2, -3]);
  // Indexes rebuilt, and the new table's checks and cross-table trigger in place.
  const names = (type: string) =>
    (
      store.db
        .prepare(`SELECT name FROM sqlite_master WHERE type = ? AND name NOT LIKE 'sqlite_%' ORDER BY name`)
        .all(type) as { name: string }[]
    ).map((r) => r.name);
  assert.deepEqual(names('index'), [
    'closed_turns_by_status',
    'feedback_outcome',
    'feedback_turn',
    'rollback_requests_pending',
    'samples_by_status',
    'sessions_by_task',
    'turns_by_completed',
    'turns_by_session',
    'turns_open_main',
  ]);
  assert.deepEqual(names('trigger'), ['turn_payloads_match_turn']);
  // New turns and closures work on the migrated store.
  const later = learnTurn({ sessionId: 'a' });
  store.recordTurn({ id: 'a', source: 'x-session-id', seenAt: 1, learning: true }, later);
  store.closeTurn({ turnId: turns.open.id, reason: 'next_state', closedAt: 4000, nextState: null, learning: true });
  assert.deepEqual(store.getTurn(later.id)!.turn, later);

  // Down to 2: schema 2's layout, word for word, with all of its data.
  store.db.prepare('DELETE FROM turns WHERE id = ?').run(later.id);
  store.db.prepare('DELETE FROM closed_turns WHERE turn_id = ?').run(turns.open.id);
  store.db.prepare('UPDATE turns SET closure_reason = NULL, closed_at = NULL WHERE id = ?').run(turns.open.id);
  migrateDown(store.db, 2);
  assert.equal(schemaVersion(store.db), 2);
  assert.equal(store.db.pragma('foreign_keys', { simple: true }), 1);
  assert.deepEqual(schema(store.db), v2Schema);
  assert.deepEqual(foreignKeyCheck(store.db), []);
  assert.deepEqual(dump(store.db), before);

  assert.deepEqual(migrateUp(store.db, dir), [3, 4, 5, 6, 7, 8, 9]);
  assert.deepEqual(dump(store.db), { ...before, judgments: judgmentsAt5 });
  assert.deepEqual([...store.exportLines()], exportBefore);
  store.close();
});

test('a table rebuild that would leave a row without its parent rolls back, with foreign keys back on', () => {
  const { db } = databaseAt(2);
  // A schema-2 store written with foreign keys off: a next state whose turn is gone.
  db.pragma('foreign_keys = OFF');
  insertV2NextState(db, 'ghost', { messages: [], nextTurnId: 'x', arrivedAt: 1 });
  db.pragma('foreign_keys = ON');
  assert.throws(
    () => migrateUp(db, 'test'),
    /migration 3 \(turn-payloads\) rolled back: PRAGMA foreign_key_check finds 1 rows without their parent row, e\.g\. next_states rowid 1 \(no row in turns\)/,
  );
  assert.equal(schemaVersion(db), 2);
  assert.equal(db.pragma('foreign_keys', { simple: true }), 1);
  assert.deepEqual(db.prepare(`SELECT name FROM sqlite_master WHERE name IN ('turn_payloads', 'turns_new')`).all(), []);
  assert.ok(
    (db.pragma('table_info(turns)') as { name: string }[]).some((c) => c.name === 'prompt_ids'),
    'turns untouched',
  );
  // PRAGMA foreign_keys cannot change inside a transaction, so the rebuild refuses to run in one.
  db.prepare('DELETE FROM next_states').run();
  assert.throws(
    () => db.transaction(() => migrateUp(db, 'test'))(),
    /migration 3 \(turn-payloads\) rebuilds tables and cannot run inside a transaction/,
  );
  assert.equal(schemaVersion(db), 2);
  assert.deepEqual(migrateUp(db, 'test'), [3, 4, 5, 6, 7, 8, 9]);
  db.close();
});

test('payload rows: checked against their turn, inserted with it or not at all, deleted with its session', () => {
  const store = openStore({ dir: freshDir('store-') });
  const t = learnTurn();
  const row = turnToRow(t);
  store.recordTurn({ id: 's1', source: 'x-session-id', seenAt: 1, learning: true }, null);
  const insert = (over: object) => insertTurn(store.db, { ...row, ...over });
  assert.throws(() => insert({ prompt_tokens: 3 }), /CHECK constraint failed: turn_payloads_match_turn/);
  assert.throws(
    () => insert({ logprobs: row.logprobs.subarray(8) }),
    /CHECK constraint failed: length\(logprobs\) = 2 \* length\(completion_ids\)/,
  );
  assert.equal(store.counts().turns, 0, 'a refused payload takes its turn row with it');
  store.recordTurn({ id: 's1', source: 'x-session-id', seenAt: 1, learning: true }, t);
  assert.deepEqual(store.db.prepare('SELECT turn_id FROM turn_payloads').all(), [{ turn_id: t.id }]);
  store.deleteSession('s1');
  assert.deepEqual(store.db.prepare('SELECT count(*) AS n FROM turn_payloads').get(), { n: 0 });
  store.close();
});

test('closing a turn or saving its re-template check writes a few pages, not its 300 kB payload', () => {
  const dir = freshDir('store-');
  const store = openStore({ dir });
  const wal = join(dir, `${STORE_FILE}-wal`);
  const pageSize = store.db.pragma('page_size', { simple: true }) as number;
  // Frames appended to the WAL by `write`, from an empty WAL.
  const frames = (write: () => void): number => {
    store.db.pragma('wal_checkpoint(TRUNCATE)');
    assert.equal(statSync(wal).size, 0);
    write();
    return (statSync(wal).size - 32) / (24 + pageSize);
  };
  const t = learnTurn({
    sessionId: 'long',
    messages: [
      { role: 'system', content: 'x'.repeat(40_000) },
      { role: 'user', content: 'y'.repeat(60_000) },
    ],
    promptIds: Array.from({ length: 50_000 }, (_, i) => i),
  });
  const inserted = frames(() => store.recordTurn({ id: 'long', source: 'x-session-id', seenAt: 1, learning: true }, t));
  assert.ok(inserted > 70, `the insert writes the payload (${inserted} pages)`);
  const retemplated = frames(() =>
    store.setRetemplates([[t.id, { match: true, renderedTokens: 50_003, recordedTokens: 50_003 }]]),
  );
  const closed = frames(() =>
    store.closeTurn({
      turnId: t.id,
      reason: 'next_state',
      closedAt: 9,
      learning: true,
      nextState: { messages: [{ role: 'user', content: 'ok' }], nextTurnId: 'n', arrivedAt: 9 },
    }),
  );
  assert.ok(retemplated <= 2, `re-template check: ${retemplated} pages`);
  // The turn's page, its open-turn index entry, and the next state's and queue entry's pages.
  assert.ok(closed <= 10, `closure: ${closed} pages`);
  assert.deepEqual(store.getTurn(t.id)!.turn, {
    ...t,
    retemplate: { match: true, renderedTokens: 50_003, recordedTokens: 50_003 },
  });
  store.close();
});
