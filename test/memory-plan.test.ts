// serve's memory plan: the shares of weights, learner state, prefix cache and runtime, and the
// longest training sample that the rest holds, checked against trainStepBytes itself.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  COMPLETION_FRACTION,
  memoryPlan,
  packableOn,
  RUNTIME_ALLOWANCE_BYTES,
  trainableValuesOf,
  USABLE_MEMORY_SHARE,
} from '../src/engine/local/memory-plan.js';
import type { KernelInfo } from '../src/engine/local/kernels/kernels.js';
import { modelConfigOf, PRESETS } from '../src/engine/local/model/init.js';
import { Lora, LORA_TARGETS } from '../src/engine/local/train/lora.js';
import { HEAD_CHUNK_ROWS, trainStepBytes } from '../src/engine/local/train/memory.js';

const GiB = 2 ** 30;
const qwen = modelConfigOf({ family: 'qwen3', ...PRESETS['qwen3-0.6b']! }, [0]);

const stepAt = (tokens: number, rank: number) =>
  trainStepBytes(qwen, {
    tokens,
    completionTokens: Math.ceil(COMPLETION_FRACTION * tokens),
    loraRank: rank,
    checkpoint: true,
    headChunkRows: HEAD_CHUNK_ROWS,
  });

test('the activation budget is what the usable memory leaves; the longest sample is the longest whose step fits it', () => {
  const parameters = 596_049_920;
  const plan = memoryPlan({
    cfg: qwen,
    totalBytes: 16 * GiB,
    parameters,
    loraRank: 16,
    trainableValues: 10_092_544,
    kvCacheBytes: 2 * GiB,
  });
  const fixed = 4 * parameters + 16 * 10_092_544 + 2 * GiB + RUNTIME_ALLOWANCE_BYTES;
  assert.equal(plan.activationBudgetBytes, Math.floor(USABLE_MEMORY_SHARE * 16 * GiB - fixed));
  assert.ok(plan.maxTrainTokens > 1000 && plan.maxTrainTokens < qwen.maxPositionEmbeddings, `${plan.maxTrainTokens}`);
  assert.ok(stepAt(plan.maxTrainTokens, 16) <= plan.activationBudgetBytes, 'the bound fits');
  assert.ok(stepAt(plan.maxTrainTokens + 1, 16) > plan.activationBudgetBytes, 'one more token does not');
  assert.equal(plan.trainBytes, stepAt(plan.maxTrainTokens, 16));
  assert.equal(plan.overBudget, false);
});

test('a bigger prefix cache or full fine-tuning leaves shorter samples; a given bound is kept and flagged when over budget', () => {
  const base = { cfg: qwen, totalBytes: 16 * GiB, parameters: 596_049_920, loraRank: 16, trainableValues: 10_092_544 };
  const small = memoryPlan({ ...base, kvCacheBytes: GiB });
  const big = memoryPlan({ ...base, kvCacheBytes: 4 * GiB });
  assert.ok(big.maxTrainTokens < small.maxTrainTokens);
  const full = memoryPlan({ ...base, loraRank: 0, trainableValues: base.parameters, kvCacheBytes: GiB });
  assert.ok(full.maxTrainTokens < small.maxTrainTokens, 'AdamW state of every weight comes out of the same memory');
  const given = memoryPlan({ ...base, kvCacheBytes: GiB, maxTrainTokens: 40000 });
  assert.equal(given.maxTrainTokens, 40000);
  assert.equal(given.overBudget, true);
  assert.equal(memoryPlan({ ...base, kvCacheBytes: GiB, maxTrainTokens: 512 }).overBudget, false);
});

test('on a machine too small for the weights nothing fits: the bound is 0', () => {
  const plan = memoryPlan({
    cfg: qwen,
    totalBytes: 2 * GiB,
    parameters: 596_049_920,
    loraRank: 16,
    trainableValues: 10_092_544,
    kvCacheBytes: 0,
  });
  assert.equal(plan.activationBudgetBytes, 0);
  assert.equal(plan.maxTrainTokens, 0);
});

test('without a given prefix cache the default is sized in the rows of the precision: bf16 at bf16 and int8', () => {
  const small = { ...qwen, maxPositionEmbeddings: 2048 };
  const base = { cfg: small, totalBytes: 64 * GiB, parameters: 596_049_920, loraRank: 16, trainableValues: 10_092_544 };
  const perToken = 28 * 2 * 8 * 128;
  assert.equal(memoryPlan({ ...base, precision: 'fp32' }).kvCacheBytes, 4 * 2048 * perToken * 4);
  assert.equal(memoryPlan({ ...base, precision: 'bf16' }).kvCacheBytes, 4 * 2048 * perToken * 2);
  assert.equal(memoryPlan({ ...base, precision: 'int8' }).kvCacheBytes, 4 * 2048 * perToken * 2);
});

test("a learner's trainable values are its adapter's (all seven projections) or every parameter", () => {
  for (const rank of [1, 16]) {
    const adapter = new Lora(qwen, { rank, alpha: 2 * rank, targets: [...LORA_TARGETS] });
    assert.equal(trainableValuesOf(qwen, 596_049_920, rank), adapter.data.length, `rank ${rank}`);
  }
  // 28 layers of rank 16 x (in + out) over q, k, v, o, gate, up, down at the 0.6B shape.
  assert.equal(trainableValuesOf(qwen, 596_049_920, 16), 10_092_544);
  assert.equal(trainableValuesOf(qwen, 596_049_920, 0), 596_049_920, 'full fine-tuning');
});

test('frozen weights are packable on oneDNN with bf16 instructions only', () => {
  const info = (gemm: KernelInfo['gemm'], bf16Instructions: boolean): KernelInfo => ({
    gemm,
    isa: 'avx512_core_bf16',
    bf16Instructions,
    int8Dot: 'vnni',
  });
  assert.equal(packableOn(info('onednn', true)), true);
  assert.equal(packableOn(info('onednn', false)), false);
  assert.equal(packableOn(info('openblas', true)), false);
});
