// Rollback on the PyTorch learner, against the TypeScript learner's restore (LearnerCore.restore):
// after a restore of a published version the learner holds that version's values exactly, the
// start of training (null) gives the initial adapter or the base, a folder of the other kind
// changes nothing, and training after the restore (AdamW's moments reset, the bias correction
// counted from the restore) matches the TypeScript learner step for step, also across a
// checkpoint and a relaunch. Version folders are kept as asked (all, for rollbacks).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { policyVersionAt, readPolicyUpdate } from '../src/engine/local/policy-versions.js';
import type { TorchLaunch } from '../src/engine/torch/launcher.js';
import type { TorchLearner } from '../src/engine/torch/learner.js';
import { trainBatch } from '../src/learn/ppo.js';
import { scratchDir } from './helpers/models.js';
import {
  assertSame,
  maxAbsDiff,
  openTorchLearner,
  publishedValues,
  setup,
  type Setup,
} from './helpers/torch-learner.js';

function open(s: Setup, work: string, keepVersions: number, launch: Partial<TorchLaunch> = {}): Promise<TorchLearner> {
  return openTorchLearner(s, work, launch, { keepReference: true, keepVersions });
}

/** A version folder's trainable values (the adapter's, or the model's). */
function valuesAt(s: Setup, path: string): Float32Array {
  const update = readPolicyUpdate(policyVersionAt(path, 0), readModelFolder(s.dir).config);
  return update.kind === 'lora' ? update.data : new Float32Array(update.params);
}

/** One batch on each learner: the same steps and, after it, the same values. */
async function trainBoth(label: string, s: Setup, torch: TorchLearner): Promise<void> {
  const ours = { metrics: await trainBatch(s.ts, s.samples, s.ppo), values: s.ts.values.slice() };
  const theirs = { metrics: await trainBatch(torch, s.samples, s.ppo), values: await publishedValues(torch, s.dir) };
  assertSame(label, ours, theirs);
}

for (const lora of [true, false]) {
  const mode = lora ? 'LoRA' : 'full fine-tuning';
  test(`${mode}: a restore serves a version's values exactly and trains on like the TypeScript learner`, async () => {
    const s = setup('qwen3', lora);
    const initial = s.ts.values.slice();
    const work = scratchDir('ocrl-torch-restore-');
    let torch = await open(s, work, Number.POSITIVE_INFINITY);
    try {
      // Versions 1 and 2: two batches.
      await trainBoth(`${mode} batch 1`, s, torch);
      const v1 = join(work, 'versions', 'v-1');
      await trainBoth(`${mode} batch 2`, s, torch);
      const v1Values = valuesAt(s, v1);
      assert.ok(maxAbsDiff(v1Values, s.ts.values) > 1e-2, 'the second batch moved the values');

      // A folder of the other kind is refused and changes nothing.
      const before = await publishedValues(torch, s.dir);
      const other = lora ? s.dir : s.initAdapter;
      if (other) {
        await assert.rejects(torch.restore(other), /holds full weights, this learner trains a LoRA adapter/);
      } else {
        const loraRun = setup('qwen3', true);
        await assert.rejects(
          torch.restore(loraRun.initAdapter!),
          /holds a LoRA adapter, this learner trains full weights/,
        );
      }
      await assert.rejects(torch.restore(join(work, 'no-such-version')), /is not a folder/);
      assert.equal(maxAbsDiff(await publishedValues(torch, s.dir), before), 0);

      // Back to version 1: its values exactly, and both learners train on alike from there.
      await torch.restore(v1);
      assert.equal(maxAbsDiff(await publishedValues(torch, s.dir), v1Values), 0);
      s.ts.restore(v1Values);
      await trainBoth(`${mode} after the restore`, s, torch);

      // Across a checkpoint and a relaunch: the moments' restart point is kept.
      await torch.save([]);
      await torch.close();
      torch = await open(s, work, Number.POSITIVE_INFINITY);
      assert.equal(torch.resumed.steps, s.ts.steps);
      await trainBoth(`${mode} after a relaunch`, s, torch);

      // The start of training: the initial adapter, or the base weights.
      await torch.restore(null);
      const start = await publishedValues(torch, s.dir);
      const expected = lora
        ? valuesAt(s, s.initAdapter!)
        : new Float32Array(loadWeights(s.dir, readModelFolder(s.dir).config).data);
      assert.equal(maxAbsDiff(start, expected), 0);
      assert.equal(maxAbsDiff(start, initial), 0, 'the start of training is where the learners began');

      // Every version was kept (eight publications).
      for (let v = 1; v <= 8; v++) assert.ok(existsSync(join(work, 'versions', `v-${v}`)), `v-${v} is kept`);
    } finally {
      await torch.close();
    }
  });
}

test('2 ranks sharding AdamW: a restore reaches every rank and resets every slice of the moments', async () => {
  const s = setup('qwen3', true);
  const work = scratchDir('ocrl-torch-restore-ranks-');
  const torch = await open(s, work, Number.POSITIVE_INFINITY, { nproc: 2, shard: 'optimizer' });
  try {
    await trainBoth('batch 1', s, torch);
    const v1 = join(work, 'versions', 'v-1');
    await trainBoth('batch 2', s, torch);
    await assert.rejects(torch.restore(s.dir), /holds full weights/);
    await torch.restore(v1);
    s.ts.restore(valuesAt(s, v1));
    await trainBoth('after the restore', s, torch);
  } finally {
    await torch.close();
  }
});

test('keepVersions 3 keeps the three newest version folders', async () => {
  const s = setup('qwen3', true);
  const work = scratchDir('ocrl-torch-keep-');
  const torch = await open(s, work, 3);
  try {
    for (let i = 0; i < 5; i++) await torch.publish();
    const kept = [1, 2, 3, 4, 5].filter((v) => existsSync(join(work, 'versions', `v-${v}`)));
    assert.deepEqual(kept, [3, 4, 5]);
  } finally {
    await torch.close();
  }
});
