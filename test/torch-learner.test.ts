// The PyTorch learner (python/openclaw_rl_learner) against the TypeScript learner: the same
// batch of rl, opd and combine samples (mask, NaN teacher tokens, rollout log-probs), two epochs
// of mini- and micro-batches, PPO-clip + TIS + KL + entropy (or top-k distillation) and AdamW with
// warm-up and clipping: every step's loss and the parameters after the batch agree within 1e-4.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ModelFamily } from '../src/engine/local/model/config.js';
import { scratchDir } from './helpers/models.js';
import { assertSame, maxAbsDiff, openTorchLearner, setup, trainTorch, trainTs } from './helpers/torch-learner.js';

const cases: [ModelFamily, boolean, 'policy' | 'topk'][] = [
  ['qwen3', true, 'policy'],
  ['llama', false, 'policy'],
  ['qwen2', true, 'policy'],
  ['qwen3', false, 'topk'],
];
for (const [family, lora, loss] of cases) {
  const what = `${family}, ${lora ? 'LoRA' : 'full fine-tuning'}, ${loss} loss`;
  test(`${what}: the PyTorch learner matches the TypeScript learner`, async () => {
    const s = setup(family, lora, loss);
    const before = s.ts.values.slice();
    const ours = await trainTs(s);
    // Agreement to 1e-4 means something only if the batch moved the parameters by far more.
    assert.ok(maxAbsDiff(before, ours.values) > 1e-2, 'the batch should move the parameters');
    assert.ok(ours.metrics.some((m) => m.clipFraction > 0) || loss === 'topk', 'the batch should exercise the clip');
    assertSame(`${family} ${lora ? 'lora' : 'full'} ${loss}`, ours, await trainTorch(s));
  });
}

test('forwardBackward over 2 ranks, then optimStep: the same loss, metrics and step as the TypeScript learner', async () => {
  const s = setup('qwen3', true);
  const samples = s.samples.slice(0, 3);
  const ours = s.ts.forwardBackward(samples, s.ppo.loss, 4);
  const ourStep = s.ts.optimStep();
  const work = scratchDir('ocrl-torch-fb-');
  const learner = await openTorchLearner(s, work, { nproc: 2 }, { keepReference: true });
  try {
    const theirs = await learner.forwardBackward(samples, s.ppo.loss, 4);
    const step = await learner.optimStep();
    assert.ok(Math.abs(ours.loss - theirs.loss) <= 1e-5, `loss ${ours.loss} vs ${theirs.loss}`);
    assert.equal(theirs.tokens, ours.tokens);
    for (const k of ['clipFraction', 'approxKl', 'entropy', 'tisMean', 'rolloutAbsDiff'] as const) {
      assert.ok(Math.abs(ours[k] - theirs[k]) <= 1e-5, `${k}: ${ours[k]} vs ${theirs[k]}`);
    }
    assert.deepEqual([step.step, step.applied, step.lr], [ourStep.step, ourStep.applied, ourStep.lr]);
    assert.ok(
      Math.abs(step.gradNorm - ourStep.gradNorm) <= 1e-4 * ourStep.gradNorm,
      `grad norm ${ourStep.gradNorm} vs ${step.gradNorm}`,
    );
  } finally {
    await learner.close();
  }
});
