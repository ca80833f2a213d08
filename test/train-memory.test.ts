// Training in bounded memory: recomputing layers in the backward (checkpointing) gives exactly
// the gradients of keeping the whole tape; trainStepBytes is exactly what TrainModel allocates,
// and grows linearly with the tokens (no n x n attention matrix, at 4096 tokens); the buffer
// cache keeps one layout at a time; maxTrainTokens finds the longest sample that fits a budget.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import type { ModelFamily } from '../src/engine/local/model/config.js';
import { modelConfigOf, PRESETS, randomParams } from '../src/engine/local/model/init.js';
import { allocateParams } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { Lora } from '../src/engine/local/train/lora.js';
import { maxTrainTokens, trainStepBytes } from '../src/engine/local/train/memory.js';
import { type TrainModelOptions, TrainModel, type TrainSequence } from '../src/engine/local/train/model.js';

const kernels = loadKernels();
const TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;

/** The tiny preset (GQA: 4 query heads, 2 kv heads), with a context long enough for 4096 tokens. */
function tinyConfig(family: ModelFamily, numLayers = 2) {
  return modelConfigOf({ family, ...PRESETS.tiny!, numLayers, maxPositionEmbeddings: 8192 }, [1]);
}

function sequence(rng: ReturnType<typeof createRng>, length: number, promptLength: number, vocab: number): TrainSequence {
  return { tokens: Array.from({ length }, () => Math.floor(rng.next() * vocab)), promptLength };
}

/** A model over fixed random weights: full fine-tuning (its own gradient buffer) or LoRA rank 4 with B != 0. */
function makeModel(family: ModelFamily, lora: boolean, opts: TrainModelOptions, numLayers = 2) {
  const cfg = tinyConfig(family, numLayers);
  const params = randomParams(cfg, 7, 0.25);
  if (!lora) {
    const grads = allocateParams(params.specs);
    return { cfg, model: new TrainModel(cfg, params, grads, null, kernels, opts), grads: grads.data };
  }
  const adapter = new Lora(cfg, { rank: 4, alpha: 8, targets: [...TARGETS] });
  adapter.initialise(8);
  const rng = createRng(9);
  for (const t of adapter.tensors) if (t.part === 'B') adapter.view(t).forEach((_, i, v) => { v[i] = (rng.next() - 0.5) * 0.2; });
  return { cfg, model: new TrainModel(cfg, params, null, adapter, kernels, opts), grads: adapter.grads };
}

/** Forward and backward of a fixed objective over log-probs, entropies and top-2 extra log-probs. */
function step(model: TrainModel, batch: TrainSequence[], vocab: number) {
  const R = batch.reduce((a, s) => a + s.tokens.length - s.promptLength, 0), K = 2;
  const ids = Int32Array.from({ length: R * K }, (_, i) => (i * 29 + 7) % vocab);
  const out = model.forward(batch, { K, ids });
  const rng = createRng(11);
  const weights = (n: number) => Float32Array.from({ length: n }, () => rng.next() * 2 - 1);
  model.backward(weights(R), weights(R), weights(R * K));
  return out;
}

function assertBitIdentical(a: Float32Array, b: Float32Array, what: string): void {
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) assert.fail(`${what}: element ${i} differs: ${a[i]} vs ${b[i]}`);
  }
}

describe('checkpointing (layers recomputed in the backward)', () => {
  for (const [family, lora] of [['qwen3', true], ['llama', false], ['qwen2', false]] as Array<[ModelFamily, boolean]>) {
    test(`${family} ${lora ? 'LoRA' : 'full fine-tuning'}: bit-identical outputs and gradients to keeping the whole tape`, () => {
      const whole = makeModel(family, lora, { checkpoint: false });
      const recomputed = makeModel(family, lora, { checkpoint: true });
      const V = whole.cfg.vocabSize, rng = createRng(12);
      // Packed: several query blocks, one sequence shorter than a block, two blocks.
      const batch = [sequence(rng, 300, 200, V), sequence(rng, 5, 2, V), sequence(rng, 150, 100, V)];
      for (let round = 0; round < 2; round++) { // the second round reuses the cached buffers
        const a = step(whole.model, batch, V), b = step(recomputed.model, batch, V);
        assertBitIdentical(a.logprobs, b.logprobs, 'logprobs');
        assertBitIdentical(a.entropy, b.entropy, 'entropy');
        assertBitIdentical(a.extraLogprobs!, b.extraLogprobs!, 'extra logprobs');
        assertBitIdentical(whole.grads, recomputed.grads, `gradients after round ${round}`);
        assert.ok(whole.grads.some((g) => g !== 0), 'gradients were computed');
      }
      assert.ok(recomputed.model.bufferBytes < whole.model.bufferBytes, 'recomputing keeps fewer buffers');
    });
  }
});

