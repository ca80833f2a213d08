// Rollbacks and the guard inside the Trainer, with a TEST DOUBLE PolicyBackend over a real store:
// a batch's version row commits with its steps, a rollback restores, publishes and checkpoints
// before its version is recorded, refusals change nothing, and the guard holds the next batch
// until it has judged the serving version, then rolls a worse one back.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { resolveLearnConfig, type LearnConfig } from '../src/learn/config.js';
import { RollbackRefused, Rollbacks } from '../src/learn/rollback.js';
import { Trainer } from '../src/learn/trainer.js';
import type { Store } from '../src/store/store.js';
import { freshDir } from './helpers/gateway.js';
import { learnTurn, LogRecorder, PolicyBackendDouble, queueSample, tempStore } from './helpers/learning-fixtures.js';

/** A PolicyBackendDouble that can restore, and publishes each version into a folder of its own. */
class RestoringDouble extends PolicyBackendDouble {
  readonly restored: (string | null)[] = [];
  failRestore: Error | null = null;
  readonly dir = freshDir('rollback-versions-');

  async restore(path: string | null): Promise<void> {
    this.calls.push('restore');
    if (this.failRestore) throw this.failRestore;
    this.restored.push(path);
  }

  override async publish() {
    const p = await super.publish();
    const weightsPath = join(this.dir, `v-${p.version}`);
    mkdirSync(weightsPath);
    return { ...p, weightsPath };
  }
}

function setup(over: Partial<LearnConfig> = {}, backend: PolicyBackendDouble = new RestoringDouble()) {
  const store = tempStore();
  const config = resolveLearnConfig({ batchSize: 1, pollMs: 60_000, ...over });
  const log = new LogRecorder();
  const rollbacks = new Rollbacks(
    store,
    backend,
    { enabled: config.rollbackGuard, window: config.guardWindow, margin: config.guardMargin, alpha: config.guardAlpha },
    log.log,
    () => {},
  );
  const trainer = new Trainer(store.learning, backend, config, log.log, rollbacks);
  return { store, log, rollbacks, trainer, backend };
}

const sources = (store: Store) =>
  store.db.prepare('SELECT version, source, restores, step FROM policy_versions ORDER BY version').all();

test('a trained batch records its version with its steps; a rollback restores, publishes and checkpoints, then records', async () => {
  const { store, rollbacks, trainer, backend, log } = setup();
  const b = backend as RestoringDouble;
  for (let i = 0; i < 2; i++) {
    queueSample(store, learnTurn());
    assert.equal(await trainer.trainOnce(), true);
  }
  assert.deepEqual(sources(store), [
    { version: 1, source: 'train', restores: null, step: 1 },
    { version: 2, source: 'train', restores: null, step: 2 },
  ]);
  assert.equal(store.versions.get(1)!.weightsPath, join(b.dir, 'v-1'));

  const seen: unknown[] = [];
  backend.onCall = (call) => seen.push([call, store.versions.get(3)?.source ?? null]);
  const answered = rollbacks.request(1, 'admin');
  await rollbacks.applyPending();
  const r = await answered;
  assert.deepEqual([r.status, r.target, r.publishedVersion], ['done', 1, 3]);
  assert.deepEqual(b.restored, [join(b.dir, 'v-1')]);
  assert.deepEqual(b.calls.slice(-3), ['restore', 'publish', 'checkpoint']);
  assert.deepEqual(
    seen,
    [
      ['publish', null],
      ['checkpoint', null],
    ],
    'the version is recorded only after the checkpoint holds the restored weights',
  );
  const v3 = store.versions.get(3)!;
  assert.deepEqual(
    [v3.source, v3.restores, v3.rolledBackFrom, v3.requestedBy, v3.step],
    ['rollback', 1, 2, 'admin', 2],
  );
  assert.deepEqual(log.named('rollback')[0], {
    request: 1,
    requestedBy: 'admin',
    from: 2,
    restores: 1,
    version: 3,
    step: 2,
    publishMs: log.named('rollback')[0]!.publishMs,
    swapMs: 2,
  });
  // Version 0 (the start of training) restores with no folder.
  const zero = rollbacks.request(0, 'cli');
  await rollbacks.applyPending();
  assert.equal((await zero).publishedVersion, 4);
  assert.deepEqual(b.restored, [join(b.dir, 'v-1'), null]);
  store.close();
});

