// learn/ppo.ts finishes the OPD term against the learner's own pre-batch log-probs: an `opd`
// sample trains exactly like the same sample with advantages_t + w (teacher_t - old_t) made
// explicit from those log-probs, and a token without a teacher value is masked, not read as 0.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { DEFAULT_LEARNER, LearnerCore, type LearnerConfig } from '../src/engine/local/train/learner.js';
import type { TrainingSample } from '../src/engine/types.js';
import { DEFAULT_PPO, trainBatch, type BatchSample } from '../src/learn/ppo.js';
import { makeTinyModel } from './helpers/models.js';

const dir = makeTinyModel({ family: 'llama', seed: 71, initStd: 0.05 });
const cfg = readModelFolder(dir).config;
const base = loadWeights(dir, cfg);
// Two epochs: the second step must still use the pre-batch anchor, not the moved policy.
const config: LearnerConfig = {
  ...DEFAULT_LEARNER,
  mode: { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'v', 'down'] } },
  optimizer: { ...DEFAULT_LEARNER.optimizer, lr: 1e-2, weightDecay: 0 },
  seed: 4,
};
const ppo = { ...DEFAULT_PPO, miniBatchSize: 2, epochs: 2 };
const newLearner = () => new LearnerCore(cfg, base, config, loadKernels());

const plain: TrainingSample[] = [
  { promptIds: [10, 20, 30], completionIds: [7, 300, 12, 99], advantages: [0.5, -0.25, 0.75, 0.1] },
  { promptIds: [4, 5], completionIds: [60, 61, 62], advantages: [1, 1, 1] },
];
const teacher = [-1.5, Number.NaN, -4, -0.5];
const weight = 0.7;
const withOpd = (teacherLogprobs: number[]): BatchSample[] => [
  { ...plain[0]!, opd: { teacherLogprobs, weight } },
  plain[1]!,
];

/** plain[0] with the OPD term spelled out from `old`, its masked tokens given mask 0. */
function explicit(old: Float32Array, teacherLogprobs: number[]): TrainingSample[] {
  const s = plain[0]!;
  return [
    {
      ...s,
      advantages: s.advantages.map((a, t) =>
        Number.isFinite(teacherLogprobs[t]) ? a + weight * (teacherLogprobs[t]! - old[t]!) : 0,
      ),
      mask: teacherLogprobs.map((x) => (Number.isFinite(x) ? 1 : 0)),
    },
    plain[1]!,
  ];
}

test('trainBatch with opd equals trainBatch with the OPD advantages made explicit from the pre-batch log-probs', async () => {
  const finite = teacher.map((x, t) => (Number.isFinite(x) ? x : -2 - t));
  const a = newLearner(),
    b = newLearner(),
    c = newLearner();
  const old = b.logprobs(plain)[0]!;
  const ma = await trainBatch(a, withOpd(finite), ppo);
  await trainBatch(b, explicit(old, finite), ppo);
  assert.ok(ma.length === 2 && ma.every((m) => m.applied));
  assert.deepEqual(a.values, b.values);
  await trainBatch(c, plain, ppo);
  assert.notDeepEqual(a.values, c.values, 'the OPD term changed nothing');
});

test('a NaN teacher log-prob masks its token instead of being read as 0', async () => {
  const a = newLearner(),
    b = newLearner();
  const old = b.logprobs(plain)[0]!;
  await trainBatch(a, withOpd(teacher), ppo);
  await trainBatch(b, explicit(old, teacher), ppo);
  assert.deepEqual(a.values, b.values);
});

test('OPD samples under the top-k distillation loss are refused before anything trains', async () => {
  const a = newLearner();
  const before = a.values.slice();
  await assert.rejects(
    trainBatch(a, withOpd(teacher), { ...ppo, loss: { kind: 'topk', entropyCoef: 0 } }),
    /OPD samples need the policy loss/,
  );
  assert.equal(a.steps, 0);
  assert.deepEqual(a.values, before);
});

test('opd.teacherLogprobs must have one entry per completion token, and a finite weight', async () => {
  const a = newLearner();
  await assert.rejects(
    trainBatch(a, [{ ...plain[0]!, opd: { teacherLogprobs: [-1, -2, -3], weight } }], ppo),
    /sample 0: opd\.teacherLogprobs has 3, but completionIds has 4 tokens/,
  );
  await assert.rejects(
    trainBatch(a, [{ ...plain[0]!, opd: { teacherLogprobs: teacher, weight: Number.NaN } }], ppo),
    /opd\.weight must be finite/,
  );
});
