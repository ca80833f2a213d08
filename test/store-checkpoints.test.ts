// WAL checkpoints off the request path: with `checkpoints: 'background'` the serving connection
// never checkpoints, a worker thread does, and if that thread dies the store checkpoints inline again.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Worker } from 'node:worker_threads';
import { openStore, type Store } from '../src/store/store.js';
import { freshDir } from './helpers/gateway.js';
import { learnTurn, sessionOf } from './helpers/learning-fixtures.js';

/** Resolves once `done()` holds; fails after `ms` (the worker ticks every 200 ms). */
async function until(done: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!done()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const write = (store: Store, from: number, n: number) => {
  const messages = [{ role: 'user' as const, content: 'x'.repeat(6000) }];
  for (let i = from; i < from + n; i++)
    store.recordTurn(sessionOf('s1'), learnTurn({ id: `turn_${String(i).padStart(8, '0')}`, messages }));
};

test('background checkpoints: the serving connection never checkpoints, a worker thread does', async () => {
  const dir = freshDir('ckpt-');
  const store = openStore({ dir, checkpoints: 'background' });
  assert.equal(store.db.pragma('wal_autocheckpoint', { simple: true }), 0);
  write(store, 0, 400); // ~1200 WAL pages: past the 1000 at which an inline checkpoint would run
  await until(() => store.checkpoints.pages >= 1000, 'the worker to checkpoint the WAL');
  assert.deepEqual({ ...store.checkpoints, pages: 0 }, { mode: 'background', pages: 0, failure: null });
  store.close();
  const again = openStore({ dir });
  assert.equal([...again.exportLines()].length, 400, 'every committed turn is there after reopening');
  again.close();
});

test('a dead checkpoint thread: the store checkpoints inline again and says why', async () => {
  const failures: string[] = [];
  const store = openStore({
    dir: freshDir('ckpt-'),
    checkpoints: 'background',
    onCheckpointFailure: (m) => failures.push(m),
  });
  const worker = (store as unknown as { checkpointer: { worker: Worker } }).checkpointer.worker;
  await worker.terminate();
  await until(() => failures.length > 0, 'the fallback');
  assert.match(failures[0]!, /the checkpoint thread exited \(code \d+\) while the store was open/);
  assert.equal(store.checkpoints.mode, 'inline');
  assert.equal(store.db.pragma('wal_autocheckpoint', { simple: true }), 1000);
  write(store, 0, 10);
  store.close();
});
