// Learning sanity: on a generated tiny model, repeated steps with a positive advantage on a
// fixed completion drive its log-prob up, a negative advantage drives it down; both for LoRA
// and full fine-tuning. And several PPO epochs over one batch make the ratio clip act.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { DEFAULT_LEARNER, LearnerCore, type LearnerConfig } from '../src/engine/local/train/learner.js';
import type { TrainingSample } from '../src/engine/types.js';
import { DEFAULT_PPO, trainBatch } from '../src/learn/ppo.js';
import { makeTinyModel } from './helpers/models.js';

const dir = makeTinyModel({ family: 'qwen3', seed: 41, initStd: 0.05 });
const cfg = readModelFolder(dir).config;
const base = loadWeights(dir, cfg);
const promptIds = [10, 20, 30, 40, 50];
const completionIds = [7, 7, 300, 12, 99, 5];

function meanLogprob(learner: LearnerCore): number {
  const lp = learner.logprobs([{ promptIds, completionIds, advantages: completionIds.map(() => 0) }])[0]!;
  return lp.reduce((a, b) => a + b, 0) / lp.length;
}

async function train(mode: LearnerConfig['mode'], advantage: number, steps: number, lr: number) {
  const learner = new LearnerCore(
    cfg,
    base,
    { ...DEFAULT_LEARNER, mode, optimizer: { ...DEFAULT_LEARNER.optimizer, lr, weightDecay: 0 } },
    loadKernels(),
  );
  const before = meanLogprob(learner);
  const sample: TrainingSample = { promptIds, completionIds, advantages: completionIds.map(() => advantage) };
  for (let i = 0; i < steps; i++) await trainBatch(learner, [sample], DEFAULT_PPO);
  return { before, after: meanLogprob(learner) };
}

const lora: LearnerConfig['mode'] = {
  kind: 'lora',
  spec: { rank: 8, alpha: 16, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] },
};

test('LoRA: a positive advantage raises the completion log-prob, a negative one lowers it', async () => {
  const up = await train(lora, 1, 200, 3e-3);
  assert.ok(up.after > up.before + 2, `log-prob went ${up.before.toFixed(3)} -> ${up.after.toFixed(3)}`);
  const down = await train(lora, -1, 200, 3e-3);
  assert.ok(down.after < down.before - 2, `log-prob went ${down.before.toFixed(3)} -> ${down.after.toFixed(3)}`);
});

test('full fine-tuning: the same, and the base weights stay untouched', async () => {
  const snapshot = base.data.slice();
  const up = await train({ kind: 'full' }, 1, 100, 1e-3);
  assert.ok(up.after > up.before + 2, `log-prob went ${up.before.toFixed(3)} -> ${up.after.toFixed(3)}`);
  const down = await train({ kind: 'full' }, -1, 100, 1e-3);
  assert.ok(down.after < down.before - 2, `log-prob went ${down.before.toFixed(3)} -> ${down.after.toFixed(3)}`);
  assert.deepEqual(base.data, snapshot, 'full fine-tuning must train a copy, not the shared base');
});

test('several PPO epochs over one batch: the first step has ratio 1 (no clipping), later ones clip', async () => {
  const learner = new LearnerCore(
    cfg,
    base,
    {
      ...DEFAULT_LEARNER,
      mode: lora,
      optimizer: { ...DEFAULT_LEARNER.optimizer, lr: 2e-2, weightDecay: 0 },
    },
    loadKernels(),
  );
  const metrics = await trainBatch(learner, [{ promptIds, completionIds, advantages: completionIds.map(() => 1) }], {
    ...DEFAULT_PPO,
    epochs: 6,
    miniBatchSize: 1,
  });
  assert.equal(metrics.length, 6);
  assert.equal(metrics[0]!.clipFraction, 0);
  assert.ok(Math.abs(metrics[0]!.approxKl) < 1e-5);
  assert.ok(
    metrics.some((m) => m.clipFraction > 0),
    `clip fractions: ${metrics.map((m) => m.clipFraction.toFixed(2)).join(', ')}`,
  );
  assert.ok(metrics.every((m) => m.applied && Number.isFinite(m.gradNorm) && m.tokensPerSecond > 0));
});

test('samples whose lengths disagree are refused before anything is computed', async () => {
  const learner = new LearnerCore(cfg, base, DEFAULT_LEARNER, loadKernels());
  await assert.rejects(
    trainBatch(learner, [{ promptIds, completionIds, advantages: [1, 1] }], DEFAULT_PPO),
    /sample 0: advantages has 2, but completionIds has 6 tokens/,
  );
  assert.equal(learner.steps, 0);
});
