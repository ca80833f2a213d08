// The SQLite store: migrations, WAL, bit-exact round trips of token data, closures with next
// states and the learning queue, constraint checks, export, and deleting a session's data.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { LATEST_VERSION, migrateDown, migrateUp, schemaVersion } from '../src/store/migrations/index.js';
import { decodeFloats, decodeIds, encodeFloats, encodeIds, turnToRow } from '../src/store/records.js';
import { insertTurn } from '../src/store/queries.js';
import type { SqliteDatabase } from '../src/store/sqlite.js';
import { openStore, STORE_FILE } from '../src/store/store.js';
import type { Turn } from '../src/types.js';
import { freshDir } from './helpers/gateway.js';

function turn(id: string, over: Partial<Turn> = {}): Turn {
  return {
    id,
    sessionId: 's1',
    sessionSource: 'affinity',
    kind: 'main',
    kindReason: 'header',
    compaction: 2,
    traceId: 'ab'.repeat(16),
    model: 'main-model',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'héllo 🌍' }] }],
    tools: [{ type: 'function', function: { name: 'read', parameters: { type: 'object' } } }],
    sampling: {
      temperature: 0.7,
      topP: 0.9,
      topK: 0,
      maxTokens: 16,
      stop: ['\n\n'],
      seed: 4242,
      topLogprobs: 0,
      defaultsFrom: 'generation_config',
    },
    promptIds: [1, 151643, 2_000_000_000, 0],
    completionIds: [7, 8, 9],
    logprobs: [-0.1, -1e-300, -Infinity],
    sampledLogprobs: [-Math.PI, 0, -5e-324],
    response: {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"path":"a"}' } }],
    },
    finishReason: 'stop_token',
    policyVersion: 3,
    receivedAt: 1000,
    firstTokenAt: 1010,
    completedAt: 1020,
    toolCallErrors: [],
    retemplate: null,
    ...over,
  };
}

const session = (id = 's1', learning = true) => ({ id, source: 'affinity' as const, seenAt: 1000, learning });

