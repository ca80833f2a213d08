// bf16 training (precision 'bf16': every GEMM's inputs rounded to bf16, fp32 sums and outputs)
// against PyTorch (test/reference/train_step.py) on a GQA model (4 query heads, 2 kv heads),
// LoRA and full fine-tuning:
//
// - "bf16-gemm": a float64 model whose every matrix product rounds its inputs to bf16 at the
//   same points as ours, forward and backward. What still separates the two is (a) fp32 vs
//   float64 arithmetic everywhere, which the fp32 check bounds by 1e-4 of a tensor's largest
//   gradient (test/train-torch.test.ts), and (b) the rare value that fp32 and float64 put on
//   different sides of a bf16 rounding boundary: that input then moves by one bf16 ulp, 2^-8
//   of itself, and its product term by 2^-8 of that term, which is at most 2^-8 of the largest
//   term (terms are summed with random signs, so it is far less of a whole output); and (c) one
//   rounding point the reference cannot share: the attention backward takes rowsum(P * dP) as
//   D = dO . O (FlashAttention's identity, train/attention.ts), with O from bf16-rounded P and V
//   (two roundings, up to 2^-8 of each term), while autograd sums P * dP with P unrounded; dS =
//   P * (dP - D) then carries that error undiminished where dP - D cancels, and it reaches every
//   weight gradient below the attention. (c) dominates: measured 8.5e-3 of a tensor's largest
//   gradient (layer 0, q/v). So the bound is four bf16 ulps, 2^-6 (1.6e-2) of the tensor's largest
//   gradient; the loss, which (c) does not reach, to (1e-4 + 2^-8) relative.
// - "autocast": float32 under torch.autocast (products output bf16, as GPUs train), which our
//   path does not match: it also rounds every product's output, 2^-9 relative each, and those
//   roundings compound through the layers. Reported, and bounded loosely (5%).
// - The exact float64 reference differs from ours by more than the bf16-gemm tolerance (2.3e-2
//   and 2.6e-2 measured), so the check above would see a path that skipped the rounding.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { writeSafetensors } from '../src/engine/local/model/safetensors.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { DEFAULT_LEARNER, LearnerCore, type LearnerConfig } from '../src/engine/local/train/learner.js';
import type { LossSpec, TrainingSample } from '../src/engine/types.js';
import { makeTinyModel, PYTHON, scratchDir, readAllTensors } from './helpers/models.js';

const TRAIN_STEP = fileURLToPath(new URL('../../test/reference/train_step.py', import.meta.url));
const LOSS_TOLERANCE = 1e-4 + 2 ** -8;
const TOLERANCE = 2 ** -6;
const AUTOCAST_BOUND = 0.05;
const LORA = { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const };

/** The largest |ours - theirs| over every tensor, each relative to that tensor's largest |theirs|. */
function worstRelative(
  ours: Map<string, Float32Array>,
  theirs: Map<string, Float32Array>,
): { worst: number; name: string } {
  assert.equal(ours.size, theirs.size, 'trainable tensor sets differ');
  let worst = 0,
    name = '';
  for (const [n, t] of theirs) {
    const o = ours.get(n)!;
    let scale = 1e-12,
      diff = 0;
    for (let i = 0; i < t.length; i++) scale = Math.max(scale, Math.abs(t[i]!));
    for (let i = 0; i < t.length; i++) diff = Math.max(diff, Math.abs(o[i]! - t[i]!));
    if (diff / scale > worst) [worst, name] = [diff / scale, n];
  }
  return { worst, name };
}

