// Training in bounded memory: recomputing layers in the backward (checkpointing, with or without
// each layer's attention output kept) and computing the LM head's logits a chunk of rows at a time
// give exactly the outputs and gradients of keeping everything; trainStepBytes is exactly what TrainModel allocates, and grows linearly
// with the tokens (no n x n attention matrix, at 4096 tokens; with the head chunked, no R x vocab
// logits); a budget picks the cheapest layout that fits; the buffer cache keeps one layout at a
// time; maxTrainTokens finds the longest sample that fits a budget.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import type { ModelFamily } from '../src/engine/local/model/config.js';
import { modelConfigOf, PRESETS, randomParams } from '../src/engine/local/model/init.js';
import { allocateParams } from '../src/engine/local/model/weights.js';
import { bf16ParamsOf } from '../src/engine/local/precision.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { Lora } from '../src/engine/local/train/lora.js';
import {
  fusedAttentionBytes,
  HEAD_CHUNK_ROWS,
  maxTrainTokens,
  type StepSize,
  trainStepBytes,
} from '../src/engine/local/train/memory.js';
import { type TrainModelOptions, TrainModel } from '../src/engine/local/train/model.js';
import { DEFAULT_LEARNER, LearnerCore } from '../src/engine/local/train/learner.js';
import { DEFAULT_POLICY_LOSS } from '../src/engine/local/train/losses.js';
import type { TrainSequence } from '../src/engine/local/train/packing.js';

const kernels = loadKernels();
const TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;

/** The tiny preset (GQA: 4 query heads, 2 kv heads), with a context long enough for 4096 tokens. */
function tinyConfig(family: ModelFamily, numLayers = 2) {
  return modelConfigOf({ family, ...PRESETS.tiny!, numLayers, maxPositionEmbeddings: 8192 }, [1]);
}

function sequence(
  rng: ReturnType<typeof createRng>,
  length: number,
  promptLength: number,
  vocab: number,
): TrainSequence {
  return { tokens: Array.from({ length }, () => Math.floor(rng.next() * vocab)), promptLength };
}

/**
 * A model over fixed random weights: full fine-tuning (its own gradient buffer) or LoRA rank 4 with
 * B != 0; at bf16, every product from the weights' bf16 copies.
 */
function makeModel(family: ModelFamily, lora: boolean, opts: TrainModelOptions, numLayers = 2, bf16 = false) {
  const cfg = tinyConfig(family, numLayers);
  const params = randomParams(cfg, 7, 0.25);
  if (bf16) opts = { ...opts, bf16: bf16ParamsOf(kernels, params.specs, params.data) };
  if (!lora) {
    const grads = allocateParams(params.specs);
    return { cfg, model: new TrainModel(cfg, params, grads, null, kernels, opts), grads: grads.data };
  }
  const adapter = new Lora(cfg, { rank: 4, alpha: 8, targets: [...TARGETS] });
  adapter.initialise(8);
  const rng = createRng(9);
  for (const t of adapter.tensors)
    if (t.part === 'B')
      adapter.view(t).forEach((_, i, v) => {
        v[i] = (rng.next() - 0.5) * 0.2;
      });
  return { cfg, model: new TrainModel(cfg, params, null, adapter, kernels, opts), grads: adapter.grads };
}

