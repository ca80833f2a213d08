// `openclaw-rl serve --retention-days D` end to end: on a data folder holding old and recent turns,
// serve purges the old ones at start (one `retention_purge` log line of counts) and exits cleanly.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DAY_MS } from '../src/store/retention.js';
import { openStore } from '../src/store/store.js';
import { freshDir, tinyModel } from './helpers/gateway.js';
import { addClosedTurn, learnTurn, queueSample } from './helpers/learning-fixtures.js';
import { startServe } from './helpers/serve-process.js';

test('serve --retention-days purges turns older than D days at start and logs the counts', async (t) => {
  const data = freshDir('serve-retention-');
  const now = Date.now();
  const store = openStore({ dir: data });
  const at = (ms: number) => ({ receivedAt: ms - 2, firstTokenAt: ms - 1, completedAt: ms });
  const old = [1, 2, 3].map((i) => learnTurn({ sessionId: 'old', ...at(now - 10 * DAY_MS + i) }));
  for (const turn of old) queueSample(store, turn);
  const recent = addClosedTurn(store, learnTurn({ sessionId: 'recent', ...at(now - DAY_MS) }));
  store.close();

  const serve = await startServe([
    '--model',
    tinyModel(),
    '--data',
    data,
    '--threads',
    '1',
    '--no-learning',
    '--retention-days',
    '5',
  ]);
  t.after(() => serve.child.kill('SIGKILL'));
  const purge = await serve.waitForLog((l) => l.event === 'retention_purge');
  assert.deepEqual(
    [purge.days, purge.turns, purge.judgments, purge.votes, purge.samples, purge.kept],
    [5, 3, 3, 9, 3, 0],
  );
  assert.ok((purge.cutoff as number) >= now - 5 * DAY_MS, 'the cutoff is D days before the purge');
  await serve.waitForLog((l) => l.event === 'listening');
  // An answer means serve is past its startup and handles SIGTERM itself.
  assert.equal((await fetch(`${serve.root}/healthz`)).status, 200);
  serve.child.kill('SIGTERM');
  const code = await serve.exited;
  assert.equal(code, 0, `${serve.stderr()}\n${JSON.stringify(serve.lines.slice(-5))}`);

  const after = openStore({ dir: data });
  assert.deepEqual(
    (after.db.prepare('SELECT id FROM turns').all() as { id: string }[]).map((r) => r.id),
    [recent.id],
  );
  assert.deepEqual(after.db.pragma('foreign_key_check'), []);
  after.close();
});
