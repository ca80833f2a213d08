// Frozen weights packed into oneDNN's layout (packBf16, gemmBf16Packed, train/packed-weights.ts):
// the packed product computes what gemmBf16 computes on the plain weights, a learner that packs
// trains as one that does not, and the memory plan takes the copies only where they cost no
// training sample its length.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { memoryPlan, trainingAffordsPacking } from '../src/engine/local/memory-plan.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { modelConfigOf, PRESETS } from '../src/engine/local/model/init.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { DEFAULT_LEARNER, LearnerCore, type LearnerConfig } from '../src/engine/local/train/learner.js';
import { maxTrainTokens, packedWeightBytes } from '../src/engine/local/train/memory.js';
import type { LossSpec, TrainingSample } from '../src/engine/types.js';
import { makeTinyModel } from './helpers/models.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20261207);
const GiB = 2 ** 30;

function bf16Of(x: Float32Array): Uint16Array {
  const out = new Uint16Array(x.length);
  native().toBf16(out, x, x.length);
  return out;
}

function maxAbs(a: Float32Array): number {
  let m = 0;
  for (const v of a) m = Math.max(m, Math.abs(v));
  return m;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Kernels that pack: oneDNN with bf16 instructions (what serve and train check). */
function packing() {
  const k = native();
  return k.info.gemm === 'onednn' && k.info.bf16Instructions ? k : null;
}

describe('packBf16 and gemmBf16Packed', { skip: skipNative }, () => {
  test('exist exactly where the GEMMs run on oneDNN', () => {
    const k = native();
    assert.equal(k.packBf16 !== undefined, k.info.gemm === 'onednn');
    assert.equal(k.gemmBf16Packed !== undefined, k.info.gemm === 'onednn');
  });

  test('compute what gemmBf16 computes on the plain weights, both directions, any rows', () => {
    const k = native();
    if (!k.packBf16) return assert.notEqual(k.info.gemm, 'onednn');
    // [outDim, inDim] of a weight W: the 0.6B model's k projection, and shapes that are not
    // multiples of oneDNN's blocks of 64 columns.
    for (const [outDim, inDim] of [
      [1024, 1024],
      [96, 64],
      [100, 48],
    ] as const) {
      const W = bf16Of(randomArrayFrom(random, outDim * inDim));
      const forward: Uint16Array | null = k.packBf16(true, outDim, inDim, W, inDim);
      const backward: Uint16Array | null = k.packBf16(false, inDim, outDim, W, inDim);
      if (!forward || !backward) {
        // oneDNN keeps a layout plain only without bf16 instructions (its reference code).
        assert.equal(k.info.bf16Instructions, false, `${outDim} x ${inDim} left plain`);
        continue;
      }
      assert.ok(forward.length >= outDim * inDim && backward.length >= outDim * inDim);
      for (const M of [1, 7, 130]) {
        const directions: [string, Uint16Array, number, number, boolean][] = [
          ['forward', forward, outDim, inDim, true],
          ['backward', backward, inDim, outDim, false],
        ];
        for (const [dir, P, N, K, transB] of directions) {
          for (const [alpha, beta, bf16A] of [
            [1, 0, true],
            [0.5, 1, false],
          ] as const) {
            const A32 = randomArrayFrom(random, M * K);
            const A = bf16A ? bf16Of(A32) : A32;
            const C0 = randomArrayFrom(random, M * N);
            const [expected, actual] = [C0.slice(), C0.slice()];
            k.gemmBf16(false, transB, M, N, K, alpha, A, K, W, inDim, beta, expected, N);
            const computed = k.gemmBf16Packed!(false, M, N, K, alpha, A, K, P, beta, actual, N);
            const what: string = `${dir} ${outDim}x${inDim}, M ${M}, alpha ${alpha}, beta ${beta}`;
            assert.equal(computed, true, `${what}: computed`);
            // The same bf16 products summed in fp32; only the order of the sums may differ.
            assert.ok(maxAbsDiff(actual, expected) <= 1e-6 * maxAbs(expected), `${what}: packed = plain`);
          }
        }
      }
    }
  });

  test('refuse weights packed for another shape, and a transposed output of the wrong size', () => {
    const k = native();
    if (!k.packBf16) return assert.notEqual(k.info.gemm, 'onednn');
    const W = bf16Of(randomArrayFrom(random, 128 * 64));
    const P = k.packBf16(true, 128, 64, W, 64);
    if (!P) return assert.equal(k.info.bf16Instructions, false, 'left plain');
    const A = randomArrayFrom(random, 4 * 128);
    assert.throws(
      () => k.gemmBf16Packed!(false, 4, 64, 128, 1, A, 128, P, 0, new Float32Array(4 * 64), 64),
      /P was packed for N = 128, K = 64, not N = 64, K = 128/,
    );
    assert.throws(() => k.gemmBf16Packed!(false, 4, 128, 64, 1, A, 64, P, 0, new Float32Array(8), 128), /C/);
    assert.equal(k.gemmBf16Packed!(false, 4, 128, 64, 1, A, 64, P, 0, new Float32Array(4 * 128), 128), true);
    assert.throws(() => k.packBf16!(true, 128, 64, W.subarray(1), 64), /B/);
    const forged = new Uint16Array(P.length);
    assert.throws(
      () => k.gemmBf16Packed!(false, 4, 128, 64, 1, A, 64, forged, 0, new Float32Array(4 * 128), 128),
      /P is not an array from packBf16/,
    );
    assert.throws(
      () => k.gemmBf16Packed!(false, 4, 128, 64, 1, A, 64, P.subarray(0, P.length - 1), 0, new Float32Array(512), 128),
      /P holds \d+ values; packBf16 makes \d+ for N = 128, K = 64/,
    );
  });
});

describe('a learner that packs its frozen weights', { skip: skipNative }, () => {
  test('trains as one that does not: the same loss and gradients, with the bytes it reports', () => {
    const dir = makeTinyModel({ family: 'qwen3', seed: 41 });
    const cfg = readModelFolder(dir).config;
    const base = loadWeights(dir, cfg);
    const config: LearnerConfig = {
      ...DEFAULT_LEARNER,
      mode: { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } },
      activationBudgetBytes: Infinity,
      seed: 3,
      precision: 'bf16',
    };
    const loss: LossSpec = { kind: 'policy', eps: 0.2, epsHigh: 0.28, tisCap: 2, klCoef: 0.01, entropyCoef: 0 };
    const rng = createRng(7);
    const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rng.next() * cfg.vocabSize));
    const samples: TrainingSample[] = [
      { promptIds: ids(140), completionIds: ids(30) },
      { promptIds: ids(9), completionIds: ids(12) },
    ].map((s) => ({ ...s, advantages: s.completionIds.map(() => rng.next() - 0.4) }));
    const run = (pack: boolean) => {
      const learner = new LearnerCore(cfg, base, { ...config, packFrozenWeights: pack }, native());
      // Nonzero B, so the adapters' products reach the loss.
      learner.lora!.data.forEach((_, i, v) => {
        v[i] = Math.sin(i) * 0.05;
      });
      learner.zeroGrad();
      const result = learner.forwardBackward(samples, loss, samples.length);
      return { loss: result.loss, grads: learner.gradients.slice(), bytes: learner.packedBytes };
    };
    const plain = run(false),
      packed = run(true);
    assert.equal(plain.bytes, 0);
    assert.ok(packed.bytes <= packedWeightBytes(cfg), `${packed.bytes} bytes`);
    if (packing()) assert.ok(packed.bytes > 0, 'kernels that pack did');
    assert.ok(Math.abs(packed.loss - plain.loss) <= 1e-6 * Math.abs(plain.loss), `${packed.loss} vs ${plain.loss}`);
    assert.ok(maxAbsDiff(packed.grads, plain.grads) <= 1e-5 * maxAbs(plain.grads), 'gradients');
    assert.ok(maxAbs(plain.grads) > 0);
  });

  test('an fp32 learner, or full fine-tuning, packs nothing', () => {
    const dir = makeTinyModel({ family: 'qwen3', seed: 42 });
    const cfg = readModelFolder(dir).config;
    const base = loadWeights(dir, cfg);
    const lora: LearnerConfig['mode'] = { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'v'] } };
    for (const [mode, precision] of [
      [lora, 'fp32'],
      [{ kind: 'full' }, 'bf16'],
    ] as const) {
      const config = { ...DEFAULT_LEARNER, mode, precision, packFrozenWeights: true, activationBudgetBytes: Infinity };
      assert.equal(new LearnerCore(cfg, base, config, native()).packedBytes, 0, `${mode.kind} at ${precision}`);
    }
  });
});