test('rollback refusals: unknown version, serving already, weights gone, no restore, a folder that does not load', async () => {
  const { store, rollbacks, trainer, backend } = setup();
  const b = backend as RestoringDouble;
  for (let i = 0; i < 2; i++) {
    queueSample(store, learnTurn());
    await trainer.trainOnce();
  }
  const refused = (target: number, code: string) =>
    assert.throws(
      () => rollbacks.request(target, 'admin'),
      (e: unknown) => e instanceof RollbackRefused && e.code === code,
    );
  refused(7, 'unknown_version');
  refused(2, 'already_serving');
  store.db.prepare('UPDATE policy_versions SET weights_path = ? WHERE version = 1').run(join(b.dir, 'gone'));
  refused(1, 'weights_gone');
  assert.deepEqual(store.versions.pendingRequests(), [], 'a refused request is never queued');

  // A request queued by the CLI is checked again when applied; a restore that fails changes nothing.
  store.db.prepare('UPDATE policy_versions SET weights_path = ? WHERE version = 1').run(join(b.dir, 'v-1'));
  b.failRestore = new Error('adapter_config.json: not valid JSON');
  const id = store.versions.request(1, 'cli');
  const calls = b.calls.length;
  await rollbacks.applyPending();
  const r = store.versions.requestById(id)!;
  assert.deepEqual([r.status, r.publishedVersion], ['refused', null]);
  assert.match(r.message!, /cannot restore version 1: adapter_config.json: not valid JSON/);
  assert.deepEqual(b.calls.slice(calls), ['restore'], 'nothing published');
  assert.equal(b.version, 2);

  const plain = setup({}, new PolicyBackendDouble());
  assert.throws(() => plain.rollbacks.request(0, 'admin'), /no learner is running to restore a version/);
  store.close();
  plain.store.close();
});

test('the guard holds the next batch until it has judged the serving version, and rolls a worse one back', async () => {
  const { store, trainer, backend, log } = setup({ rollbackGuard: true, guardWindow: 4, guardMargin: 0.1 });
  // Version 0's judged turns: scores 1, 0, 1, 1 (their samples make the first batch).
  for (const score of [1, 0, 1, 1] as const) queueSample(store, learnTurn({ policyVersion: 0 }), {}, { score });
  assert.equal(await trainer.trainOnce(), true);
  assert.equal(backend.version, 1);
  // Version 1's first turns: two judged, one batch ready; the guard waits and so does the batch.
  for (const score of [-1, -1] as const) queueSample(store, learnTurn({ policyVersion: 1 }), {}, { score });
  trainer.start();
  await new Promise((r) => setImmediate(r));
  assert.equal(await trainer.trainOnce(), false, 'held: version 1 has 2 of 4 judged turns');
  assert.equal(backend.version, 1);
  for (const score of [0, -1] as const) queueSample(store, learnTurn({ policyVersion: 1 }), {}, { score });
  trainer.notify();
  const rollback = await log.next('rollback');
  assert.deepEqual([rollback.requestedBy, rollback.restores, rollback.from, rollback.version], ['guard', 0, 1, 2]);
  const verdict = log.named('guard_verdict')[0]!;
  assert.deepEqual([verdict.decision, verdict.previousMean, verdict.mean], ['rolled_back', 0.75, -0.75]);
  assert.ok((verdict.p as number) < 0.05);
  assert.equal(log.named('auto_rollback').length, 1);
  assert.equal(store.versions.verdictOf(1)!.decision, 'rolled_back');
  await trainer.close();
  store.close();
});
