// Test helpers for the PyTorch learner: one batch of rl, opd and combine samples, and the same
// training config for the TypeScript learner (LearnerCore) and the PyTorch one (TorchLearner),
// both driven by learn/ppo.ts.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadKernels } from '../../src/engine/local/kernels/index.js';
import type { ModelFamily } from '../../src/engine/local/model/config.js';
import { readModelFolder } from '../../src/engine/local/model/folder.js';
import { loadWeights } from '../../src/engine/local/model/weights.js';
import { readPolicyUpdate } from '../../src/engine/local/policy-versions.js';
import { createRng } from '../../src/engine/local/sampling/random.js';
import { writePeftAdapter } from '../../src/engine/local/train/peft-adapter.js';
import { LearnerCore, type LearnerConfig } from '../../src/engine/local/train/learner.js';
import { DEFAULT_LAUNCH, type TorchLaunch } from '../../src/engine/torch/launcher.js';
import { TorchLearner, type TorchStatus } from '../../src/engine/torch/learner.js';
import type { StepMetrics, TrainingSample } from '../../src/engine/types.js';
import { trainBatch, type BatchSample, type PpoConfig } from '../../src/learn/ppo.js';
import { makeTinyModel, PYTHON, scratchDir } from './models.js';

export const TORCH_PYTHON = PYTHON;

export function conformanceConfig(lora: boolean): LearnerConfig {
  return {
    mode: lora
      ? { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } }
      : { kind: 'full' },
    // eps is large so tiny gradients do not turn into lr-sized steps (see train-torch.test.ts).
    optimizer: { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-3, weightDecay: 0.1, warmupSteps: 2, maxGradNorm: 1 },
    // Micro-batches of ~20 tokens.
    microBatchTokens: 20,
    activationBudgetBytes: Infinity,
    seed: 3,
  };
}

/** 5 samples: mini-batches of 2, 2 and 1, two epochs (6 steps). */
export function conformancePpo(loss: 'policy' | 'topk' = 'policy'): PpoConfig {
  return {
    loss:
      loss === 'policy'
        ? { kind: 'policy', eps: 0.2, epsHigh: 0.28, tisCap: 2, klCoef: 0.1, entropyCoef: 0.01 }
        : { kind: 'topk', entropyCoef: 0.01 },
    miniBatchSize: 2,
    epochs: 2,
  };
}

/** Five samples: rl (with rollout log-probs and a mask), opd (a NaN teacher token) and combine. */
export function conformanceBatch(vocab: number, loss: 'policy' | 'topk' = 'policy'): BatchSample[] {
  const rng = createRng(5);
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rng.next() * vocab));
  const around = (n: number, c: number, w: number) => Array.from({ length: n }, () => c + (rng.next() - 0.5) * w);
  const shapes: [number, number][] = [
    [7, 6],
    [3, 9],
    [5, 5],
    [9, 4],
    [4, 7],
  ];
  return shapes.map(([p, c], i) => {
    const s: TrainingSample = {
      promptIds: ids(p),
      completionIds: ids(c),
      advantages: Array(c).fill(i % 2 === 0 ? 1 : -1),
      rolloutLogprobs: around(c, -5, 3),
      ...(i === 1 ? { mask: Array.from({ length: c }, (_, t) => (t % 3 === 2 ? 0 : 1)) } : {}),
    };
    if (loss === 'topk') {
      return {
        ...s,
        teacherTop: {
          ids: s.completionIds.map((_, t) => [(t * 7) % vocab, (t * 7 + 1) % vocab, (t * 7 + 2) % vocab]),
          logprobs: s.completionIds.map((_, t) => [-0.7, t === 1 ? NaN : -1.9, -3.1]),
        },
      };
    }
    if (i === 2) {
      const teacherLogprobs = around(c, -4, 2).map((x, t) => (t === 3 ? NaN : x));
      return { ...s, advantages: Array(c).fill(0), opd: { teacherLogprobs, weight: 1 } };
    }
    if (i === 3) return { ...s, opd: { teacherLogprobs: around(c, -4, 2), weight: 0.5 } };
    return s;
  });
}

export interface Trained {
  metrics: StepMetrics[];
  values: Float32Array;
  /** The PyTorch learner's status at start. */
  status?: TorchStatus;
}