describe('memory of a training step', () => {
  const cases: Array<[string, ModelFamily, boolean, boolean]> = [
    ['qwen3 LoRA, layers recomputed', 'qwen3', true, true],
    ['qwen3 LoRA, whole tape', 'qwen3', true, false],
    ['llama full fine-tuning, layers recomputed', 'llama', false, true],
  ];
  for (const [name, family, lora, checkpoint] of cases) {
    test(`${name}: trainStepBytes is what TrainModel allocates, and 4096 tokens take at most 2.1x 2048`, () => {
      const measured: number[] = [];
      for (const tokens of [2048, 4096]) {
        // A fresh model per length, so that the cache holds exactly this step's buffers.
        const { cfg, model } = makeModel(family, lora, { checkpoint });
        const rng = createRng(tokens);
        step(model, [sequence(rng, tokens, tokens / 2, cfg.vocabSize)], cfg.vocabSize);
        const estimate = trainStepBytes(cfg, { tokens, completionTokens: tokens / 2, loraRank: lora ? 4 : 0, checkpoint });
        assert.equal(model.bufferBytes, estimate, `${tokens} tokens: allocated vs estimated bytes`);
        measured.push(model.bufferBytes);
      }
      const ratio = measured[1]! / measured[0]!;
      assert.ok(ratio <= 2.1, `bytes at 4096 tokens are ${ratio.toFixed(3)}x those at 2048`);
    });
  }

  test('packed sequences size the attention scratch by the longest one', () => {
    const { cfg, model } = makeModel('qwen3', true, { checkpoint: true });
    const rng = createRng(13), V = cfg.vocabSize;
    step(model, [sequence(rng, 700, 600, V), sequence(rng, 300, 250, V)], V);
    const size = { tokens: 1000, completionTokens: 150, loraRank: 4, checkpoint: true };
    assert.equal(model.bufferBytes, trainStepBytes(cfg, { ...size, longestSequence: 700 }));
    assert.ok(trainStepBytes(cfg, size) > model.bufferBytes, 'without longestSequence the estimate assumes one sequence');
  });

  test('the buffer cache holds one layout at a time, and what a budget allows', () => {
    // 8 layers, so that recomputing them saves most of the tape.
    const cfg = tinyConfig('qwen3', 8), rank = 4;
    const bytes = (tokens: number, checkpoint: boolean) =>
      trainStepBytes(cfg, { tokens, completionTokens: tokens / 2, loraRank: rank, checkpoint });
    // 200 tokens fit with the whole tape, 500 only with layers recomputed.
    const budget = bytes(200, false);
    assert.ok(bytes(500, true) <= budget && bytes(500, false) > budget, 'the budget separates the two lengths');
    const { model } = makeModel('qwen3', true, { activationBudgetBytes: budget }, 8);
    const rng = createRng(14), V = cfg.vocabSize;
    const run = (tokens: number) => step(model, [sequence(rng, tokens, tokens / 2, V)], V);
    run(200);
    assert.equal(model.bufferBytes, bytes(200, false), 'short: the whole tape');
    run(500);
    assert.equal(model.bufferBytes, bytes(500, true), 'long: recomputed layers, the per-layer buffers freed');
    run(350);
    assert.equal(model.bufferBytes, bytes(500, true), 'shorter again, same layout: the cached buffers are reused');
    run(200);
    assert.equal(model.bufferBytes, bytes(200, false), 'back to the whole tape: the shared buffers freed');
  });

  test('maxTrainTokens is the longest sample whose step fits the budget', () => {
    const cfg = modelConfigOf({ family: 'qwen3', ...PRESETS['qwen3-0.6b']! }, [1]);
    const fits = (tokens: number, loraRank: number, fraction: number, budget: number) =>
      trainStepBytes(cfg, {
        tokens, completionTokens: Math.max(1, Math.ceil(fraction * tokens)), loraRank, checkpoint: true,
      }) <= budget;
    for (const budget of [2 ** 30, 4 * 2 ** 30, 16 * 2 ** 30]) {
      for (const [loraRank, fraction] of [[16, 0.25], [0, 0.25], [16, 0.5]] as const) {
        const n = maxTrainTokens(cfg, budget, { loraRank, completionFraction: fraction });
        assert.ok(n > 0 && fits(n, loraRank, fraction, budget), `${n} tokens fit ${budget} bytes (rank ${loraRank})`);
        assert.ok(!fits(n + 1, loraRank, fraction, budget), `${n + 1} tokens do not`);
      }
    }
    assert.ok(maxTrainTokens(cfg, 8 * 2 ** 30, { loraRank: 16 }) > maxTrainTokens(cfg, 4 * 2 ** 30, { loraRank: 16 }));
    assert.equal(maxTrainTokens(cfg, 1e6, { loraRank: 16 }), 0, 'nothing fits a megabyte');
    assert.equal(maxTrainTokens(cfg, 2 ** 50, { loraRank: 16 }), cfg.maxPositionEmbeddings, 'capped at the context');
  });
});
