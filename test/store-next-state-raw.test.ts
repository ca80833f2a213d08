// Schema 6's next_states.raw_messages: a next state whose messages were unwrapped keeps the
// messages as received beside them, through every read (getTurn, the learning queue, export);
// next states stored before schema 6 read back as received; down drops only the column.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import { LATEST_VERSION, migrateDown, migrateUp, schemaVersion } from '../src/store/migrations/index.js';
import type { SqliteDatabase } from '../src/store/sqlite.js';
import { openStore } from '../src/store/store.js';
import { freshDir } from './helpers/gateway.js';
import { learnTurn, sessionOf } from './helpers/learning-fixtures.js';

const own: ChatMessage = { role: 'user', content: '[Sun 2026-11-29 23:20 UTC] It is in the workspace root.' };
const wrapped: ChatMessage = {
  role: 'user',
  content:
    '[Sun 2026-11-29 23:20 UTC] [Queued user message from a previous active turn; preserved as context only. ' +
    'Continue with the active prompt below.]\nIt is in the workspace root.\n\n' +
    'Continue the current task from the existing transcript, preserving completed work.',
};
const columns = (db: SqliteDatabase) => (db.pragma('table_info(next_states)') as { name: string }[]).map((c) => c.name);

test('migration 6: raw next-state messages kept beside the unwrapped ones; older ones read as received; down drops it', () => {
  assert.equal(LATEST_VERSION, 9);
  const dir = freshDir('store-raw-');
  const store = openStore({ dir });
  const old = learnTurn();
  const unwrapped = learnTurn();
  store.recordTurn(sessionOf('s1'), old);
  store.recordTurn(null, unwrapped);

  // A next state as schema 5 stored it.
  migrateDown(store.db, 5);
  assert.ok(!columns(store.db).includes('raw_messages'));
  store.db.prepare('UPDATE turns SET closure_reason = ?, closed_at = ? WHERE id = ?').run('next_state', 5000, old.id);
  store.db
    .prepare('INSERT INTO next_states (turn_id, next_turn_id, messages, arrived_at) VALUES (?, ?, ?, ?)')
    .run(old.id, 'n_old', JSON.stringify([own]), 5000);
  store.db
    .prepare('INSERT INTO closed_turns (turn_id, status, enqueued_at, updated_at) VALUES (?, ?, ?, ?)')
    .run(old.id, 'pending', 5000, 5000);
  assert.deepEqual(migrateUp(store.db, dir), [6, 7, 8, 9]);
  const asReceived = { messages: [own], nextTurnId: 'n_old', arrivedAt: 5000 };
  assert.deepEqual(store.getTurn(old.id)!.closedTurn!.nextState, asReceived);

  const recorded = { messages: [own], nextTurnId: 'n_new', arrivedAt: 6000, rawMessages: [wrapped] };
  store.closeTurn({ turnId: unwrapped.id, reason: 'next_state', closedAt: 6000, learning: true, nextState: recorded });
  assert.deepEqual(store.getTurn(unwrapped.id)!.closedTurn!.nextState, recorded);
  assert.deepEqual(
    store.claimClosedTurns(10).map((c) => c.nextState),
    [asReceived, recorded],
  );
  assert.deepEqual(
    [...store.exportLines()].map((l) => l.next_state),
    [asReceived, recorded],
  );

  migrateDown(store.db, 5);
  assert.equal(schemaVersion(store.db), 5);
  const kept = store.db.prepare('SELECT turn_id, messages FROM next_states ORDER BY rowid').all();
  const judged = JSON.stringify([own]);
  assert.deepEqual(
    kept,
    [
      { turn_id: old.id, messages: judged },
      { turn_id: unwrapped.id, messages: judged },
    ],
    'judged text stays',
  );
  assert.deepEqual(migrateUp(store.db, dir), [6, 7, 8, 9]);
  assert.ok(columns(store.db).includes('raw_messages'));
  store.close();
});
