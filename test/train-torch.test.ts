// The trainer against PyTorch autograd (test/reference/train_step.py): same weights, same batch,
// same loss; gradients agree to 1e-4 (relative to each tensor's largest gradient) and one AdamW
// step gives the same parameters, for every family, full fine-tuning and LoRA, policy and
// top-K distillation losses; and on packed sequences of 300 and 520 tokens (several attention
// query blocks, GQA), with the whole tape kept and with layers recomputed (checkpointing), and
// with the LM head's logits computed (and recomputed in the backward) in chunks of rows.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import type { ModelFamily } from '../src/engine/local/model/config.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { writeSafetensors } from '../src/engine/local/model/safetensors.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { LearnerCore, type LearnerConfig } from '../src/engine/local/train/learner.js';
import { trainStepBytes } from '../src/engine/local/train/memory.js';
import { TrainModel } from '../src/engine/local/train/model.js';
import type { LossSpec, TrainingSample } from '../src/engine/types.js';
import { makeTinyModel, PYTHON, scratchDir, readAllTensors } from './helpers/models.js';

const TRAIN_STEP = fileURLToPath(new URL('../../test/reference/train_step.py', import.meta.url));
// eps is large so that the first Adam step, lr * g / (|g| + eps), stays well conditioned where
// gradients are tiny: with eps = 1e-8 a 1e-9 gradient difference moves such a weight by ~lr/10.
const optimizer = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-3, weightDecay: 0.1, warmupSteps: 0, maxGradNorm: 1 };

function compare(label: string, ours: Float32Array, theirs: Float32Array, tol: number) {
  let scale = 0,
    worst = 0;
  for (let i = 0; i < theirs.length; i++) scale = Math.max(scale, Math.abs(theirs[i]!));
  for (let i = 0; i < theirs.length; i++) worst = Math.max(worst, Math.abs(ours[i]! - theirs[i]!));
  assert.ok(
    worst <= tol * Math.max(scale, 1e-6),
    `${label}: max |ours - torch| = ${worst.toExponential(3)}, largest |torch| = ${scale.toExponential(3)}`,
  );
}

interface CheckOptions {
  /** Sequences of 300, 5 and 520 tokens instead of 13 and 12. */
  long?: boolean;
  /** Recompute layers in the backward (an activation budget of 0) or keep the whole tape (no budget). */
  checkpoint?: boolean;
  /**
   * Chunk the LM head into this many rows (with `long`): the budget is then exactly the step's
   * bytes in that layout, which the model picks as the cheapest that fits.
   */
  headChunkRows?: number;
}