function torchStep(input: object, precision: string, dtype: string, out: string) {
  const run = spawnSync(PYTHON, [TRAIN_STEP], {
    input: JSON.stringify({ ...input, precision, dtype, out }),
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`train_step.py (${precision}) failed: ${run.stderr}`);
  return {
    loss: (JSON.parse(run.stdout) as { loss: number }).loss,
    grads: readAllTensors(join(out, 'grads.safetensors')),
  };
}

async function crossCheck(lora: boolean) {
  const dir = makeTinyModel({ family: 'qwen3', seed: 31 });
  const cfg = readModelFolder(dir).config;
  assert.ok(cfg.numKvHeads < cfg.numHeads, 'the check needs grouped-query attention');
  const base = loadWeights(dir, cfg);
  const config: LearnerConfig = {
    ...DEFAULT_LEARNER,
    mode: lora ? { kind: 'lora', spec: { ...LORA, targets: [...LORA.targets] } } : { kind: 'full' },
    activationBudgetBytes: Infinity,
    seed: 3,
    precision: 'bf16',
  };
  const loss: LossSpec = { kind: 'policy', eps: 0.2, epsHigh: 0.28, tisCap: 2, klCoef: 0, entropyCoef: 0.01 };
  const learner = new LearnerCore(cfg, base, config, loadKernels());
  const work = scratchDir('ocrl-bf16-');
  let adapter: string | null = null;
  if (lora) {
    const rng = createRng(9); // nonzero B, so A's gradient is exercised too
    for (const t of learner.lora!.tensors)
      if (t.part === 'B')
        learner.lora!.view(t).forEach((_, i, v) => {
          v[i] = (rng.next() - 0.5) * 0.2;
        });
    adapter = join(work, 'adapter.safetensors');
    writeSafetensors(
      adapter,
      learner.lora!.tensors.map((t) => ({ name: t.name, shape: t.shape, data: learner.lora!.view(t) })),
    );
  }
  const rng = createRng(5);
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rng.next() * cfg.vocabSize));
  // Two sequences, one longer than a 128-row attention block.
  const shapes = [
    { promptIds: ids(150), completionIds: ids(40) },
    { promptIds: ids(9), completionIds: ids(12) },
  ];
  const samples: TrainingSample[] = shapes.map((s) => ({
    ...s,
    advantages: s.completionIds.map(() => (rng.next() - 0.4) * 2),
  }));
  learner.zeroGrad();
  const ours = learner.forwardBackward(samples, loss, samples.length);
  const grads = new Map<string, Float32Array>();
  if (lora) for (const t of learner.lora!.tensors) grads.set(t.name, learner.lora!.view(t, learner.gradients));
  else for (const s of learner.params.specs) grads.set(s.name, learner.gradients.subarray(s.offset, s.offset + s.size));

  const input = {
    model: dir,
    lora: lora ? { ...LORA, adapter } : null,
    batch: samples.map((s) => ({
      tokens: [...s.promptIds, ...s.completionIds],
      promptLength: s.promptIds.length,
      advantages: s.advantages,
    })),
    loss: { type: 'policy', eps: 0.2, epsHigh: 0.28, tisCap: 2, klCoef: 0, entropyCoef: 0.01 },
    optimizer: { lr: 1e-3, clipNorm: null },
  };
  const matched = torchStep(input, 'bf16-gemm', 'float64', join(work, 'matched'));
  const autocast = torchStep(input, 'autocast', 'float32', join(work, 'autocast'));
  const exact = torchStep(input, 'exact', 'float64', join(work, 'exact'));
  const g = worstRelative(grads, matched.grads),
    a = worstRelative(grads, autocast.grads),
    e = worstRelative(grads, exact.grads);
  const rel = (x: number, y: number) => Math.abs(x - y) / Math.abs(y);
  console.log(
    `${lora ? 'LoRA' : 'full'}: loss ${ours.loss} vs bf16-gemm ${matched.loss} (rel ${rel(ours.loss, matched.loss).toExponential(2)}), ` +
      `autocast ${autocast.loss} (rel ${rel(ours.loss, autocast.loss).toExponential(2)}), exact ${exact.loss}; worst gradient gap: ` +
      `bf16-gemm ${g.worst.toExponential(2)} (${g.name}), autocast ${a.worst.toExponential(2)} (${a.name}), exact ${e.worst.toExponential(2)}`,
  );
  assert.ok(rel(ours.loss, matched.loss) <= LOSS_TOLERANCE, `loss ${ours.loss} vs bf16-gemm reference ${matched.loss}`);
  assert.ok(g.worst <= TOLERANCE, `gradient ${g.name}: ${g.worst} of its largest from the bf16-gemm reference`);
  assert.ok(a.worst <= AUTOCAST_BOUND, `gradient ${a.name}: ${a.worst} of its largest from torch.autocast`);
  assert.ok(
    e.worst > TOLERANCE,
    `bf16 gradients should differ from the exact ones by more than ${TOLERANCE} (got ${e.worst})`,
  );
}

test('bf16 LoRA training: loss and gradients match a bf16-rounding PyTorch reference (GQA)', () => crossCheck(true));
test('bf16 full fine-tuning: loss and gradients match a bf16-rounding PyTorch reference (GQA)', () =>
  crossCheck(false));