/** Forward and backward of a fixed objective over log-probs, entropies and top-2 extra log-probs. */
function step(model: TrainModel, batch: TrainSequence[], vocab: number) {
  const R = batch.reduce((a, s) => a + s.tokens.length - s.promptLength, 0),
    K = 2;
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

/**
 * Two steps of each model on the same batch (the second reuses the cached buffers): outputs and
 * accumulated gradients compared with `same` after each.
 */
function compareTwoRounds(
  x: ReturnType<typeof makeModel>,
  y: ReturnType<typeof makeModel>,
  batch: Parameters<typeof step>[1],
  same: (a: Float32Array, b: Float32Array, what: string) => void,
): void {
  const V = x.cfg.vocabSize;
  for (let round = 0; round < 2; round++) {
    const a = step(x.model, batch, V),
      b = step(y.model, batch, V);
    same(a.logprobs, b.logprobs, 'logprobs');
    same(a.entropy, b.entropy, 'entropy');
    same(a.extraLogprobs!, b.extraLogprobs!, 'extra logprobs');
    same(x.grads, y.grads, `gradients after round ${round}`);
    assert.ok(
      x.grads.some((g) => g !== 0),
      'gradients were computed',
    );
  }
}

describe('checkpointing (layers recomputed in the backward)', () => {
  for (const [family, lora, bf16] of [
    ['qwen3', true, false],
    ['llama', false, false],
    ['qwen2', false, false],
    ['qwen3', true, true],
  ] as Array<[ModelFamily, boolean, boolean]>) {
    const what = `${family} ${lora ? 'LoRA' : 'full fine-tuning'}${bf16 ? ' at bf16' : ''}`;
    test(`${what}: bit-identical outputs and gradients to keeping the whole tape`, () => {
      // Gradients accumulate from round to round: a whole-tape model for each comparison.
      const model = (opts: TrainModelOptions) => makeModel(family, lora, opts, 2, bf16);
      const whole = () => model({ checkpoint: false });
      const attentionKept = model({ checkpoint: true, keepAttention: true });
      const recomputed = model({ checkpoint: true, keepAttention: false });
      const V = attentionKept.cfg.vocabSize,
        rng = createRng(12);
      // Packed: several query blocks, one sequence shorter than a block, two blocks.
      const batch = [sequence(rng, 300, 200, V), sequence(rng, 5, 2, V), sequence(rng, 150, 100, V)];
      const reference = whole();
      compareTwoRounds(reference, attentionKept, batch, assertBitIdentical);
      compareTwoRounds(whole(), recomputed, batch, assertBitIdentical);
      assert.ok(attentionKept.model.bufferBytes < reference.model.bufferBytes, 'recomputing keeps fewer buffers');
      assert.ok(recomputed.model.bufferBytes < attentionKept.model.bufferBytes, 'and fewer still with the attention');
    });
  }
});

describe('the chunked LM head (logits computed a chunk of rows at a time, again in the backward)', () => {
  const cases: Array<[ModelFamily, boolean, boolean]> = [
    ['qwen3', true, false],
    ['qwen3', true, true],
    ['llama', false, false],
    ['qwen2', false, true],
  ];
  for (const [family, lora, checkpoint] of cases) {
    const what = `${family} ${lora ? 'LoRA' : 'full fine-tuning'}${checkpoint ? ', layers recomputed' : ''}`;
    test(`${what}: the same outputs and gradients as keeping every row's logits`, () => {
      const whole = makeModel(family, lora, { checkpoint, chunkedHead: false });
      // 153 completion rows: chunks of 64, 64 and 25, which split a sequence's rows.
      const chunked = makeModel(family, lora, { checkpoint, chunkedHead: true, headChunkRows: 64 });
      const V = whole.cfg.vocabSize,
        rng = createRng(15);
      const batch = [sequence(rng, 300, 200, V), sequence(rng, 5, 2, V), sequence(rng, 150, 100, V)];
      compareTwoRounds(whole, chunked, batch, assertClose);
      assert.ok(chunked.model.bufferBytes < whole.model.bufferBytes, 'a chunk of logits is less than all of them');
    });
  }
});

/**
 * Not bit-identical: OpenBLAS (0.3.21) does not give a row of a GEMM the same bits whatever the
 * number of rows M (measured at D 1024: 0.1% of a 512-row chunk's logits differ from the same
 * rows' in a 1024-row product on one thread, 3% on two; how M is blocked, and split between
 * threads, changes the order of float32 operations). So a chunk's logits differ from one R-row
 * GEMM's by float32 rounding, and so does everything downstream; with full fine-tuning the
 * head's weight gradient is also summed chunk by chunk instead of in one K = R product.
 * Measured here: within 6e-7 of each array's largest value; asserted within 5e-6.
 */
function assertClose(a: Float32Array, b: Float32Array, what: string): void {
  assert.equal(a.length, b.length, `${what}: length`);
  let scale = 0,
    worst = 0;
  for (let i = 0; i < a.length; i++) scale = Math.max(scale, Math.abs(a[i]!));
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  const message = `${what}: max difference ${worst.toExponential(2)}, largest ${scale.toExponential(2)}`;
  assert.ok(worst <= 5e-6 * scale, message);
}

describe('memory of a training step', () => {
  const cases: Array<[string, ModelFamily, boolean, Pick<StepSize, 'checkpoint' | 'keepAttention' | 'headChunkRows'>]> =
    [
      ['qwen3 LoRA, layers recomputed', 'qwen3', true, { checkpoint: true, keepAttention: false }],
      ['qwen3 LoRA, layers recomputed, attention kept', 'qwen3', true, { checkpoint: true, keepAttention: true }],
      ['qwen3 LoRA, whole tape', 'qwen3', true, { checkpoint: false }],
      ['llama full fine-tuning, layers recomputed', 'llama', false, { checkpoint: true, keepAttention: false }],
      [
        'qwen3 LoRA, layers recomputed, attention kept, head chunked',
        'qwen3',
        true,
        { checkpoint: true, keepAttention: true, headChunkRows: 300 },
      ],
      ['llama full fine-tuning, whole tape, head chunked', 'llama', false, { checkpoint: false, headChunkRows: 300 }],
    ];
  for (const [name, family, lora, layout] of cases) {
    test(`${name}: trainStepBytes is what TrainModel allocates, and 4096 tokens take at most 2.1x 2048`, () => {
      const measured: number[] = [];
      for (const tokens of [2048, 4096]) {
        // A fresh model per length, so that the cache holds exactly this step's buffers.
        const chunkedHead = layout.headChunkRows !== undefined;
        const { cfg, model } = makeModel(family, lora, { ...layout, chunkedHead });
        const rng = createRng(tokens);
        step(model, [sequence(rng, tokens, tokens / 2, cfg.vocabSize)], cfg.vocabSize);
        const size = { tokens, completionTokens: tokens / 2, loraRank: lora ? 4 : 0, ...layout };
        const estimate = trainStepBytes(cfg, size);
        assert.equal(model.bufferBytes, estimate, `${tokens} tokens: allocated vs estimated bytes`);
        measured.push(model.bufferBytes);
      }
      const ratio = measured[1]! / measured[0]!;
      assert.ok(ratio <= 2.1, `bytes at 4096 tokens are ${ratio.toFixed(3)}x those at 2048`);
    });
  }

  test('with the head chunked, the logits take one chunk: a completion token costs 4 x hidden floats', () => {
    const cfg = modelConfigOf({ family: 'qwen3', ...PRESETS['qwen3-0.6b']! }, [1]);
    const bytes = (completionTokens: number, headChunkRows?: number) =>
      trainStepBytes(cfg, { tokens: 16384, completionTokens, loraRank: 16, checkpoint: true, headChunkRows });
    const perCompletionToken = (bytes(8192, 512) - bytes(4096, 512)) / 4096;
    assert.equal(perCompletionToken, 4 * 4 * cfg.hiddenSize);
    assert.equal(bytes(4096) - bytes(4096, 512), 4 * (4096 - 512) * cfg.vocabSize, 'the logits rows not held');
    assert.equal(bytes(300, 512), bytes(300), 'fewer rows than a chunk: the same as unchunked');
  });

  test('at bf16: the rounded inputs are counted, and the fused attention per thread', () => {
    const cfg = tinyConfig('qwen3', 2);
    const params = randomParams(cfg, 7, 0.25);
    const adapter = new Lora(cfg, { rank: 4, alpha: 8, targets: [...TARGETS] });
    adapter.initialise(8);
    const bf16 = bf16ParamsOf(kernels, params.specs, params.data);
    const model = new TrainModel(cfg, params, null, adapter, kernels, { checkpoint: true, keepAttention: true, bf16 });
    step(model, [sequence(createRng(5), 600, 300, cfg.vocabSize)], cfg.vocabSize);
    const size = { tokens: 600, completionTokens: 300, loraRank: 4, checkpoint: true, keepAttention: true };
    // The JS buffers: the fp32 step's, less half of the layer inputs h1, h2 and act (kept as bf16,
    // 2 bytes a value; one layer's, recomputed), of every layer's attention output (kept) and of the
    // gate's and up's output gradients, and one slot of rounded values: the widest layer output or
    // the LM head's logit gradient (300 rows of the vocab, the wider here); the fused kernels' own
    // buffers are outside them, one set per thread.
    assert.equal(model.bufferBytes, trainStepBytes(cfg, { ...size, bf16: true }));
    const widest = 600 * Math.max(cfg.hiddenSize, cfg.numHeads * cfg.headDim);
    assert.ok(300 * cfg.vocabSize > widest, 'the head is the widest rounded input of this model');
    // h1, h2, act on the tape; the gate's and up's output gradients in the backward; q's, k's and
    // v's LoRA A factors stacked for their one product.
    const inputs = 600 * (2 * cfg.hiddenSize + 3 * cfg.intermediateSize);
    const attentionOut = cfg.numLayers * 600 * cfg.numHeads * cfg.headDim;
    const stackedA = 3 * 4 * cfg.hiddenSize;
    assert.equal(
      trainStepBytes(cfg, { ...size, bf16: true }) - trainStepBytes(cfg, size),
      2 * 300 * cfg.vocabSize - 2 * inputs - 2 * attentionOut - 2 * stackedA,
    );
    assert.equal(
      trainStepBytes(cfg, { ...size, bf16: true, attentionThreads: 2 }) - trainStepBytes(cfg, { ...size, bf16: true }),
      2 * fusedAttentionBytes(cfg, 600),
    );
    // 600 rows pad to 640 (tiles of 64), 600 score columns to 1,024 (chunks of 512). K, V (bf16), dK,
    // dV (fp32): 12 bytes per head dimension and row, Q and dO (bf16) of each stacked head: 4; score
    // blocks of 64 rows per stacked head: 12 bytes a column; one block of dQ; dO . O per stacked row.
    // The kernels stack the largest divisor of the group up to 4.
    const group = cfg.numHeads / cfg.numKvHeads,
      stack = [4, 3, 2].find((s) => group % s === 0) ?? 1;
    assert.equal(
      fusedAttentionBytes(cfg, 600),
      640 * (12 + 4 * stack) * cfg.headDim + 12 * 64 * stack * 1024 + 256 * stack * cfg.headDim + 640 * 4 * stack,
    );
  });

  test('packed sequences size the attention scratch by the longest one', () => {
    const { cfg, model } = makeModel('qwen3', true, { checkpoint: true, keepAttention: true });
    const rng = createRng(13),
      V = cfg.vocabSize;
    step(model, [sequence(rng, 700, 600, V), sequence(rng, 300, 250, V)], V);
    const size = { tokens: 1000, completionTokens: 150, loraRank: 4, checkpoint: true, keepAttention: true };
    assert.equal(model.bufferBytes, trainStepBytes(cfg, { ...size, longestSequence: 700 }));
    assert.ok(
      trainStepBytes(cfg, size) > model.bufferBytes,
      'without longestSequence the estimate assumes one sequence',
    );
  });

  test('the buffer cache holds one layout at a time, and what a budget allows', () => {
    // 8 layers, so that recomputing them saves most of the tape.
    const cfg = tinyConfig('qwen3', 8),
      rank = 4;
    // The layouts: the whole tape, layers recomputed with their attention kept, all recomputed.
    const layouts = {
      whole: { checkpoint: false },
      kept: { checkpoint: true, keepAttention: true },
      recomputed: { checkpoint: true, keepAttention: false },
    };
    const bytes = (tokens: number, layout: keyof typeof layouts) =>
      trainStepBytes(cfg, { tokens, completionTokens: tokens / 2, loraRank: rank, ...layouts[layout] });
    // 200 tokens fit with the whole tape, 500 only with layers recomputed, 600 only with their attention too.
    const budget = bytes(200, 'whole');
    assert.ok(bytes(500, 'kept') <= budget && bytes(500, 'whole') > budget, 'the budget separates 200 and 500');
    assert.ok(bytes(600, 'recomputed') <= budget && bytes(600, 'kept') > budget, 'and 500 and 600');
    const { model } = makeModel('qwen3', true, { activationBudgetBytes: budget, chunkedHead: false }, 8);
    const rng = createRng(14),
      V = cfg.vocabSize;
    const run = (tokens: number) => step(model, [sequence(rng, tokens, tokens / 2, V)], V);
    run(200);
    assert.equal(model.bufferBytes, bytes(200, 'whole'), 'short: the whole tape');
    run(500);
    assert.equal(model.bufferBytes, bytes(500, 'kept'), 'long: recomputed layers, the per-layer buffers freed');
    run(350);
    assert.equal(model.bufferBytes, bytes(500, 'kept'), 'shorter again, same layout: the cached buffers are reused');
    run(600);
    assert.equal(
      model.bufferBytes,
      bytes(600, 'recomputed'),
      'longer: the attention recomputed too, its buffers freed',
    );
    run(200);
    assert.equal(model.bufferBytes, bytes(200, 'whole'), 'back to the whole tape: the shared buffers freed');
  });

  test('a buffer that grows takes a quarter more where the budget has room, so slightly longer steps reuse it', () => {
    const cfg = tinyConfig('qwen3', 2),
      rank = 4;
    const bytes = (tokens: number) =>
      trainStepBytes(cfg, { tokens, completionTokens: tokens / 2, loraRank: rank, checkpoint: false });
    const runs = (budget: number) => {
      const { model } = makeModel('qwen3', true, { activationBudgetBytes: budget, chunkedHead: false }, 2);
      const rng = createRng(17),
        V = cfg.vocabSize;
      return (tokens: number) => {
        step(model, [sequence(rng, tokens, tokens / 2, V)], V);
        return model.bufferBytes;
      };
    };
    // Room for a quarter more than 330 tokens take.
    const roomy = runs(1.25 * bytes(330));
    assert.equal(roomy(300), bytes(300), 'the first step: exact sizes');
    const grown = roomy(310);
    assert.ok(grown > bytes(310) && grown <= 1.25 * bytes(310), `grown to ${grown}, 310 tokens take ${bytes(310)}`);
    assert.equal(roomy(330), grown, 'a step 20 tokens longer: every buffer reused');
    assert.equal(roomy(320), grown, 'and a shorter one');
    // No room: the sizes stay exact, as before.
    const tight = runs(bytes(330));
    tight(300);
    assert.equal(tight(310), bytes(310), 'without room a buffer grows to what the step asks');
    assert.equal(tight(330), bytes(330));
  });

  test('a budget chunks the head before it recomputes layers, and only where the logits would not fit', () => {
    const cfg = tinyConfig('qwen3', 8),
      rank = 4,
      chunk = 64;
    const bytes = (
      tokens: number,
      completion: number,
      checkpoint: boolean,
      headChunkRows?: number,
      keep = checkpoint,
    ) =>
      trainStepBytes(cfg, {
        tokens,
        completionTokens: completion,
        loraRank: rank,
        checkpoint,
        keepAttention: keep,
        headChunkRows,
      });
    const budget = bytes(400, 200, false);
    // 400 tokens with 300 completion rows fit with the head chunked, not with all their logits.
    assert.ok(bytes(400, 300, false) > budget && bytes(400, 300, false, chunk) <= budget);
    const { model } = makeModel('qwen3', true, { activationBudgetBytes: budget, headChunkRows: chunk }, 8);
    const rng = createRng(16),
      V = cfg.vocabSize;
    const run = (tokens: number, completion: number) => step(model, [sequence(rng, tokens, tokens - completion, V)], V);
    run(400, 100);
    assert.equal(model.bufferBytes, bytes(400, 100, false), "a short completion: every row's logits kept");
    run(400, 300);
    assert.equal(model.bufferBytes, bytes(400, 300, false, chunk), 'a long one: the whole tape, the head chunked');
    assert.ok(bytes(1000, 600, false, chunk) > budget && bytes(1000, 600, true) <= budget);
    run(1000, 600);
    assert.equal(model.bufferBytes, bytes(1000, 600, true), 'a long sample: layers recomputed, all logits kept');
    // Where the kept attention does not fit even with the head chunked, it is recomputed (all logits kept).
    assert.ok(bytes(1200, 600, true, chunk) > budget && bytes(1200, 600, true, undefined, false) <= budget);
    run(1200, 600);
    assert.equal(model.bufferBytes, bytes(1200, 600, true, undefined, false), 'longer: the attention recomputed');
    assert.ok(bytes(1400, 600, true, undefined, false) > budget && bytes(1400, 600, true, chunk, false) <= budget);
    run(1400, 600);
    assert.equal(model.bufferBytes, bytes(1400, 600, true, chunk, false), 'longer still: the head chunked too');
  });

  test("the learner's KL reference runs forwards only: it keeps no layer's attention", () => {
    const cfg = tinyConfig('qwen3', 2);
    const params = randomParams(cfg, 7, 0.25);
    const spec = { rank: 4, alpha: 8, targets: [...TARGETS] };
    const learner = new LearnerCore(cfg, params, { ...DEFAULT_LEARNER, mode: { kind: 'lora', spec } }, kernels);
    const rng = createRng(18),
      ids = Array.from({ length: 300 }, () => Math.floor(rng.next() * cfg.vocabSize));
    const sample = {
      promptIds: ids.slice(0, 200),
      completionIds: ids.slice(200),
      advantages: ids.slice(200).map(() => 1),
    };
    learner.forwardBackward([sample], { kind: 'policy', ...DEFAULT_POLICY_LOSS, klCoef: 0.1 });
    // The reference's forward alone, in each layout with layers recomputed and the head chunked.
    const referenceBytes = (keepAttention: boolean) => {
      const model = new TrainModel(cfg, params, null, null, kernels, {
        checkpoint: true,
        keepAttention,
        chunkedHead: true,
      });
      model.forward([{ tokens: ids, promptLength: 200 }]);
      return model.bufferBytes;
    };
    assert.ok(referenceBytes(true) > referenceBytes(false), 'keeping the attention takes more in a forward too');
    // The policy: the whole tape, within the default budget.
    const policy = trainStepBytes(cfg, { tokens: 300, completionTokens: 100, loraRank: 4, checkpoint: false });
    assert.equal(learner.stepBufferBytes, policy + referenceBytes(false));
  });

  test('maxTrainTokens is the longest sample whose step fits the budget', () => {
    const cfg = modelConfigOf({ family: 'qwen3', ...PRESETS['qwen3-0.6b']! }, [1]);
    const fits = (tokens: number, loraRank: number, fraction: number, budget: number) =>
      trainStepBytes(cfg, {
        tokens,
        completionTokens: Math.max(1, Math.ceil(fraction * tokens)),
        loraRank,
        checkpoint: true,
        headChunkRows: HEAD_CHUNK_ROWS,
      }) <= budget;
    for (const budget of [2 ** 30, 4 * 2 ** 30, 16 * 2 ** 30]) {
      for (const [loraRank, fraction] of [
        [16, 0.25],
        [0, 0.25],
        [16, 0.5],
      ] as const) {
        const n = maxTrainTokens(cfg, budget, { loraRank, completionFraction: fraction });
        assert.ok(n > 0 && fits(n, loraRank, fraction, budget), `${n} tokens fit ${budget} bytes (rank ${loraRank})`);
        const capped = n === cfg.maxPositionEmbeddings;
        assert.ok(capped || !fits(n + 1, loraRank, fraction, budget), `${n + 1} tokens do not`);
      }
    }
    assert.ok(maxTrainTokens(cfg, 8 * 2 ** 30, { loraRank: 16 }) > maxTrainTokens(cfg, 4 * 2 ** 30, { loraRank: 16 }));
    // The completion's share matters little with the head chunked: all completion vs a quarter.
    const quarter = maxTrainTokens(cfg, 4 * 2 ** 30, { loraRank: 16 });
    const all = maxTrainTokens(cfg, 4 * 2 ** 30, { loraRank: 16, completionFraction: 1 });
    assert.ok(all > 0.9 * quarter, `${all} tokens all completion vs ${quarter} a quarter`);
    assert.equal(maxTrainTokens(cfg, 1e6, { loraRank: 16 }), 0, 'nothing fits a megabyte');
    assert.equal(maxTrainTokens(cfg, 2 ** 50, { loraRank: 16 }), cfg.maxPositionEmbeddings, 'capped at the context');
  });
});
