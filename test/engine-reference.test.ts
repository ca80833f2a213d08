// The engine's per-token log-probs against the independent PyTorch reference, for every family
// and storage variant, plus the agreement of generation and teacher scoring.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LocalEngine } from '../src/engine/local/engine.js';
import type { GenerationEvent } from '../src/engine/types.js';
import { makeTinyModel, maxAbsDiff, referenceLogprobs, type TinyModelOptions } from './helpers/models.js';

async function collect(stream: AsyncIterable<GenerationEvent>) {
  const ids: number[] = [],
    logprobs: number[] = [],
    sampled: number[] = [];
  let finish: Extract<GenerationEvent, { type: 'finish' }> | null = null;
  for await (const e of stream) {
    if (e.type === 'token') {
      ids.push(e.token.id);
      logprobs.push(e.token.logprob);
      sampled.push(e.token.sampledLogprob);
    } else finish = e;
  }
  return { ids, logprobs, sampled, finish: finish! };
}

const variants: [string, TinyModelOptions][] = [
  ['qwen3', { family: 'qwen3' }],
  ['qwen2 (qkv bias)', { family: 'qwen2' }],
  ['llama 3 (rope scaling, untied head)', { family: 'llama', shape: { tieWordEmbeddings: false } }],
  ['qwen3 stored as BF16 in 3 shards', { family: 'qwen3', dtype: 'BF16', shards: 3, seed: 5 }],
  [
    'qwen3 with MHA (no GQA) and head_dim != hidden/heads',
    { family: 'qwen3', shape: { numKvHeads: 4, headDim: 24 }, seed: 7 },
  ],
];

for (const [name, opts] of variants) {
  test(`${name}: generated log-probs match PyTorch within 1e-4, and scoring agrees with generation`, async () => {
    const dir = makeTinyModel(opts);
    const engine = await LocalEngine.open(dir);
    try {
      // A long prompt so positions reach where rope differences matter, chunked prefill included.
      const prompt = Array.from({ length: 300 }, (_, i) => (i * 37 + 11) % 500);
      const gen = await collect(engine.generate(prompt, { maxTokens: 24, temperature: 1, seed: 3, stopTokenIds: [] }));
      assert.ok(gen.ids.length > 0);
      const ref = referenceLogprobs(dir, [[...prompt, ...gen.ids]])[0]!.slice(prompt.length - 1);
      const diff = maxAbsDiff(gen.logprobs, ref);
      assert.ok(diff < 1e-4, `max |engine - torch| = ${diff}`);
      // The model must be far from uniform, or this comparison would prove little.
      assert.ok(
        Math.min(...ref) < Math.log(1 / 512) - 1 || Math.max(...ref) > Math.log(1 / 512) + 1,
        'reference distribution is too flat to be a test',
      );

      const scored = await engine.logprobs(prompt, gen.ids);
      const agree = maxAbsDiff(scored.logprobs, gen.logprobs);
      assert.ok(agree < 1e-4, `max |score - generate| = ${agree}`);
    } finally {
      await engine.close();
    }
  });
}
