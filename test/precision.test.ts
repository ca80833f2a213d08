// Precision: the auto rule, bf16 serving (decode rows through gemmBf16, the log-prob gap to
// fp32 measured), a bf16 engine publishing a full version (its bf16 copy made between steps),
// and bf16 training still learning.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LocalEngine } from '../src/engine/local/engine.js';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { PRESETS } from '../src/engine/local/model/init.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { Transformer } from '../src/engine/local/model/transformer.js';
import { loadWeights, paramStoreOver, tensorSpecs } from '../src/engine/local/model/weights.js';
import { bf16ParamsOf, parsePrecision, resolvePrecision } from '../src/engine/local/precision.js';
import { DEFAULT_LEARNER, LearnerCore } from '../src/engine/local/train/learner.js';
import { publishDuringGeneration } from './helpers/policy-updates.js';
import { makeTinyModel, maxAbsDiff } from './helpers/models.js';
import { logSoftmax, sampleAndScore } from './helpers/logprob-gap.js';
import { DEFAULT_PPO, trainBatch } from '../src/learn/ppo.js';

test('auto without VNNI is bf16 only with native kernels on bf16 instructions; bad settings are refused', () => {
  const info = (bf16Instructions: boolean) => ({
    gemm: 'onednn' as const,
    isa: 'x',
    bf16Instructions,
    int8Dot: 'avx512' as const,
  });
  assert.equal(resolvePrecision('auto', { name: 'native', info: info(true) }), 'bf16');
  assert.equal(resolvePrecision('auto', { name: 'native', info: info(false) }), 'fp32');
  assert.equal(resolvePrecision('auto', { name: 'portable', info: info(true) }), 'fp32');
  assert.equal(resolvePrecision('fp32', { name: 'native', info: info(true) }), 'fp32');
  assert.equal(resolvePrecision('bf16', { name: 'portable', info: info(false) }), 'bf16');
  assert.equal(parsePrecision('bf16'), 'bf16');
  assert.throws(() => parsePrecision('fp16'), /precision must be one of fp32, bf16, int8, auto, got "fp16"/);
});

/** A kernels object that counts the GEMV and bf16 GEMM calls, computing with the real ones. */
function counting(k: Kernels): { kernels: Kernels; calls: { sgemv: number; gemmBf16: number; decodeBf16: number } } {
  const calls = { sgemv: 0, gemmBf16: 0, decodeBf16: 0 };
  const kernels: Kernels = Object.create(k) as Kernels;
  kernels.sgemv = (...a: Parameters<Kernels['sgemv']>) => {
    calls.sgemv++;
    k.sgemv(...a);
  };
  kernels.gemmBf16 = (...a: Parameters<Kernels['gemmBf16']>) => {
    calls.gemmBf16++;
    if (a[2] === 1) calls.decodeBf16++;
    k.gemmBf16(...a);
  };
  return { kernels, calls };
}

for (const preset of ['tiny', 'small'] as const) {
  test(`${preset}: bf16 serving decodes through gemmBf16 (no sgemv); log-prob gap to fp32 over sampled tokens`, () => {
    const dir = makeTinyModel({
      family: 'qwen3',
      seed: 7,
      initStd: 0.05,
      shape: { ...PRESETS[preset]!, maxPositionEmbeddings: 512 },
    });
    const cfg = readModelFolder(dir).config;
    const params = loadWeights(dir, cfg);
    const k = loadKernels();
    const { kernels, calls } = counting(k);
    const fp32 = new Transformer(cfg, params, k);
    const bf16 = new Transformer(cfg, params, kernels, bf16ParamsOf(k, params.specs, params.data));
    const prompt = Array.from({ length: 20 }, (_, i) => (i * 37 + 11) % cfg.vocabSize);
    const [lp32, lp16] = sampleAndScore([fp32, bf16], cfg, prompt, 100, 3);
    assert.equal(calls.sgemv, 0, 'a bf16 decode row must not take the fp32 GEMV');
    // 7 projections per layer and the head, for each of 100 decode rows.
    assert.ok(calls.decodeBf16 >= 100 * (7 * cfg.numLayers + 1), `decode rows through gemmBf16: ${calls.decodeBf16}`);
    const gaps = lp32!.map((x, i) => Math.abs(x - lp16![i]!));
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length,
      max = Math.max(...gaps);
    console.log(
      `${preset}: |logprob_bf16 - logprob_fp32| over ${gaps.length} sampled tokens: mean ${mean.toExponential(2)}, max ${max.toExponential(2)}`,
    );
    assert.ok(mean > 0, 'bf16 must round something');
    // Each of the ~2L+1 rounded GEMMs on a path moves a logit by ~2^-9 of its terms: a few hundredths of a nat at most.
    assert.ok(max < 0.1, `max gap ${max}`);
  });
}

