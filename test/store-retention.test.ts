// The retention purge against a real SQLite store whose rows carry injected timestamps (no
// sleeping): it deletes exactly the old rows and what hangs off them, keeps what the learning loop
// still needs, leaves the store consistent, and the file shrinks. Also the trainer's batch holds.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { resolveLearnConfig } from '../src/learn/config.js';
import { Trainer } from '../src/learn/trainer.js';
import { migrateUp } from '../src/store/migrations/index.js';
import { storeBytes, vacuumsIncrementally } from '../src/store/purge.js';
import { DAY_MS, RetentionPurger, type PurgeReport } from '../src/store/retention.js';
import { SessionInTrainingError } from '../src/store/session-data.js';
import { openStore, STORE_FILE, type Store } from '../src/store/store.js';
import type { Turn } from '../src/types.js';
import { freshDir } from './helpers/gateway.js';
import {
  addClosedTurn,
  claim,
  learnTurn,
  LogRecorder,
  PolicyBackendDouble,
  queueSample,
  sessionOf,
} from './helpers/learning-fixtures.js';

const NOW = 400 * DAY_MS;
const OLD = NOW - 40 * DAY_MS;
const NEW = NOW - 2 * DAY_MS;
const PAGE_OF_TEXT = 'x'.repeat(16_000);

/** A main turn of `session` completed at `at`, with 16 kB of messages (so its pages show in the file size). */
function turnAt(session: string, at: number, over: Partial<Turn> = {}): Turn {
  return learnTurn({
    sessionId: session,
    receivedAt: at - 2,
    firstTokenAt: at - 1,
    completedAt: at,
    messages: [{ role: 'user', content: PAGE_OF_TEXT }],
    ...over,
  });
}