describe('the memory plan and packed weights', () => {
  const qwen = modelConfigOf({ family: 'qwen3', ...PRESETS['qwen3-0.6b']! }, [0]);
  const input = {
    cfg: qwen,
    parameters: 596_049_920,
    loraRank: 16,
    trainableValues: 10_092_544,
    precision: 'int8' as const,
    packable: true,
  };
  const limit = (budget: number) => maxTrainTokens(qwen, budget, { loraRank: 16, completionFraction: 0.25 });

  test('counts both directions of every projection and the LM head in bf16, each after its header (no padding at this shape)', () => {
    const D = 1024,
      F = 3072,
      perLayer = D * 2048 + 2 * D * 1024 + 2048 * D + 3 * D * F;
    assert.equal(packedWeightBytes(qwen), 2 * 2 * (28 * perLayer + 151_936 * D) + 2 * 64 * (28 * 7 + 1));
  });

  test('packs where samples of the whole context fit anyway, and the budget shrinks by the copies', () => {
    const plan = memoryPlan({ ...input, totalBytes: 128 * GiB });
    const unpacked = memoryPlan({ ...input, totalBytes: 128 * GiB, packable: false });
    assert.equal(plan.packedWeightsBytes, packedWeightBytes(qwen));
    assert.equal(plan.activationBudgetBytes, unpacked.activationBudgetBytes - plan.packedWeightsBytes);
    assert.equal(plan.maxTrainTokens, unpacked.maxTrainTokens);
    assert.equal(plan.maxTrainTokens, qwen.maxPositionEmbeddings);
  });

  test('does not pack where the copies would shorten the longest sample, or a given one would not fit', () => {
    const plan = memoryPlan({ ...input, totalBytes: 24 * GiB });
    assert.equal(plan.packedWeightsBytes, 0);
    assert.ok(limit(plan.activationBudgetBytes - packedWeightBytes(qwen)) < plan.maxTrainTokens, 'it would shorten');
    const given = memoryPlan({ ...input, totalBytes: 24 * GiB, maxTrainTokens: plan.maxTrainTokens });
    assert.equal(given.packedWeightsBytes, 0);
    const short = memoryPlan({ ...input, totalBytes: 24 * GiB, maxTrainTokens: 2048 });
    assert.equal(short.packedWeightsBytes, packedWeightBytes(qwen), 'a short given bound leaves room');
  });

  test('never packs at fp32, for full fine-tuning, without learning or with kernels that cannot', () => {
    const big = { ...input, totalBytes: 512 * GiB };
    assert.equal(memoryPlan({ ...big, precision: 'fp32' }).packedWeightsBytes, 0);
    assert.equal(memoryPlan({ ...big, loraRank: 0, trainableValues: input.parameters }).packedWeightsBytes, 0);
    assert.equal(memoryPlan({ ...big, trainableValues: 0 }).packedWeightsBytes, 0);
    assert.equal(memoryPlan({ ...big, packable: false }).packedWeightsBytes, 0);
  });

  test('train packs when weights, copies, runtime and the step budget fit the usable memory', () => {
    const needed = 6 * input.parameters + packedWeightBytes(qwen) + GiB + 4 * GiB;
    assert.equal(trainingAffordsPacking(qwen, input.parameters, 4 * GiB, Math.ceil(needed / 0.75)), true);
    assert.equal(trainingAffordsPacking(qwen, input.parameters, 4 * GiB, Math.floor(needed / 0.75) - 1), false);
  });
});
