// The llama-cpp sampler's log-probs against an independent computation. Greedy and temperature-1
// generation and the scorer take from llama.cpp only a few logits and its float32 sum of
// exp(logit - max) over the vocabulary (src/engine/llama-cpp/next-token.ts); here the same
// positions are evaluated again through node-llama-cpp directly, their whole rows taken, and the
// log-probs, top alternatives and greedy tokens computed from them in float64 by the embedded
// engine's sampling code. Top-p at temperatures up to 1 samples the largest logits here, or, where
// they do not decide, the row of the last token evaluated again: either way a seed gives exactly
// the tokens the embedded sampling code draws from the replayed rows (one-token prompts, so the
// row evaluated again is the very row replayed). A 32k vocabulary, so the float32 sum runs over
// many terms.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { cachedModelGguf } from '../src/engine/llama-cpp/gguf.js';
import {
  type ControlledEvaluateInput,
  importNodeLlamaCpp,
  type Llama,
  type LlamaContext,
  openLlama,
} from '../src/engine/llama-cpp/node-llama-cpp.js';
import type { LlamaCppSampler } from '../src/engine/llama-cpp/sampler.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import {
  argmax,
  logSumExp,
  type SampleSettings,
  sampleToken,
  topLogprobs,
} from '../src/engine/local/sampling/sample.js';
import { sampleFromWindow } from '../src/engine/llama-cpp/window-sample.js';
import type { GenerationEvent, SampledToken, SamplingParams } from '../src/engine/types.js';
import { openTestLlamaCpp } from './helpers/llama-cpp.js';
import { makeTinyModel } from './helpers/models.js';

const VOCAB = 32768;
const model = makeTinyModel({ family: 'qwen3', seed: 83, shape: { vocabSize: VOCAB }, initStd: 1 });
const prompt = Array.from({ length: 10 }, (_, i) => (i * 977 + 13) % VOCAB);
/** float32 sums of 32k exponentials against float64 ones: a few 1e-6 in the log. */
const TOLERANCE = 1e-4;

const logitsAt = (i: number): ControlledEvaluateInput => [i, { generateNext: { logits: true } }];

function rowOf(map: Map<number, number> | undefined): Float32Array {
  assert.ok(map, 'node-llama-cpp returned no logits');
  const row = new Float32Array(VOCAB).fill(Number.NEGATIVE_INFINITY);
  for (const [id, logit] of map) row[id] = logit;
  return row;
}

async function generated(
  sampler: LlamaCppSampler,
  params: SamplingParams,
  promptIds: number[] = prompt,
): Promise<SampledToken[]> {
  const events: GenerationEvent[] = [];
  for await (const e of sampler.generate(promptIds, { maxTokens: 16, stopTokenIds: [], topLogprobs: 3, ...params }))
    events.push(e);
  return events.flatMap((e) => (e.type === 'token' ? [e.token] : []));
}

