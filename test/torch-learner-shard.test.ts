// The PyTorch learner's optimizer sharding (--learner-shard optimizer, ZeRO stage 1 over gloo):
// 2 sharded ranks give the 1-rank unsharded update (within 1e-5, LoRA and full fine-tuning, 2
// steps, the second clipped), each rank holds half of AdamW's state, and checkpoints cross
// between sharded and unsharded runs with the same next step.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DEFAULT_LAUNCH, type TorchLaunch } from '../src/engine/torch/launcher.js';
import { TorchLearner } from '../src/engine/torch/learner.js';
import { trainBatch } from '../src/learn/ppo.js';
import { scratchDir } from './helpers/models.js';
import {
  assertSame,
  maxAbsDiff,
  publishedValues,
  setup,
  TORCH_PYTHON,
  trainTorch,
  type Setup,
} from './helpers/torch-learner.js';

const SHARDED: Partial<TorchLaunch> = { nproc: 2, shard: 'optimizer' };

for (const lora of [true, false]) {
  test(`2 ranks sharding AdamW's state give the 1-rank unsharded update (${lora ? 'LoRA' : 'full'})`, async (t) => {
    const s = setup('qwen3', lora);
    // Two steps (mini-batches of 2, one epoch); the first under the clipping bound, the second
    // over it (full fine-tuning's gradients are larger, so is its bound).
    s.samples = s.samples.slice(0, 4);
    s.ppo = { ...s.ppo, epochs: 1 };
    s.config = { ...s.config, optimizer: { ...s.config.optimizer, maxGradNorm: lora ? 1 : 2 } };
    const one = await trainTorch(s);
    const two = await trainTorch(s, SHARDED);
    const maxNorm = s.config.optimizer.maxGradNorm!;
    const norms = one.metrics.map((m) => m.gradNorm);
    assert.ok(norms.length === 2 && norms[0]! < maxNorm && norms[1]! > maxNorm, `grad norms ${norms}`);
    assertSame('1 rank unsharded vs 2 ranks sharded', one, two, 1e-5);
    const [whole] = one.status!.optimizerElements;
    const [a, b] = two.status!.optimizerElements;
    t.diagnostic(`optimizer state elements: 1 rank ${whole}; 2 sharded ranks ${a} and ${b}`);
    assert.equal(one.status!.shard, 'none');
    assert.equal(two.status!.shard, 'optimizer');
    // Both moments of ceil(params / 2) elements: half, up to one padding element per moment.
    assert.deepEqual([a, b], [2 * Math.ceil(whole! / 4), 2 * Math.ceil(whole! / 4)]);
    assert.ok(a! + b! - whole! <= 2, `${a} + ${b} vs ${whole}`);
  });
}

async function open(s: Setup, launch: Partial<TorchLaunch>, checkpointDir: string): Promise<TorchLearner> {
  return TorchLearner.open({
    launch: { ...DEFAULT_LAUNCH, python: TORCH_PYTHON, ...launch },
    config: s.config,
    keepReference: false,
    modelDir: s.dir,
    checkpointDir,
    versionsDir: join(scratchDir('ocrl-shard-v-'), 'versions'),
    initAdapter: s.initAdapter,
    versionAfter: 0,
  });
}

/** One more step on the first two samples; the weights after it. */
async function nextStep(learner: TorchLearner, s: Setup): Promise<Float32Array> {
  await learner.forwardBackward(s.samples.slice(0, 2), s.ppo.loss, 2);
  const step = await learner.optimStep();
  assert.ok(step.applied);
  return publishedValues(learner, s.dir);
}

test('a sharded checkpoint resumes unsharded, and an unsharded one sharded, with the same next step', async () => {
  const s = setup('qwen3', true);
  const checkpoints = join(scratchDir('ocrl-shard-ckpt-'), 'checkpoints');
  const sharded = await open(s, SHARDED, checkpoints);
  let afterSharded: Float32Array;
  try {
    await trainBatch(sharded, s.samples, s.ppo);
    await sharded.save([]);
    afterSharded = await nextStep(sharded, s);
  } finally {
    await sharded.close();
  }
  const plain = await open(s, { nproc: 1 }, checkpoints);
  let afterPlain: Float32Array;
  try {
    assert.equal(plain.resumed.steps, 6);
    const resumed = await nextStep(plain, s);
    const d = maxAbsDiff(afterSharded, resumed);
    assert.ok(d <= 1e-5, `sharded checkpoint resumed unsharded: next step differs by ${d.toExponential(3)}`);
    await plain.save([]);
    afterPlain = await nextStep(plain, s);
  } finally {
    await plain.close();
  }
  const again = await open(s, SHARDED, checkpoints);
  try {
    assert.equal(again.resumed.steps, 7);
    assert.equal(again.resumed.shard, 'optimizer');
    const d = maxAbsDiff(afterPlain, await nextStep(again, s));
    assert.ok(d <= 1e-5, `unsharded checkpoint resumed sharded: next step differs by ${d.toExponential(3)}`);
  } finally {
    await again.close();
  }
});
