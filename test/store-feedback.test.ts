// Schema 7 against a real SQLite store: rollout grouping on sessions (first values kept), feedback
// rows (checked in SQL too), an outcome closing the last open main turn, and the migration's
// round trip (down maps episode ends to no_next_state and drops the feedback table).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { migrateDown, migrateUp, schemaVersion } from '../src/store/migrations/index.js';
import { openStore } from '../src/store/store.js';
import { freshDir } from './helpers/gateway.js';
import { learnTurn, sessionOf, tempStore } from './helpers/learning-fixtures.js';

const fb = (over: Partial<Parameters<ReturnType<typeof tempStore>['feedback']['recordFeedback']>[0]> = {}) => ({
  id: 'fb_1',
  key: 'k1',
  sessionId: 's1',
  turnId: null,
  reward: 1,
  comment: null,
  createdAt: 9000,
  ...over,
});

test('a session keeps the rollout grouping it was first given', () => {
  const store = tempStore();
  store.recordTurn({ ...sessionOf('s1'), rollout: { taskId: 't', index: 0, count: 2 } }, null);
  store.recordTurn({ ...sessionOf('s1'), rollout: { taskId: 'u', index: 1, count: 3 } }, null);
  assert.deepEqual(store.sessionRollout('s1'), { taskId: 't', index: 0, count: 2 });
  store.recordTurn(sessionOf('s2'), null);
  assert.equal(store.sessionRollout('s2'), null);
  store.close();
});

test('an outcome closes the newest open main turn as episode_end and queues it; a turn reward closes nothing', () => {
  const store = tempStore();
  const older = learnTurn({ receivedAt: 1 });
  const newer = learnTurn({ receivedAt: 2 });
  store.recordTurn(sessionOf('s1'), older);
  store.recordTurn(null, newer);
  const reward = store.feedback.recordFeedback(fb({ key: 'k0', id: 'fb_0', turnId: older.id, reward: -1 }));
  assert.equal(reward.status, 'stored');
  assert.equal(store.getTurn(older.id)!.closedTurn, null);
  const outcome = store.feedback.recordFeedback(fb());
  assert.deepEqual(outcome, { status: 'stored', feedback: fb(), closedTurnId: newer.id });
  const closed = store.getTurn(newer.id)!.closedTurn!;
  assert.deepEqual([closed.closure, closed.closedAt, closed.nextState], ['episode_end', 9000, null]);
  assert.equal(store.queueStatus(newer.id), 'pending');
  assert.equal(store.getTurn(older.id)!.closedTurn, null, 'only the last open main turn');
  assert.deepEqual(store.feedback.outcome('s1'), fb());
  assert.throws(
    () =>
      store.db
        .prepare('INSERT INTO feedback (id, idempotency_key, session_id, reward, created_at) VALUES (?, ?, ?, ?, ?)')
        .run('fb_x', 'kx', 's1', 1.5, 1),
    /CHECK constraint/,
  );
  store.close();
});

test('migration 7 down and up: episode ends read as no_next_state, feedback and steps samples go, the rest stays', () => {
  const dir = freshDir('store-fb-');
  const store = openStore({ dir });
  const turn = learnTurn();
  store.recordTurn({ ...sessionOf('s1'), rollout: { taskId: 't', index: 0, count: 1 } }, turn);
  assert.equal(store.feedback.recordFeedback(fb()).status, 'stored');
  store.db
    .prepare(
      `INSERT INTO samples (turn_id, source, policy_version, score, rl_advantage, opd_weight, status, created_at, reward, step_index)
      VALUES (?, 'steps', 0, 1, 0, 0, 'waiting', 1, 1.5, 0)`,
    )
    .run(turn.id);
  migrateDown(store.db, 6);
  assert.deepEqual(store.db.prepare('SELECT count(*) AS n FROM samples').get(), { n: 0 });
  assert.equal(schemaVersion(store.db), 6);
  assert.deepEqual(store.db.prepare('SELECT closure_reason FROM turns').all(), [{ closure_reason: 'no_next_state' }]);
  assert.deepEqual(
    store.db.prepare(`SELECT name FROM sqlite_master WHERE name IN ('feedback', 'sessions_by_task')`).all(),
    [],
  );
  assert.deepEqual(store.db.pragma('foreign_key_check'), []);
  assert.deepEqual(migrateUp(store.db, dir), [7, 8, 9]);
  assert.equal(store.sessionRollout('s1'), null);
  assert.deepEqual(store.feedback.ofSession('s1'), []);
  store.close();
});