describe('llama-cpp sampler log-probs against whole rows', () => {
  let sampler: LlamaCppSampler;
  let llama: Llama;
  let context: LlamaContext;
  before(async () => {
    sampler = await openTestLlamaCpp(model);
    llama = await openLlama(await importNodeLlamaCpp(), 'off', 1);
    const gguf = await llama.loadModel({ modelPath: cachedModelGguf(model, 'F16'), gpuLayers: 0 });
    context = await gguf.createContext({ contextSize: 512, sequences: 1, flashAttention: false });
  });
  after(async () => {
    await sampler?.close();
    await llama?.dispose();
  });

  /** The rows a generation of `ids` saw, evaluated one token at a time as generation does. */
  async function generationRows(ids: number[], promptIds: number[] = prompt): Promise<Float32Array[]> {
    const seq = context.getSequence();
    try {
      const last = promptIds.length - 1;
      const first = await seq.controlledEvaluate(promptIds.map((t, i) => (i === last ? logitsAt(t) : t)));
      const rows = [rowOf(first[last]?.next.logits)];
      for (const id of ids.slice(0, -1))
        rows.push(rowOf((await seq.controlledEvaluate([logitsAt(id)]))[0]?.next.logits));
      return rows;
    } finally {
      seq.dispose();
    }
  }

  for (const temperature of [0, 1]) {
    test(`temperature ${temperature}: llama.cpp's draws carry the whole row's log-probs`, async () => {
      const tokens = await generated(sampler, { temperature, seed: 3 });
      const rows = await generationRows(tokens.map((t) => t.id));
      tokens.forEach((t, i) => {
        const row = rows[i]!;
        const lse = logSumExp(row);
        if (temperature === 0) assert.equal(t.id, argmax(row), `step ${i}: not the argmax`);
        assert.ok(
          Math.abs(t.logprob - (row[t.id]! - lse)) <= TOLERANCE,
          `step ${i}: ${t.logprob} vs ${row[t.id]! - lse}`,
        );
        assert.equal(t.sampledLogprob, temperature === 0 ? 0 : t.logprob);
        const top = topLogprobs(row, 3, lse);
        assert.deepEqual(
          t.top?.map((a) => a.id),
          top.map((a) => a.id),
        );
        t.top!.forEach((a, j) => assert.ok(Math.abs(a.logprob - top[j]!.logprob) <= TOLERANCE));
      });
      if (temperature === 1) {
        const again = await generated(sampler, { temperature, seed: 3 });
        assert.deepEqual(
          again.map((t) => t.id),
          tokens.map((t) => t.id),
          'a seed reproduces',
        );
        const others = await Promise.all([4, 5, 6].map((seed) => generated(sampler, { temperature, seed })));
        assert.ok(others.some((o) => o.map((t) => t.id).join() !== tokens.map((t) => t.id).join()));
      }
    });
  }

  /** Whether the 256 largest logits of `row` decide a draw under `s` (the float32 normalizer emulated). */
  function windowDecides(row: Float32Array, s: SampleSettings): boolean {
    const ids = Array.from(row.keys()).sort((a, b) => row[b]! - row[a]! || a - b);
    let weight = 0;
    for (const l of row) weight = Math.fround(weight + Math.fround(Math.exp(l - row[ids[0]!]!)));
    const window = new Map(ids.slice(0, 256).map((id) => [id, row[id]!]));
    return sampleFromWindow(window, weight, VOCAB, s, createRng(0)) !== null;
  }

  for (const [topP, windows] of [
    [0.9, 'some decided'],
    [0.9999, 'some not decided'],
  ] as const) {
    test(`temperature 0.7, top-p ${topP}: the embedded sampling code's draws (${windows} by the window)`, async () => {
      const params: SampleSettings = { temperature: 0.7, topP, topK: 0, topLogprobs: 3 };
      const oneToken = [prompt[0]!];
      const tokens = await generated(sampler, { ...params, seed: 9 }, oneToken);
      const rows = await generationRows(
        tokens.map((t) => t.id),
        oneToken,
      );
      const decided = rows.filter((r) => windowDecides(r, params)).length;
      if (windows === 'some decided') assert.ok(decided > 0, 'no step was decided by the window');
      else assert.ok(decided < rows.length, 'the window decided every step: nothing was evaluated again');
      const rng = createRng(9);
      tokens.forEach((t, i) => {
        const expected = sampleToken(rows[i]!, params, rng);
        assert.equal(t.id, expected.id, `step ${i}`);
        assert.equal(t.sampledLogprob, expected.sampledLogprob);
        assert.ok(Math.abs(t.logprob - expected.logprob) <= TOLERANCE);
        assert.deepEqual(
          t.top?.map((a) => a.id),
          expected.top?.map((a) => a.id),
        );
      });
    });
  }

  test("the scorer's log-probs and top ids are the whole rows' of one batch", async () => {
    const completion = [5, 31000, 77, 2048, 9];
    const scored = await sampler.logprobs(prompt, completion, { topK: 4 });
    const ids = [...prompt, ...completion];
    const first = prompt.length - 1;
    const seq = context.getSequence();
    try {
      const out = await seq.controlledEvaluate(ids.map((t, i) => (i >= first && i < ids.length - 1 ? logitsAt(t) : t)));
      completion.forEach((id, j) => {
        const row = rowOf(out[first + j]?.next.logits);
        const lse = logSumExp(row);
        assert.ok(Math.abs(scored.logprobs[j]! - (row[id]! - lse)) <= TOLERANCE, `position ${j}`);
        const top = topLogprobs(row, 4, lse);
        assert.deepEqual(
          scored.top![j]!.map((a) => a.id),
          top.map((a) => a.id),
        );
        scored.top![j]!.forEach((a, k) => assert.ok(Math.abs(a.logprob - top[k]!.logprob) <= TOLERANCE));
      });
    } finally {
      seq.dispose();
    }
  });
});