test('a bf16 engine publishes a full version: its bf16 copy is made between steps, in-flight work stays on its version', async () => {
  const dir = makeTinyModel({ family: 'qwen3', seed: 17 });
  const cfg = readModelFolder(dir).config;
  const engine = await LocalEngine.open(dir, { precision: 'bf16', kvCacheBytes: 0 });
  try {
    assert.equal(engine.info.precision, 'bf16');
    assert.ok(engine.info.baseBf16 && engine.info.baseBf16.byteLength === 2 * engine.info.parameters);
    const prompt = [1, 2, 3, 4, 5],
      completion = [9, 8, 7, 6];
    const next = await publishDuringGeneration(engine, prompt);
    const served = await engine.logprobs(prompt, completion, { version: 1 });
    const store = paramStoreOver(tensorSpecs(cfg), next);
    const k = loadKernels();
    const direct = new Transformer(cfg, store, k, bf16ParamsOf(k, store.specs, store.data));
    const logits = direct.forward([
      { cache: direct.newKvCache(), tokens: [...prompt, ...completion], logitsFrom: prompt.length - 1 },
    ])[0]!;
    const expected = completion.map(
      (id, t) => logSoftmax(logits.subarray(t * cfg.vocabSize, (t + 1) * cfg.vocabSize), cfg.vocabSize)[id]!,
    );
    assert.ok(maxAbsDiff(expected, served.logprobs) < 1e-5, `served ${served.logprobs} vs ${expected}`);
  } finally {
    await engine.close();
  }
});

test('bf16 LoRA training still learns: a positive advantage raises the completion log-prob', async () => {
  const dir = makeTinyModel({ family: 'qwen3', seed: 41, initStd: 0.05 });
  const cfg = readModelFolder(dir).config;
  const mode = {
    kind: 'lora' as const,
    spec: { rank: 8, alpha: 16, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const },
  };
  const learner = new LearnerCore(
    cfg,
    loadWeights(dir, cfg),
    {
      ...DEFAULT_LEARNER,
      mode: { ...mode, spec: { ...mode.spec, targets: [...mode.spec.targets] } },
      precision: 'bf16',
      optimizer: { ...DEFAULT_LEARNER.optimizer, lr: 3e-3, weightDecay: 0 },
    },
    loadKernels(),
  );
  const sample = {
    promptIds: [10, 20, 30, 40, 50],
    completionIds: [7, 7, 300, 12, 99, 5],
    advantages: [1, 1, 1, 1, 1, 1],
  };
  const mean = () => {
    const lp = learner.logprobs([sample])[0]!;
    return lp.reduce((a, b) => a + b, 0) / lp.length;
  };
  const before = mean();
  for (let i = 0; i < 100; i++) await trainBatch(learner, [sample], DEFAULT_PPO);
  const after = mean();
  assert.ok(after > before + 2, `log-prob went ${before.toFixed(3)} -> ${after.toFixed(3)}`);
});

test('bf16 full fine-tuning keeps its bf16 copy current after each step', async () => {
  const dir = makeTinyModel({ family: 'qwen3', seed: 41, initStd: 0.05 });
  const cfg = readModelFolder(dir).config;
  const k = loadKernels();
  const learner = new LearnerCore(
    cfg,
    loadWeights(dir, cfg),
    { ...DEFAULT_LEARNER, mode: { kind: 'full' }, precision: 'bf16' },
    k,
  );
  await trainBatch(learner, [{ promptIds: [1, 2, 3], completionIds: [4, 5], advantages: [1, 1] }], DEFAULT_PPO);
  const expected = bf16ParamsOf(k, learner.params.specs, learner.params.data).data;
  assert.deepEqual(learner.bf16Values, expected);
});
