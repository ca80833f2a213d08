// The PyTorch learner (python/openclaw_rl_learner) against the TypeScript learner: the same
// batch of rl, opd and combine samples (mask, NaN teacher tokens, rollout log-probs), two epochs
// of mini- and micro-batches, PPO-clip + TIS + KL + entropy (or top-k distillation) and AdamW with
// warm-up and clipping: every step's loss and the parameters after the batch agree within 1e-4.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ModelFamily } from '../src/engine/local/model/config.js';
import { assertSame, maxAbsDiff, setup, trainTorch, trainTs } from './helpers/torch-learner.js';

const cases: [ModelFamily, boolean, 'policy' | 'topk'][] = [
  ['qwen3', true, 'policy'], ['llama', false, 'policy'], ['qwen2', true, 'policy'], ['qwen3', false, 'topk'],
];
for (const [family, lora, loss] of cases) {
  test(`${family}, ${lora ? 'LoRA' : 'full fine-tuning'}, ${loss} loss: the PyTorch learner matches the TypeScript learner`, async () => {
    const s = setup(family, lora, loss);
    const before = (s.ts.values).slice();
    const ours = trainTs(s);
    // Agreement to 1e-4 means something only if the batch moved the parameters by far more.
    assert.ok(maxAbsDiff(before, ours.values) > 1e-2, 'the batch should move the parameters');
    assert.ok(ours.metrics.some((m) => m.clipFraction > 0) || loss === 'topk', 'the batch should exercise the clip');
    assertSame(`${family} ${lora ? 'lora' : 'full'} ${loss}`, ours, await trainTorch(s));
  });
}