test('migrations: fresh store at the latest version, WAL, reopen is a no-op, down then up works', () => {
  const dir = freshDir('store-');
  const store = openStore({ dir });
  assert.equal(store.path, join(dir, STORE_FILE));
  assert.equal(schemaVersion(store.db), LATEST_VERSION);
  assert.equal(store.db.pragma('journal_mode', { simple: true }), 'wal');
  assert.equal(store.db.pragma('foreign_keys', { simple: true }), 1);
  store.close();
  const again = openStore({ dir });
  assert.deepEqual(migrateUp(again.db, 'x'), []);
  migrateDown(again.db, 0);
  assert.equal(schemaVersion(again.db), 0);
  // sqlite_sequence (made by AUTOINCREMENT in schema 2) is SQLite's own and cannot be dropped.
  assert.equal(
    (
      again.db
        .prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .get() as { n: number }
    ).n,
    0,
  );
  assert.deepEqual(migrateUp(again.db, 'x'), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const reasons = again.db.prepare('SELECT reason FROM closure_reasons ORDER BY reason').all() as { reason: string }[];
  assert.deepEqual(
    reasons.map((r) => r.reason),
    ['cancelled', 'diverged', 'episode_end', 'next_state', 'no_next_state', 'superseded'],
  );
  again.close();
});

test('a store written by a newer build is refused with what to do', () => {
  const dir = freshDir('store-');
  openStore({ dir }).close();
  const raw = new Database(join(dir, STORE_FILE));
  raw.pragma(`user_version = ${LATEST_VERSION + 1}`);
  raw.close();
  assert.throws(
    () => openStore({ dir }),
    new RegExp(
      `has schema ${LATEST_VERSION + 1}, newer than this build knows \\(${LATEST_VERSION}\\): upgrade openclaw-rl`,
    ),
  );
});

test('token ids and log-probs round-trip bit for bit', () => {
  const ids = [0, 1, 151935, 2 ** 31 - 1, -1];
  assert.deepEqual(decodeIds(encodeIds(ids)), ids);
  assert.deepEqual([...encodeIds([1, -2])], [1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff], 'int32 little-endian');
  for (const bad of [2 ** 31, -(2 ** 31) - 1, 1.5, NaN])
    assert.throws(() => encodeIds([3, bad]), /token id .* at 1 is not a 32-bit integer/);
  const floats = [-0.123456789012345, -1e-300, -Infinity, 0, -0, 5e-324, Math.E];
  assert.deepEqual(decodeFloats(encodeFloats(floats)), floats);
  // Blobs need not start at an aligned offset of their buffer.
  const odd = (b: Buffer) => Buffer.concat([Buffer.from([7]), b]).subarray(1);
  assert.deepEqual(decodeIds(odd(encodeIds(ids))), ids);
  assert.deepEqual(decodeFloats(odd(encodeFloats(floats))), floats);
  const store = openStore({ dir: freshDir('store-') });
  const t = turn('turn_a');
  store.recordTurn(session(), t);
  assert.deepEqual(store.getTurn('turn_a')!.turn, t);
  store.close();
});

test('a request side encoded ahead of its commit is stored as encoded then; other arrays are encoded afresh', () => {
  const store = openStore({ dir: freshDir('store-') });
  const early = turn('turn_early');
  store.prepareInputs(early.messages, early.tools, early.promptIds);
  // The same arrays (by identity) change after preparing: the commit uses the encoding made then.
  const prepared = structuredClone(early.messages);
  early.messages.push({ role: 'user', content: 'added after prepareInputs' });
  store.recordTurn(session(), early);
  assert.deepEqual(store.getTurn('turn_early')!.turn.messages, prepared);
  // Other prompt ids than prepared: nothing reused, the turn is stored as it is.
  const other = turn('turn_other');
  store.prepareInputs(other.messages, other.tools, [...other.promptIds, 99]);
  store.recordTurn(session(), other);
  assert.deepEqual(store.getTurn('turn_other')!.turn, other);
  store.close();
});

test('constraints refuse partial or inconsistent rows', () => {
  const store = openStore({ dir: freshDir('store-') });
  store.recordTurn(session(), null);
  assert.throws(() => store.recordTurn(session(), turn('bad', { logprobs: [-1] })), /3 completion ids but 1 logprobs/);
  const row = turnToRow(turn('bad2'));
  assert.throws(() => insertTurn(store.db, { ...row, completion_tokens: 99 }), /CHECK constraint failed/);
  assert.throws(() => insertTurn(store.db, { ...row, session_id: 'nobody' }), /FOREIGN KEY constraint failed/);
  assert.throws(
    () => insertTurn(store.db, { ...row, kind: 'side', closure_reason: 'diverged', closed_at: 1 }),
    /CHECK constraint failed/,
  );
  assert.throws(
    () => insertTurn(store.db, { ...row, closure_reason: 'bogus', closed_at: 1 }),
    /FOREIGN KEY constraint failed/,
  );
  // A failing transaction leaves nothing behind.
  assert.throws(() =>
    store.recordTurn(session('s2'), turn('bad3', { completionIds: [1], logprobs: [1, 2], sampledLogprobs: [1, 2] })),
  );
  assert.deepEqual(store.counts(), { sessions: 1, turns: 0, next_states: 0, closed_turns: 0 });
  store.close();
});

test('closing a turn stores its next state and queues it once; the learning loop claims and finishes', () => {
  const dir = freshDir('store-');
  let now = 5000;
  const store = openStore({ dir, now: () => now });
  store.recordTurn(session(), turn('t1'));
  store.recordTurn(session(), turn('t2', { receivedAt: 2000 }));
  const next = {
    messages: [{ role: 'tool' as const, content: 'result', tool_call_id: 'call1' }],
    nextTurnId: 't2',
    arrivedAt: 2000,
  };
  store.closeTurn({ turnId: 't1', reason: 'next_state', closedAt: 2000, nextState: next, learning: true });
  store.closeTurn({ turnId: 't1', reason: 'diverged', closedAt: 3000, nextState: null, learning: true });
  store.closeTurn({ turnId: 'never-stored', reason: 'diverged', closedAt: 3000, nextState: null, learning: true });
  store.closeTurn({ turnId: 't2', reason: 'no_next_state', closedAt: 4000, nextState: null, learning: true });
  assert.deepEqual(store.counts(), { sessions: 1, turns: 2, next_states: 1, closed_turns: 2 });
  assert.deepEqual(store.openMainTurns(), []);

  const batch = store.claimClosedTurns(10);
  assert.deepEqual(
    batch.map((c) => [c.turn.id, c.closure, c.closedAt]),
    [
      ['t1', 'next_state', 2000],
      ['t2', 'no_next_state', 4000],
    ],
  );
  assert.deepEqual(batch[0]!.nextState, next);
  assert.equal(batch[1]!.nextState, null);
  assert.deepEqual(store.claimClosedTurns(10), [], 'claimed entries are not handed out twice');
  store.finishClosedTurns(['t1']);
  store.close();
  // After a crash, claimed-but-unfinished entries come back.
  now = 6000;
  const reopened = openStore({ dir, now: () => now });
  assert.equal(reopened.queueStatus('t1'), 'done');
  assert.deepEqual(
    reopened.claimClosedTurns(10).map((c) => c.turn.id),
    ['t2'],
  );
  reopened.close();
});

test('opted-out sessions: their queued turns are excluded, later closures queue as excluded', () => {
  const store = openStore({ dir: freshDir('store-') });
  store.recordTurn(session('p'), turn('a', { sessionId: 'p' }));
  store.recordTurn(session('p'), turn('b', { sessionId: 'p' }));
  store.closeTurn({ turnId: 'a', reason: 'next_state', closedAt: 1, nextState: null, learning: true });
  assert.equal(store.queueStatus('a'), 'pending');
  store.recordTurn(session('p', false), null);
  assert.equal(store.sessionLearning('p'), false);
  assert.equal(store.queueStatus('a'), 'excluded');
  store.closeTurn({ turnId: 'b', reason: 'diverged', closedAt: 2, nextState: null, learning: false });
  assert.equal(store.queueStatus('b'), 'excluded');
  store.recordTurn(session('p', true), null);
  assert.equal(store.sessionLearning('p'), false, 'opting out is sticky');
  assert.deepEqual(store.claimClosedTurns(10), []);
  store.close();
});

test('cancelled turns are stored closed; side turns are never queued', () => {
  const store = openStore({ dir: freshDir('store-') });
  store.recordTurn(session(), turn('c', { finishReason: 'cancelled' }), { reason: 'cancelled', closedAt: 9 });
  store.recordTurn(null, turn('side', { kind: 'side', sessionId: null, sessionSource: 'none' }));
  assert.equal(store.getTurn('c')!.closedTurn!.closure, 'cancelled');
  assert.equal(store.queueStatus('side'), undefined);
  assert.deepEqual(store.openMainTurns(), []);
  store.close();
});

test('export lines carry everything recorded, in arrival order, optionally one kind', () => {
  const store = openStore({ dir: freshDir('store-') });
  store.recordTurn(session(), turn('t1'));
  store.recordTurn(null, turn('s1', { kind: 'side', sessionId: null, sessionSource: 'none', receivedAt: 1500 }));
  store.recordTurn(session(), turn('t2', { receivedAt: 2000 }));
  store.closeTurn({
    turnId: 't1',
    reason: 'next_state',
    closedAt: 2000,
    nextState: { messages: [{ role: 'user', content: 'ok' }], nextTurnId: 't2', arrivedAt: 2000 },
    learning: true,
  });
  store.setRetemplates([['t2', { match: true, renderedTokens: 8, recordedTokens: 7 }]]);
  const all = [...store.exportLines()];
  assert.deepEqual(
    all.map((l) => l.turn_id),
    ['t1', 's1', 't2'],
  );
  assert.deepEqual(
    [...store.exportLines('main')].map((l) => l.turn_id),
    ['t1', 't2'],
  );
  const l = all[0]!;
  assert.equal(l.session_id, 's1');
  assert.equal(l.kind, 'main');
  assert.deepEqual(l.prompt_ids, [1, 151643, 2_000_000_000, 0]);
  assert.deepEqual(l.completion_ids, [7, 8, 9]);
  assert.deepEqual(l.logprobs, [-0.1, -1e-300, -Infinity]);
  assert.equal(l.policy_version, 3);
  assert.deepEqual(l.next_state!.messages, [{ role: 'user', content: 'ok' }]);
  assert.equal(l.closure_reason, 'next_state');
  assert.deepEqual(all[2]!.retemplate, { match: true, renderedTokens: 8, recordedTokens: 7 });
  store.close();
});

test('deleting a session removes its turns, next states and queue entries, and scrubs the file', () => {
  const dir = freshDir('store-');
  const store = openStore({ dir });
  const secret = 'the-launch-code-is-8675309';
  store.recordTurn(session('gone'), turn('g1', { sessionId: 'gone', messages: [{ role: 'user', content: secret }] }));
  store.recordTurn(session('gone'), turn('g2', { sessionId: 'gone' }));
  store.closeTurn({
    turnId: 'g1',
    reason: 'next_state',
    closedAt: 3,
    nextState: { messages: [{ role: 'user', content: secret }], nextTurnId: 'g2', arrivedAt: 3 },
    learning: true,
  });
  store.recordTurn(session('kept'), turn('k1', { sessionId: 'kept' }));
  assert.equal(store.deleteSession('gone'), 2);
  assert.equal(store.deleteSession('gone'), null);
  assert.deepEqual(store.counts(), { sessions: 1, turns: 1, next_states: 0, closed_turns: 0 });
  store.close();
  const bytes = readFileSync(join(dir, STORE_FILE));
  assert.equal(
    bytes.includes(Buffer.from(secret)),
    false,
    'secure_delete + checkpoint leave no copy in the database file',
  );
});

test('the store depends only on the narrow SqliteDatabase seam', () => {
  const store = openStore({ dir: freshDir('store-') });
  const db: SqliteDatabase = store.db;
  assert.equal(typeof db.prepare, 'function');
  store.close();
  assert.equal(store.isOpen, false);
});
