// A PyTorch learner that dies with a batch in flight: the request fails with the reason, the
// supervisor relaunches it from its checkpoint folder, reconciles, and the retried batch gives
// the update an undisturbed learner gives (here: the TypeScript learner's, within 1e-4).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { readPolicyUpdate } from '../src/engine/local/policy-versions.js';
import { DEFAULT_LAUNCH } from '../src/engine/torch/launcher.js';
import { TorchLearner } from '../src/engine/torch/learner.js';
import { SupervisedTorchLearner } from '../src/engine/torch/supervised.js';
import { trainBatch } from '../src/learn/ppo.js';
import { scratchDir } from './helpers/models.js';
import { assertSame, setup, TORCH_PYTHON, trainTs } from './helpers/torch-learner.js';

test('SIGKILL of the learner with trainBatch in flight: relaunched, reconciled, the batch trains as before', async () => {
  const s = setup('qwen3', true);
  const work = scratchDir('ocrl-torch-sup-');
  const events: [string, Record<string, unknown>][] = [];
  const reconciled: number[] = [];
  const open = () =>
    TorchLearner.open({
      launch: { ...DEFAULT_LAUNCH, python: TORCH_PYTHON },
      config: s.config,
      modelDir: s.dir,
      checkpointDir: join(work, 'checkpoints'),
      versionsDir: join(work, 'versions'),
      initAdapter: s.initAdapter,
      versionAfter: 0,
    });
  const first = await open();
  const learner = new SupervisedTorchLearner(first, {
    reopen: open,
    reconcile: (steps) => {
      reconciled.push(steps);
      return 0;
    },
    log: (e, f) => events.push([e, f]),
  });
  try {
    const training = learner.train((torch) => trainBatch(torch, s.samples, s.ppo));
    // The request is on its way; whatever the learner has done with it, it dies now.
    process.kill(first.pid, 'SIGKILL');
    const metrics = await training;
    assert.match(first.failure ?? '', /PyTorch learner exited \(signal SIGKILL\)/);
    assert.deepEqual(reconciled, [0], 'no checkpoint yet: the store is reconciled against step 0');
    assert.equal(events.filter(([e]) => e === 'learner_restarted').length, 1);
    const published = await learner.publish();
    const update = readPolicyUpdate(published, readModelFolder(s.dir).config);
    assert.ok(update.kind === 'lora');
    assertSame('TypeScript vs relaunched PyTorch', await trainTs(s), { metrics, values: update.data });
  } finally {
    await learner.close();
  }
});
