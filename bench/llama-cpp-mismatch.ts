// The sampler/learner mismatch that truncated importance sampling corrects, for llama.cpp: the
// same prompts and seeds sampled with llama.cpp from an F16 and a Q8_0 GGUF (on the CPU), the
// same tokens scored by our fp32 engine (what the learner computes), and per token
// delta = fp32 - llama.cpp (the log of the TIS weight exp(old - rollout)). Prints the |delta|
// quantiles, the share of tokens whose weight the learner's cap (2) truncates, and the sequence
// ratio exp(sum delta).
//
//   npm run build && node dist/bench/llama-cpp-mismatch.js            # the tiny model
//   BENCH_PRESET=qwen3-0.6b BENCH_SAMPLES=4 node dist/bench/llama-cpp-mismatch.js

import { LlamaCppSampler } from '../src/engine/llama-cpp/sampler.js';
import { LocalEngine } from '../src/engine/local/engine.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { type BenchPreset, benchModel } from './models.js';

const preset = (process.env.BENCH_PRESET ?? 'tiny') as BenchPreset;
const samples = Number(process.env.BENCH_SAMPLES ?? 16);
const tokens = Number(process.env.BENCH_TOKENS ?? 64);
const threads = Number(process.env.BENCH_THREADS ?? 2);

interface Sampled {
  prompt: number[];
  ids: number[];
  logprobs: number[];
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

const fmt = (x: number) => (Math.abs(x) >= 0.01 ? x.toFixed(4) : x.toExponential(2));

async function sampleWith(dir: string, type: 'F16' | 'Q8_0', prompts: number[][]): Promise<Sampled[]> {
  const sampler = await LlamaCppSampler.open({
    modelDir: dir,
    ggufType: type,
    gpu: 'off',
    threads,
    contextSize: 1024,
    log: (e, f) => console.log(e, JSON.stringify(f)),
  });
  const out: Sampled[] = [];
  try {
    for (const [i, prompt] of prompts.entries()) {
      const s: Sampled = { prompt, ids: [], logprobs: [] };
      for await (const e of sampler.generate(prompt, { maxTokens: tokens, seed: 1000 + i, stopTokenIds: [] }))
        if (e.type === 'token') {
          s.ids.push(e.token.id);
          s.logprobs.push(e.token.logprob);
        }
      out.push(s);
    }
  } finally {
    await sampler.close();
  }
  return out;
}

async function main(): Promise<void> {
  const dir = benchModel(preset);
  const cfg = readModelFolder(dir).config;
  const prompts = Array.from({ length: samples }, (_, s) =>
    Array.from({ length: 32 }, (_, i) => (i * 7919 + s * 104729 + 13) % cfg.vocabSize),
  );
  const learner = await LocalEngine.open(dir, { precision: 'fp32', threads });
  console.log(
    `model ${preset}: ${samples} samples x ${tokens} tokens at temperature 1, fp32 learner vs llama.cpp (CPU)`,
  );
  console.log('type   tokens  |delta| p50   p90       p99       max       TIS>2   seq ratio p5  p50     p95');
  try {
    for (const type of ['F16', 'Q8_0'] as const) {
      const sampled = await sampleWith(dir, type, prompts);
      const abs: number[] = [];
      const ratios: number[] = [];
      let capped = 0;
      for (const s of sampled) {
        const fp32 = (await learner.logprobs(s.prompt, s.ids)).logprobs;
        let sum = 0;
        fp32.forEach((x, i) => {
          const d = x - s.logprobs[i]!;
          abs.push(Math.abs(d));
          if (Math.exp(d) > 2) capped++;
          sum += d;
        });
        ratios.push(Math.exp(sum));
      }
      abs.sort((a, b) => a - b);
      ratios.sort((a, b) => a - b);
      console.log(
        [
          type.padEnd(6),
          String(abs.length).padEnd(7),
          ...[0.5, 0.9, 0.99, 1].map((q) => fmt(quantile(abs, q)).padEnd(9)),
          `${((100 * capped) / abs.length).toFixed(2)}%`.padEnd(7),
          ...[0.05, 0.5, 0.95].map((q) => fmt(quantile(ratios, q)).padEnd(7)),
        ].join(' '),
      );
    }
  } finally {
    await learner.close();
  }
}

await main();
