// Throughput of one Sampler as serve uses it (src/engine/sampler.ts): prefill, single-stream decode
// and 8-stream decode, timed from the outside of `generate`. The same code times the embedded
// engine and llama.cpp, so what differs is the backend.

import type { Sampler, SamplingParams } from '../src/engine/types.js';

export interface ThroughputShape {
  prefillTokens: number;
  decodePrompt: number;
  decodeTokens: number;
  streams: number;
  vocab: number;
}

export interface Throughput {
  /** Prompt tokens per second until the first sampled token (a prompt no cache has seen). */
  prefill: number;
  /** Tokens per second after the first, one request alone. */
  decode1: number;
  /** Tokens per second of all streams together, from the first stream's first token to the last's end. */
  decodeN: number;
}

/** Distinct prompts per salt, so no prefix cache serves one run from another. */
export function promptOf(length: number, salt: number, vocab: number): number[] {
  return Array.from({ length }, (_, i) => ((i * 31 + salt * 977 + 7) % (vocab - 20)) + 10);
}

interface Timed {
  start: number;
  first: number;
  end: number;
  tokens: number;
}

async function timedGenerate(sampler: Sampler, prompt: number[], params: SamplingParams): Promise<Timed> {
  const start = performance.now();
  let first = Number.NaN;
  let tokens = 0;
  for await (const e of sampler.generate(prompt, params)) {
    if (e.type !== 'token') continue;
    if (tokens++ === 0) first = performance.now();
  }
  return { start, first, end: performance.now(), tokens };
}

/** One measurement of each figure; `salt` makes this round's prompts new to every cache. */
export async function measureThroughput(sampler: Sampler, shape: ThroughputShape, salt: number): Promise<Throughput> {
  const params = (seed: number, maxTokens: number): SamplingParams => ({
    maxTokens,
    temperature: 1,
    seed,
    stopTokenIds: [],
  });
  const p = await timedGenerate(sampler, promptOf(shape.prefillTokens, salt * 100, shape.vocab), params(salt, 1));
  const one = await timedGenerate(
    sampler,
    promptOf(shape.decodePrompt, salt * 100 + 1, shape.vocab),
    params(salt, shape.decodeTokens),
  );
  const many = await Promise.all(
    Array.from({ length: shape.streams }, (_, s) =>
      timedGenerate(
        sampler,
        promptOf(shape.decodePrompt, salt * 100 + 2 + s, shape.vocab),
        params(salt * 100 + s, shape.decodeTokens),
      ),
    ),
  );
  const firstOfAll = Math.min(...many.map((t) => t.first));
  const endOfAll = Math.max(...many.map((t) => t.end));
  const decodedN = many.reduce((a, t) => a + t.tokens - 1, 0);
  return {
    prefill: shape.prefillTokens / ((p.first - p.start) / 1000),
    decode1: (one.tokens - 1) / ((one.end - one.first) / 1000),
    decodeN: decodedN / ((endOfAll - firstOfAll) / 1000),
  };
}