async function crossCheck(family: ModelFamily, lora: boolean, lossKind: 'policy' | 'topk', opts: CheckOptions = {}) {
  const dir = makeTinyModel({ family, seed: 31, shape: { tieWordEmbeddings: family !== 'llama' } });
  const cfg = readModelFolder(dir).config;
  const base = loadWeights(dir, cfg);
  const budget = opts.headChunkRows
    ? trainStepBytes(cfg, {
        tokens: 300 + 5 + 520,
        completionTokens: 70 + 2 + 120,
        longestSequence: 520,
        loraRank: lora ? 4 : 0,
        checkpoint: opts.checkpoint ?? false,
        headChunkRows: opts.headChunkRows,
      })
    : opts.checkpoint
      ? 0
      : Infinity;
  const config: LearnerConfig = {
    mode: lora
      ? { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } }
      : { kind: 'full' },
    optimizer,
    microBatchTokens: 4096,
    activationBudgetBytes: budget,
    headChunkRows: opts.headChunkRows,
    seed: 3,
  };
  const loss: LossSpec =
    lossKind === 'policy'
      ? { kind: 'policy', eps: 0.2, epsHigh: 0.28, tisCap: 2, klCoef: 0.1, entropyCoef: 0.01 }
      : { kind: 'topk', entropyCoef: 0 };
  const learner = new LearnerCore(cfg, base, config, loadKernels());
  const work = scratchDir('ocrl-torch-');
  let adapterPath: string | null = null;
  if (lora) {
    // Nonzero B, so A's gradient is exercised too.
    const rng = createRng(9);
    for (const t of learner.lora!.tensors)
      if (t.part === 'B')
        learner.lora!.view(t).forEach((_, i, v) => {
          v[i] = (rng.next() - 0.5) * 0.2;
        });
    adapterPath = join(work, 'adapter.safetensors');
    writeSafetensors(
      adapterPath,
      learner.lora!.tensors.map((t) => ({ name: t.name, shape: t.shape, data: learner.lora!.view(t) })),
    );
  }
  const rng = createRng(5);
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rng.next() * cfg.vocabSize));
  const shapes = opts.long
    ? [
        // Query blocks of 128, 128 and 44 rows; one sequence shorter than a block; five blocks, the last of 8 rows.
        { promptIds: ids(230), completionIds: ids(70), mask: undefined },
        { promptIds: ids(3), completionIds: ids(2), mask: undefined },
        {
          promptIds: ids(400),
          completionIds: ids(120),
          mask: Array.from({ length: 120 }, (_, t) => (t % 7 === 3 ? 0 : 1)),
        },
      ]
    : [
        { promptIds: ids(7), completionIds: ids(6), mask: undefined },
        { promptIds: ids(3), completionIds: ids(9), mask: [1, 1, 0, 1, 1, 1, 1, 0, 1] },
      ];
  // Old, reference and rollout log-probs away from the current ones, so ratios cross both clip
  // bounds and some importance weights hit the cap.
  const current = learner.logprobs(shapes.map((s) => ({ ...s, advantages: s.completionIds.map(() => 0) })));
  const jitter = (lp: Float32Array, width: number, shift = 0) => lp.map((x) => x + (rng.next() - 0.5 + shift) * width);
  const old = current.map((lp) => jitter(lp, 0.8));
  // The KL reference is the frozen base, which the learner scores itself: with LoRA (B != 0) it
  // differs from the current policy; with full fine-tuning it equals it before the first step.
  const reference = new TrainModel(cfg, base, null, null, loadKernels());
  const refAll = reference.forward(
    shapes.map((s) => ({ tokens: [...s.promptIds, ...s.completionIds], promptLength: s.promptIds.length })),
  );
  const ref = shapes.map((s, i) =>
    refAll.logprobs.slice(refAll.offsets[i]!, refAll.offsets[i]! + s.completionIds.length),
  );
  const K = 3;
  const samples: TrainingSample[] = shapes.map((s, i) => ({
    ...s,
    advantages: s.completionIds.map(() => (rng.next() - 0.4) * 2),
    rolloutLogprobs: Array.from(jitter(old[i]!, 1.5, 0.2)),
    // Distinct teacher ids per token (a start id plus two others after it).
    ...(lossKind === 'topk'
      ? {
          teacherTop: {
            ids: s.completionIds.map((_, t) => {
              const a = (i * 31 + t * 7) % (cfg.vocabSize - K);
              return [a, a + 1, a + 2];
            }),
            logprobs: s.completionIds.map(() => [-0.7, -1.9, -3.1]),
          },
        }
      : {}),
  }));
  learner.zeroGrad();
  learner.forwardBackward(
    samples.map((s, i) => ({ ...s, oldLogprobs: old[i]! })),
    loss,
    samples.length,
  );
  const ourGrads = learner.gradients.slice();
  const step = learner.optimStep();
  assert.ok(step.applied);

  const input = {
    model: dir,
    dtype: 'float64',
    out: work,
    lora: lora
      ? { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'], adapter: adapterPath }
      : null,
    batch: samples.map((s, i) => ({
      tokens: [...s.promptIds, ...s.completionIds],
      promptLength: s.promptIds.length,
      advantages: s.advantages,
      mask: s.mask ?? s.completionIds.map(() => 1),
      oldLogprobs: Array.from(old[i]!),
      rolloutLogprobs: s.rolloutLogprobs,
      refLogprobs: Array.from(ref[i]!),
    })),
    loss:
      lossKind === 'policy'
        ? { type: 'policy', eps: 0.2, epsHigh: 0.28, tisCap: 2, klCoef: 0.1, entropyCoef: 0.01 }
        : {
            type: 'topk',
            teacherIds: samples.map((s) => s.teacherTop!.ids),
            teacherLogprobs: samples.map((s) => s.teacherTop!.logprobs),
          },
    optimizer: {
      lr: optimizer.lr,
      beta1: optimizer.beta1,
      beta2: optimizer.beta2,
      eps: optimizer.eps,
      weightDecay: optimizer.weightDecay,
      clipNorm: optimizer.maxGradNorm,
    },
  };
  const run = spawnSync(PYTHON, [TRAIN_STEP], { input: JSON.stringify(input), encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`train_step.py failed: ${run.stderr}`);
  const torch = JSON.parse(run.stdout) as { loss: number; gradNorm: number; metrics: { clipFraction: number } };
  if (lossKind === 'policy') assert.ok(torch.metrics.clipFraction > 0, 'the batch should exercise the clip');
  assert.ok(
    Math.abs(step.gradNorm - torch.gradNorm) <= 1e-4 * torch.gradNorm,
    `grad norm ${step.gradNorm} vs torch ${torch.gradNorm}`,
  );

  const torchGrads = readAllTensors(join(work, 'grads.safetensors'));
  const torchAfter = readAllTensors(join(work, 'after.safetensors'));
  const views = lora
    ? learner.lora!.tensors.map((t) => ({
        name: t.name,
        grad: learner.lora!.view(t, ourGrads),
        value: learner.lora!.view(t),
      }))
    : learner.params.specs.map((s) => ({
        name: s.name,
        grad: ourGrads.subarray(s.offset, s.offset + s.size),
        value: learner.params.get(s.name),
      }));
  assert.equal(torchGrads.size, views.length, 'trainable tensor sets differ');
  for (const v of views) {
    compare(`grad ${v.name}`, v.grad, torchGrads.get(v.name)!, 1e-4);
    compare(`after ${v.name}`, v.value, torchAfter.get(v.name)!, 1e-5);
  }
}

for (const family of ['qwen3', 'qwen2', 'llama'] as ModelFamily[]) {
  test(`${family}: full fine-tuning, policy loss (clip, TIS, KL, entropy): gradients and AdamW step match PyTorch`, () =>
    crossCheck(family, false, 'policy'));
  test(`${family}: LoRA, policy loss: gradients and AdamW step match PyTorch`, () =>
    crossCheck(family, true, 'policy'));
}
test('qwen3: LoRA, top-k distillation loss matches PyTorch', () => crossCheck('qwen3', true, 'topk'));
test('llama: full fine-tuning, top-k distillation loss matches PyTorch', () => crossCheck('llama', false, 'topk'));
for (const checkpoint of [false, true]) {
  const how = checkpoint ? 'layers recomputed' : 'whole tape';
  test(`qwen3: LoRA, packed 300 + 5 + 520 tokens, ${how}: gradients and AdamW step match PyTorch`, () =>
    crossCheck('qwen3', true, 'policy', { long: true, checkpoint }));
  test(`llama: full fine-tuning, packed 300 + 5 + 520 tokens, ${how}: gradients and AdamW step match PyTorch`, () =>
    crossCheck('llama', false, 'policy', { long: true, checkpoint }));
}
test('qwen2: full fine-tuning, top-k loss, packed 300 + 5 + 520 tokens, layers recomputed: matches PyTorch', () =>
  crossCheck('qwen2', false, 'topk', { long: true, checkpoint: true }));
// 192 completion rows in chunks of 50, 50, 50 and 42, which split the sequences' rows.
test('llama: full fine-tuning (untied head), top-k loss, packed 300 + 5 + 520 tokens, head chunked: matches PyTorch', () =>
  crossCheck('llama', false, 'topk', { long: true, headChunkRows: 50 }));
test('qwen3: LoRA, policy loss, packed 300 + 5 + 520 tokens, layers recomputed, head chunked: matches PyTorch', () =>
  crossCheck('qwen3', true, 'policy', { long: true, checkpoint: true, headChunkRows: 50 }));