export interface Setup {
  dir: string;
  config: LearnerConfig;
  ppo: PpoConfig;
  samples: BatchSample[];
  /** PEFT folder both learners start from (LoRA), with a nonzero B so A trains from step 1. */
  initAdapter: string | null;
  ts: LearnerCore;
}

export function setup(family: ModelFamily, lora: boolean, loss: 'policy' | 'topk' = 'policy'): Setup {
  const dir = makeTinyModel({ family, seed: 31, shape: { tieWordEmbeddings: family !== 'llama' } });
  const cfg = readModelFolder(dir).config;
  const config = conformanceConfig(lora);
  const ts = new LearnerCore(cfg, loadWeights(dir, cfg), config, loadKernels());
  let initAdapter: string | null = null;
  if (ts.lora) {
    const rng = createRng(9);
    for (const t of ts.lora.tensors)
      if (t.part === 'B')
        ts.lora.view(t).forEach((_, i, v) => {
          v[i] = (rng.next() - 0.5) * 0.2;
        });
    initAdapter = join(scratchDir('ocrl-init-'), 'adapter');
    writePeftAdapter(initAdapter, ts.lora, { baseModel: dir });
  }
  return { dir, config, ppo: conformancePpo(loss), samples: conformanceBatch(cfg.vocabSize, loss), initAdapter, ts };
}

export async function trainTs(s: Setup): Promise<Trained> {
  const metrics = await trainBatch(s.ts, s.samples, s.ppo);
  return { metrics, values: s.ts.values.slice() };
}

/** The PyTorch learner for a setup, with its checkpoints and versions under `work`. */
export function openTorchLearner(
  s: Setup,
  work: string,
  launch: Partial<TorchLaunch> = {},
  opts: { keepReference?: boolean; keepVersions?: number } = {},
): Promise<TorchLearner> {
  return TorchLearner.open({
    launch: { ...DEFAULT_LAUNCH, python: TORCH_PYTHON, ...launch },
    config: s.config,
    keepReference: opts.keepReference ?? (s.ppo.loss.kind === 'policy' && s.ppo.loss.klCoef > 0),
    modelDir: s.dir,
    checkpointDir: join(work, 'checkpoints'),
    versionsDir: join(work, 'versions'),
    initAdapter: s.initAdapter,
    ...(opts.keepVersions === undefined ? {} : { keepVersions: opts.keepVersions }),
    versionAfter: 0,
  });
}

export async function trainTorch(s: Setup, launch: Partial<TorchLaunch> = {}): Promise<Trained> {
  const learner = await openTorchLearner(s, scratchDir('ocrl-torch-run-'), launch);
  try {
    const metrics = await trainBatch(learner, s.samples, s.ppo);
    return { metrics, values: await publishedValues(learner, s.dir), status: learner.resumed };
  } finally {
    await learner.close();
  }
}

/** Publishes the learner's weights and reads them back: the adapter's or the model's values. */
export async function publishedValues(learner: TorchLearner, modelDir: string): Promise<Float32Array> {
  const update = readPolicyUpdate(await learner.publish(), readModelFolder(modelDir).config);
  return update.kind === 'lora' ? update.data : new Float32Array(update.params);
}

export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Same number of steps, each with the same loss, grad norm and clip fraction; same parameters after. */
export function assertSame(label: string, ours: Trained, theirs: Trained, tol = 1e-4): void {
  assert.equal(theirs.metrics.length, ours.metrics.length, `${label}: step count`);
  ours.metrics.forEach((m, i) => {
    const t = theirs.metrics[i]!;
    assert.ok(
      Math.abs(m.loss - t.loss) <= tol * Math.max(1, Math.abs(m.loss)),
      `${label} step ${i + 1}: loss ${m.loss} vs ${t.loss}`,
    );
    assert.ok(
      Math.abs(m.gradNorm - t.gradNorm) <= tol * Math.max(1, m.gradNorm),
      `${label} step ${i + 1}: grad norm ${m.gradNorm} vs ${t.gradNorm}`,
    );
    assert.equal(t.step, m.step);
    assert.equal(t.tokens, m.tokens);
    assert.ok(
      Math.abs(m.clipFraction - t.clipFraction) <= 1e-6,
      `${label} step ${i + 1}: clip fraction ${m.clipFraction} vs ${t.clipFraction}`,
    );
  });
  const d = maxAbsDiff(ours.values, theirs.values);
  assert.ok(d <= tol, `${label}: parameters differ by up to ${d.toExponential(3)}`);
}
