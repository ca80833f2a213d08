// The PyTorch learner (python/openclaw_rl_learner) against the TypeScript learner: the same
// batch of rl, opd and combine samples (mask, NaN teacher tokens, rollout log-probs), two epochs
// of mini- and micro-batches, PPO-clip + TIS + KL + entropy (or top-k distillation) and AdamW with
// warm-up and clipping: every step's loss and the parameters after the batch agree within 1e-4.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ModelFamily } from '../src/engine/local/model/config.js';
import { maxAbsDiff, setup, trainTorch, trainTs, type Trained } from './helpers/torch-learner.js';

export function assertSame(label: string, ours: Trained, theirs: Trained, tol = 1e-4): void {
  assert.equal(theirs.metrics.length, ours.metrics.length, `${label}: step count`);
  ours.metrics.forEach((m, i) => {
    const t = theirs.metrics[i]!;
    assert.ok(Math.abs(m.loss - t.loss) <= tol * Math.max(1, Math.abs(m.loss)), `${label} step ${i + 1}: loss ${m.loss} vs ${t.loss}`);
    assert.ok(Math.abs(m.gradNorm - t.gradNorm) <= tol * Math.max(1, m.gradNorm), `${label} step ${i + 1}: grad norm ${m.gradNorm} vs ${t.gradNorm}`);
    assert.equal(t.step, m.step);
    assert.equal(t.tokens, m.tokens);
    assert.ok(Math.abs(m.clipFraction - t.clipFraction) <= 1e-6, `${label} step ${i + 1}: clip fraction ${m.clipFraction} vs ${t.clipFraction}`);
  });
  const d = maxAbsDiff(ours.values, theirs.values);
  assert.ok(d <= tol, `${label}: parameters differ by up to ${d.toExponential(3)}`);
}

const cases: [ModelFamily, boolean, 'policy' | 'topk'][] = [
  ['qwen3', true, 'policy'], ['llama', false, 'policy'], ['qwen2', true, 'policy'], ['qwen3', false, 'topk'],
];
for (const [family, lora, loss] of cases) {
  test(`${family}, ${lora ? 'LoRA' : 'full fine-tuning'}, ${loss} loss: the PyTorch learner matches the TypeScript learner`, async () => {
    const s = setup(family, lora, loss);
    const ours = trainTs(s);
    assert.ok(ours.metrics.some((m) => m.clipFraction > 0) || loss === 'topk', 'the batch should exercise the clip');
    assertSame(`${family} ${lora ? 'lora' : 'full'} ${loss}`, ours, await trainTorch(s));
  });
}
