// Serving while training: decode speed and inter-token gaps of one stream with the learner idle,
// training and yielding to serving (the default), and training without yielding; and training
// throughput in each case. Ratios are against the idle run in the same process.
//
//   node dist/bench/serving-under-training.js [tiny|qwen3-0.6b]   (default qwen3-0.6b)

import { LocalEngine } from '../src/engine/local/engine.js';
import { LocalLearner } from '../src/engine/local/learner.js';
import type { TrainingSample } from '../src/engine/types.js';
import { benchModel, type BenchPreset } from './models.js';
import { DEFAULT_PPO, trainBatch } from '../src/learn/ppo.js';

const preset = (process.argv[2] ?? 'qwen3-0.6b') as BenchPreset;
const seconds = Number(process.env.BENCH_SECONDS ?? (preset === 'tiny' ? 5 : 20));
const dir = benchModel(preset);

interface Decode {
  tokens: number;
  seconds: number;
  gaps: number[];
}

async function decodeFor(engine: LocalEngine, durationS: number): Promise<Decode> {
  const gaps: number[] = [];
  let tokens = 0;
  const start = performance.now();
  for (let seed = 1; performance.now() - start < durationS * 1000; seed++) {
    let last = performance.now(),
      first = true;
    for await (const e of engine.generate([1, 2, 3, 4, 5, 6, 7, 8], {
      maxTokens: 48,
      temperature: 1,
      seed,
      stopTokenIds: [],
    })) {
      if (e.type !== 'token') continue;
      const now = performance.now();
      if (!first) gaps.push(now - last);
      first = false;
      last = now;
      tokens++;
    }
  }
  return { tokens, seconds: (performance.now() - start) / 1000, gaps: gaps.sort((a, b) => a - b) };
}

function samples(vocab: number): TrainingSample[] {
  const ids = (n: number, k: number) => Array.from({ length: n }, (_, i) => 1 + ((i * 37 + k * 11) % (vocab - 1)));
  return [0, 1].map((k) => ({
    promptIds: ids(64, k),
    completionIds: ids(32, k + 5),
    advantages: new Array(32).fill(k === 0 ? 1 : -1),
  }));
}

/** Trains batches until `stop`, returning training tokens/s. */
async function trainUntil(
  learner: LocalLearner,
  batch: TrainingSample[],
  stop: { done: boolean },
): Promise<{ tokensPerSecond: number; yieldedMs: number }> {
  let tokens = 0,
    yieldedMs = 0;
  const start = performance.now();
  while (!stop.done) {
    for (const m of await trainBatch(learner, batch, DEFAULT_PPO)) {
      tokens += m.tokens;
      yieldedMs += m.yieldedMs;
    }
  }
  return { tokensPerSecond: tokens / ((performance.now() - start) / 1000), yieldedMs };
}

const pct = (gaps: number[], p: number) => gaps[Math.min(gaps.length - 1, Math.floor(p * gaps.length))] ?? NaN;
const fmt = (d: Decode) =>
  `${(d.tokens / d.seconds).toFixed(1)} tok/s, gap p50 ${pct(d.gaps, 0.5).toFixed(1)} ms p99 ${pct(d.gaps, 0.99).toFixed(1)} ms max ${pct(d.gaps, 1).toFixed(1)} ms`;

const engine = await LocalEngine.open(dir);
const batch = samples(engine.folder.config.vocabSize);
console.log(`serving under training: ${preset}, ${seconds} s per phase, LoRA rank 16, batches of 2 x (64 + 32) tokens`);
const idle = await decodeFor(engine, seconds);
console.log(`decode, learner idle:          ${fmt(idle)}`);
const results: Record<string, { decode: Decode; train: number; yieldedMs: number }> = {};
for (const yieldToServing of [true, false]) {
  const learner = await LocalLearner.open(engine, { yieldToServing });
  const stop = { done: false };
  const training = trainUntil(learner, batch, stop);
  const decode = await decodeFor(engine, seconds);
  stop.done = true;
  const t = await training;
  await learner.close();
  results[yieldToServing ? 'yield' : 'no-yield'] = { decode, train: t.tokensPerSecond, yieldedMs: t.yieldedMs };
  console.log(
    `decode, training ${yieldToServing ? 'with yield:   ' : 'without yield:'} ${fmt(decode)}; training ${t.tokensPerSecond.toFixed(1)} tok/s (yielded ${(t.yieldedMs / 1000).toFixed(1)} s)`,
  );
}
const alone = await LocalLearner.open(engine);
const stop = { done: false };
const training = trainUntil(alone, batch, stop);
await new Promise((r) => setTimeout(r, seconds * 1000));
stop.done = true;
const trainAlone = (await training).tokensPerSecond;
await alone.close();
await engine.close();
console.log(`training alone:                ${trainAlone.toFixed(1)} tok/s`);
const rate = (d: Decode) => d.tokens / d.seconds;
for (const [name, r] of Object.entries(results)) {
  console.log(
    `ratio ${name.padEnd(8)}: decode ${(rate(r.decode) / rate(idle)).toFixed(2)}x of idle, p99 gap ${(pct(r.decode.gaps, 0.99) / pct(idle.gaps, 0.99)).toFixed(2)}x; training ${(r.train / trainAlone).toFixed(2)}x of alone`,
  );
}
