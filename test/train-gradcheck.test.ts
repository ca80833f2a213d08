// Finite-difference checks of the training backward: for each family, full fine-tuning and
// LoRA, the directional derivative of a scalar built from the forward's outputs (log-probs,
// entropies, extra-id log-probs) must match the analytic gradient along random directions.
// The engine computes in float32, so the step is large and the tolerance a few 1e-3; the
// PyTorch cross-check (train-torch.test) pins the gradients to 1e-4.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { modelConfigOf, randomParams, PRESETS } from '../src/engine/local/model/init.js';
import type { ModelFamily } from '../src/engine/local/model/config.js';
import { allocateParams, type ParamStore } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { Lora } from '../src/engine/local/train/lora.js';
import { TrainModel } from '../src/engine/local/train/model.js';
import type { TrainSequence } from '../src/engine/local/train/packing.js';
import type { LinearName } from '../src/engine/local/train/model-params.js';

const kernels = loadKernels();

function tinyConfig(family: ModelFamily, tied: boolean) {
  return modelConfigOf(
    {
      family,
      ...PRESETS.tiny!,
      vocabSize: 96,
      hiddenSize: 32,
      intermediateSize: 48,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 8,
      tieWordEmbeddings: tied,
    },
    [1],
  );
}

const batch: TrainSequence[] = [
  { tokens: [5, 17, 42, 8, 90, 3, 77, 12], promptLength: 3 },
  { tokens: [60, 2, 33, 71, 9], promptLength: 1 },
];

/** Scalar objective: sum_t a_t lp_t + b_t H_t + sum_{t,k} c_tk lpExtra_tk, fixed random weights. */
function objective(model: TrainModel, withBackward: boolean): number {
  const K = 2;
  const R = batch.reduce((a, s) => a + s.tokens.length - s.promptLength, 0);
  const ids = Int32Array.from({ length: R * K }, (_, i) => (i * 29 + 7) % 96);
  const out = model.forward(batch, { K, ids });
  const rng = createRng(77);
  const a = Float32Array.from({ length: R }, () => rng.next() * 2 - 1);
  const b = Float32Array.from({ length: R }, () => rng.next() * 2 - 1);
  const c = Float32Array.from({ length: R * K }, () => rng.next() * 2 - 1);
  let f = 0;
  for (let i = 0; i < R; i++) f += a[i]! * out.logprobs[i]! + b[i]! * out.entropy[i]!;
  for (let i = 0; i < R * K; i++) f += c[i]! * out.extraLogprobs![i]!;
  if (withBackward) model.backward(a, b, c);
  return f;
}

function directionalCheck(name: string, values: Float32Array, grads: Float32Array, evaluate: () => number) {
  const rng = createRng(name.length * 1009);
  for (let trial = 0; trial < 3; trial++) {
    const dir = Float32Array.from({ length: values.length }, () => rng.next() * 2 - 1);
    let analytic = 0;
    for (let i = 0; i < values.length; i++) analytic += grads[i]! * dir[i]!;
    // Central differences at h and h/2, combined by Richardson extrapolation, cancel the h^2
    // term; the perturbation has norm ~0.02 whatever the tensor size, well above float32 noise.
    const h = 0.02 / Math.sqrt(values.length / 3);
    const saved = values.slice();
    const central = (step: number) => {
      for (let i = 0; i < values.length; i++) values[i] = saved[i]! + step * dir[i]!;
      const fPlus = evaluate();
      for (let i = 0; i < values.length; i++) values[i] = saved[i]! - step * dir[i]!;
      const fMinus = evaluate();
      values.set(saved);
      return (fPlus - fMinus) / (2 * step);
    };
    const numeric = (4 * central(h / 2) - central(h)) / 3;
    let gNorm = 0,
      dNorm = 0;
    for (let i = 0; i < values.length; i++) {
      gNorm += grads[i]! ** 2;
      dNorm += dir[i]! ** 2;
    }
    // The typical size of a random directional derivative is |g| |d| / sqrt(n): errors are
    // measured against the larger of that and the derivative itself.
    const scale = Math.max(Math.abs(numeric), Math.abs(analytic), Math.sqrt((gNorm * dNorm) / values.length));
    const err = Math.abs(numeric - analytic) / scale;
    if (process.env.GRADCHECK_VERBOSE) console.log(name, err.toExponential(2));
    assert.ok(
      err < 5e-3,
      `${name} trial ${trial}: analytic ${analytic.toExponential(5)} vs numeric ${numeric.toExponential(5)} (rel err ${err.toExponential(2)})`,
    );
  }
}

for (const family of ['qwen3', 'qwen2', 'llama'] as ModelFamily[]) {
  for (const tied of [true, false]) {
    test(`${family}${tied ? '' : ' (untied head)'}: full fine-tuning gradients match finite differences`, () => {
      const cfg = tinyConfig(family, tied);
      const params = randomParams(cfg, 3, 0.3);
      const grads: ParamStore = allocateParams(params.specs);
      const model = new TrainModel(cfg, params, grads, null, kernels);
      objective(model, true);
      // Check every tensor separately, so a wrong gradient is named.
      for (const spec of params.specs) {
        directionalCheck(spec.name, params.get(spec.name), grads.get(spec.name), () => objective(model, false));
      }
    });
  }
  // All seven: q, k, v and gate, up run their LoRA products stacked (linear.ts). q and v: stacked,
  // with k's plain projection added after them; up alone: no group.
  for (const targets of [
    ['q', 'k', 'v', 'o', 'gate', 'up', 'down'],
    ['q', 'v', 'up'],
  ] as LinearName[][]) {
    test(`${family}: LoRA gradients match finite differences (targets ${targets.join(', ')})`, () => {
      const cfg = tinyConfig(family, true);
      const params = randomParams(cfg, 4, 0.3);
      const lora = new Lora(cfg, { rank: 3, alpha: 6, targets });
      lora.initialise(5);
      // B starts at zero in PEFT; give it values so both A and B gradients are exercised.
      const rng = createRng(6);
      for (const t of lora.tensors)
        if (t.part === 'B')
          lora.view(t).forEach((_, i, v) => {
            v[i] = (rng.next() - 0.5) * 0.4;
          });
      const model = new TrainModel(cfg, params, null, lora, kernels);
      objective(model, true);
      for (const t of lora.tensors)
        directionalCheck(t.name, lora.view(t), lora.view(t, lora.grads), () => objective(model, false));
    });
  }
}