const count = (store: Store, table: string) =>
  (store.db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
const turnIds = (store: Store) =>
  (store.db.prepare('SELECT id FROM turns ORDER BY id').all() as { id: string }[]).map((r) => r.id);

function assertConsistent(store: Store): void {
  assert.deepEqual(store.db.pragma('foreign_key_check'), []);
  assert.deepEqual(store.db.pragma('integrity_check'), [{ integrity_check: 'ok' }]);
}

/** A trainer whose batch is in progress until `release()` (the test double's trainBatch waits). */
function trainerInBatch(store: Store) {
  const backend = new PolicyBackendDouble();
  let release!: () => void;
  backend.gate = new Promise<void>((r) => (release = r));
  const config = resolveLearnConfig({ batchSize: 1, maxStaleVersions: 4, checkpointEvery: 1, pollMs: 60_000 });
  const trainer = new Trainer(store.learning, backend, config, new LogRecorder().log);
  return { trainer, backend, release };
}

async function purgeOnce(store: Store, batchRows: number): Promise<{ report: PurgeReport; log: LogRecorder }> {
  const log = new LogRecorder();
  const purger = RetentionPurger.start(store, { days: 30, batchRows, now: () => NOW, log: log.log });
  const fields = await log.next('retention_purge');
  await purger.stop();
  return { report: fields as unknown as PurgeReport, log };
}

test('a purge deletes exactly the old rows with their payloads, next states, votes, judgments and samples; keeps what learning needs; the store stays consistent and shrinks', async () => {
  const store = openStore({ dir: freshDir('retention-'), now: () => NOW });
  assert.ok(vacuumsIncrementally(store.db), 'a new store is created with auto_vacuum = INCREMENTAL');

  // Old: 30 judged turns with samples (one trained), 10 closed and not judged yet, 5 side turns.
  const oldJudged = Array.from({ length: 30 }, (_, i) => turnAt(`old${i % 3}`, OLD + i));
  const oldSamples = oldJudged.map((t) => queueSample(store, t));
  Array.from({ length: 10 }, (_, i) => addClosedTurn(store, turnAt('old0', OLD + 100 + i)));
  const oldSide = Array.from({ length: 5 }, (_, i) => turnAt('old1', OLD + 200 + i, { kind: 'side' }));
  for (const t of oldSide) store.recordTurn(sessionOf('old1'), t);
  // A session seen long ago with no turns at all goes too; one seen recently stays.
  store.recordTurn({ ...sessionOf('empty-old'), seenAt: OLD }, null);
  store.recordTurn({ ...sessionOf('empty-new'), seenAt: NEW }, null);
  store.db.prepare('UPDATE sessions SET last_seen_at = ? WHERE id LIKE ?').run(OLD, 'old%');

  // Old, but protected: a turn being judged, an open main turn, a turn whose sample a batch holds.
  const claimedOld = addClosedTurn(store, turnAt('keep', OLD + 300));
  claim(store, claimedOld.id);
  const openOld = turnAt('keep', OLD + 301);
  store.recordTurn(sessionOf('keep'), openOld);
  const inBatchOld = turnAt('keep', OLD + 302);
  const heldSample = queueSample(store, inBatchOld);
  // New rows of every kind.
  const fresh = Array.from({ length: 8 }, (_, i) => turnAt('new', NEW + i));
  for (const t of fresh.slice(0, 4)) queueSample(store, t);
  for (const t of fresh.slice(4)) addClosedTurn(store, t);

  // The batch takes the oldest queued sample first: train the old ones away except the held one.
  store.db
    .prepare('UPDATE samples SET status = ? WHERE id != ? AND turn_id NOT IN (?, ?, ?, ?)')
    .run('stale', heldSample, ...fresh.slice(0, 4).map((t) => t.id));
  const { trainer, release, backend } = trainerInBatch(store);
  const training = trainer.trainOnce();
  assert.deepEqual(backend.calls, ['train'], 'trainBatch was called at once, and waits');
  assert.deepEqual(
    store.db.prepare('SELECT sample_id FROM batch_holds').all(),
    [{ sample_id: heldSample }],
    'the batch in progress holds its sample',
  );

  const kept = [claimedOld, openOld, inBatchOld, ...fresh].map((t) => t.id).sort();
  store.db.pragma('wal_checkpoint(TRUNCATE)');
  const bytesBefore = storeBytes(store.path);
  const { report } = await purgeOnce(store, 7);

  assert.deepEqual(turnIds(store), kept);
  const gone = 30 + 10 + 5;
  assert.deepEqual(
    {
      turns: report.turns,
      payloads: report.payloads,
      nextStates: report.nextStates,
      queueEntries: report.queueEntries,
      judgments: report.judgments,
      votes: report.votes,
      samples: report.samples,
      sessions: report.sessions,
      kept: report.kept,
    },
    {
      turns: gone,
      payloads: gone,
      nextStates: 40,
      queueEntries: 40,
      judgments: 30,
      votes: 90,
      samples: 30,
      sessions: 4, // old0, old1, old2, empty-old
      kept: 3,
    },
  );
  assert.ok(report.transactions >= Math.ceil(gone / 7), `${report.transactions} transactions of at most 7 turns`);
  for (const id of oldSamples) assert.equal(store.learning.sample(id), undefined);
  assert.deepEqual(
    (store.db.prepare('SELECT id FROM sessions ORDER BY id').all() as { id: string }[]).map((r) => r.id),
    ['empty-new', 'keep', 'new'],
  );
  // Every remaining table row belongs to a remaining turn: counts match the survivors exactly.
  assert.deepEqual(
    ['turn_payloads', 'next_states', 'closed_turns', 'judgments', 'judge_votes', 'samples'].map((t) => count(store, t)),
    [11, 10, 10, 5, 15, 5],
  );
  assertConsistent(store);
  assert.equal(store.db.pragma('freelist_count', { simple: true }), 0, 'the freed pages were given back');
  const bytesAfter = storeBytes(store.path);
  assert.equal(report.bytesAfter, bytesAfter);
  assert.ok(bytesAfter < bytesBefore - gone * PAGE_OF_TEXT.length * 0.9, `${bytesBefore} -> ${bytesAfter} bytes`);

  // The batch commits its held sample (it was not taken from under it), and lets go of it.
  release();
  assert.equal(await training, true);
  assert.equal(store.learning.sample(heldSample)!.status, 'trained');
  assert.equal(count(store, 'batch_holds'), 0);
  // Once judged and trained, the protected turns go at the next purge; the open one stays open.
  store.finishClosedTurns([claimedOld.id], 'pending');
  const second = await purgeOnce(store, 200);
  assert.equal(second.report.turns, 2);
  assert.deepEqual(turnIds(store), [openOld.id, ...fresh.map((t) => t.id)].sort());
  assertConsistent(store);
  store.close();
});

test('a purge with nothing old deletes nothing and still logs one line of counts, no text', async () => {
  const store = openStore({ dir: freshDir('retention-none-'), now: () => NOW });
  queueSample(store, turnAt('s', NEW));
  const { report, log } = await purgeOnce(store, 200);
  assert.equal(report.turns, 0);
  assert.equal(count(store, 'turns'), 1);
  const lines = log.named('retention_purge');
  assert.equal(lines.length, 1);
  assert.ok(!JSON.stringify(lines).includes('question'), 'no conversation text');
  assert.ok(Object.values(lines[0]!).every((v) => typeof v === 'number'));
  store.close();
});

test('a store made before incremental vacuum is converted once (logged), then shrinks at each purge', async () => {
  const dir = freshDir('retention-legacy-');
  const raw = new Database(join(dir, STORE_FILE));
  raw.pragma('journal_mode = WAL');
  migrateUp(raw as never, dir);
  raw.close();
  const store = openStore({ dir, now: () => NOW });
  assert.equal(vacuumsIncrementally(store.db), false, 'auto_vacuum cannot change on a store with tables');
  for (let i = 0; i < 20; i++) queueSample(store, turnAt('s', OLD + i));
  const log = new LogRecorder();
  // Each fixture turn has 7 prompt + completion tokens: a bound of 10 lets one turn into each transaction.
  const purger = RetentionPurger.start(store, { days: 30, batchTokens: 10, now: () => NOW, log: log.log });
  assert.equal(log.named('retention_vacuum').length, 1);
  assert.ok(vacuumsIncrementally(store.db));
  const report = (await log.next('retention_purge')) as unknown as PurgeReport;
  await purger.stop();
  assert.equal(report.turns, 20);
  assert.equal(report.transactions, 20, 'one turn per transaction');
  assert.ok(report.bytesAfter < report.bytesBefore / 2, `${report.bytesBefore} -> ${report.bytesAfter}`);
  assertConsistent(store);
  store.close();
});

test('deleting a session refuses, deleting nothing, while a batch in progress holds its samples; a failed batch lets go', async () => {
  const store = openStore({ dir: freshDir('retention-hold-'), now: () => NOW });
  const t = turnAt('busy', NEW);
  const id = queueSample(store, t);
  const { trainer, release, backend } = trainerInBatch(store);
  backend.failTrain = new Error('learner died');
  const training = trainer.trainOnce();
  assert.deepEqual(backend.calls, ['train'], 'trainBatch was called at once, and waits');
  assert.throws(() => store.deleteSession('busy'), SessionInTrainingError);
  assert.throws(() => store.deleteSession('busy'), /1 sample\(s\) in the training batch in progress/);
  assert.equal(count(store, 'turns'), 1);
  // A session opting out meanwhile keeps the held sample for the batch, and records its turn.
  store.recordTurn(sessionOf('busy', false), null);
  assert.equal(store.learning.sample(id)!.status, 'queued');
  release();
  await assert.rejects(training, /learner died/);
  assert.equal(count(store, 'batch_holds'), 0, 'the failed batch released its hold');
  assert.equal(store.deleteSession('busy'), 1);
  assert.equal(count(store, 'samples'), 0);
  assertConsistent(store);
  store.close();
});

test('holds left by a process that is gone do not block deletion; reopening to serve drops them', () => {
  const dir = freshDir('retention-dead-');
  const store = openStore({ dir, now: () => NOW });
  const a = queueSample(store, turnAt('a', NEW));
  const b = queueSample(store, turnAt('b', NEW));
  // A pid far above any Linux pid_max runs nowhere.
  store.db.prepare('INSERT INTO batch_holds (sample_id, holder_pid, held_at) VALUES (?, ?, ?)').run(a, 2 ** 30, NOW);
  store.db.prepare('INSERT INTO batch_holds (sample_id, holder_pid, held_at) VALUES (?, ?, ?)').run(b, 2 ** 30, NOW);
  assert.equal(store.deleteSession('a'), 1);
  assert.equal(count(store, 'batch_holds'), 0);
  store.db
    .prepare('INSERT INTO batch_holds (sample_id, holder_pid, held_at) VALUES (?, ?, ?)')
    .run(b, process.pid, NOW);
  store.close();
  const reopened = openStore({ dir, now: () => NOW });
  assert.equal(count(reopened, 'batch_holds'), 0);
  reopened.close();
});
