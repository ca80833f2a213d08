// Keys and values in int8 against bf16 after a long prompt (--kv-cache-dtype): at OpenClaw's
// sizes a decode step reads the whole cache once (2 bytes a value at bf16, 1.125 at int8) on top
// of the weights, so the cache's bytes, not the weights', bound decode there. One process, one
// model (int8 weights, as `auto` picks with VNNI): the same prompt prefilled into a cache of each
// dtype (timed), then decode steps on the same teacher-forced tokens, the two caches alternating
// round by round and cut back to the prompt after each round, so every round does the same work.
// Also how far int8's logits move from bf16's on those steps (KL, max |diff|, top-1 agreement).
//
//   npm run bench:kv-cache-int8                          # qwen3-0.6b, 8,192-token prompt
//   BENCH_CONTEXT=16384 npm run bench:kv-cache-int8
//   npm run bench:kv-cache-int8 -- small                 # tiny's head_dim (16) cannot hold int8 rows
//
// Knobs: BENCH_CONTEXT (8192), BENCH_DECODE (16 steps a round), BENCH_ROUNDS (5), BENCH_THREADS (2),
// BENCH_PRECISION (int8; bf16 or fp32 for those weights).

import { loadKernels } from '../src/engine/local/kernels/index.js';
import type { KvCache, KvDtype } from '../src/engine/local/model/kv-cache.js';
import { kvCacheBytes } from '../src/engine/local/model/kv-cache.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { int8Tensors, Transformer } from '../src/engine/local/model/transformer.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { bf16ParamsOf, int8ParamsOf } from '../src/engine/local/precision.js';
import { median, printMachine } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';

const preset = (process.argv[2] ?? 'qwen3-0.6b') as BenchPreset;
const CONTEXT = Number(process.env.BENCH_CONTEXT ?? 8192);
const DECODE = Number(process.env.BENCH_DECODE ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const PRECISION = process.env.BENCH_PRECISION ?? 'int8';
/** Prompt tokens per forward call, as serve's default step. */
const CHUNK = 256;
const DTYPES: KvDtype[] = ['bf16', 'int8'];

printMachine(THREADS);
const kernels = loadKernels();
kernels.setThreads(THREADS);
const dir = benchModel(preset, CONTEXT + DECODE + 8);
const cfg = readModelFolder(dir).config;
const params = loadWeights(dir, cfg);
const bf16 = PRECISION === 'fp32' ? undefined : bf16ParamsOf(kernels, params.specs, params.data);
const int8 = PRECISION === 'int8' ? int8ParamsOf(kernels, params.specs, params.data, int8Tensors(cfg)) : undefined;
const models = new Map(DTYPES.map((d) => [d, new Transformer(cfg, params, kernels, bf16, int8, d)]));
console.log(
  `\n${preset}, weights ${PRECISION}, a ${CONTEXT}-token prompt in chunks of ${CHUNK}, ` +
    `${DECODE} decode steps a round, ${ROUNDS} rounds per dtype, ${THREADS} threads`,
);

// Token ids spread over the vocabulary; the decode steps read fixed ids, so both caches do the same work.
const token = (i: number) => (i * 7919 + 13) % cfg.vocabSize;
const prompt = Array.from({ length: CONTEXT }, (_, i) => token(i));
const steps = Array.from({ length: DECODE }, (_, i) => token(CONTEXT + i));

const caches = new Map<KvDtype, KvCache>();
for (const dtype of DTYPES) {
  const model = models.get(dtype)!;
  const cache = model.newKvCache(CONTEXT + DECODE);
  const t0 = performance.now();
  for (let at = 0; at < CONTEXT; at += CHUNK) {
    const tokens = prompt.slice(at, at + CHUNK);
    model.forward([{ cache, tokens, logitsFrom: tokens.length }]);
  }
  const seconds = (performance.now() - t0) / 1000;
  caches.set(dtype, cache);
  console.log(
    `prefill, ${dtype} rows: ${seconds.toFixed(1)} s (${(CONTEXT / seconds).toFixed(1)} tok/s); ` +
      `cache ${(kvCacheBytes(cache) / 2 ** 20).toFixed(0)} MiB for ${CONTEXT + DECODE} positions`,
  );
}

/** One round: the decode steps from the prompt's end; their logits (copies) and tokens a second. */
function round(dtype: KvDtype): { tokPerS: number; logits: Float32Array[] } {
  const model = models.get(dtype)!,
    cache = caches.get(dtype)!;
  cache.length = CONTEXT;
  const logits: Float32Array[] = [];
  const t0 = performance.now();
  for (const id of steps) logits.push(model.forward([{ cache, tokens: [id], logitsFrom: 0 }])[0]!.slice());
  return { tokPerS: DECODE / ((performance.now() - t0) / 1000), logits };
}

round('bf16');
round('int8'); // warm-up
const speeds: Record<string, number[]> = { bf16: [], int8: [] };
const ratios: number[] = [];
let last: Record<string, Float32Array[]> = {};
for (let r = 0; r < ROUNDS; r++) {
  const b = round('bf16'),
    i = round('int8');
  speeds.bf16!.push(b.tokPerS);
  speeds.int8!.push(i.tokPerS);
  ratios.push(i.tokPerS / b.tokPerS);
  last = { bf16: b.logits, int8: i.logits };
}
const fmt = (xs: number[]) => xs.map((x) => x.toFixed(1)).join(' ');
console.log(`\ndecode after ${CONTEXT} tokens, tok/s per round:`);
console.log(`  bf16 rows: ${fmt(speeds.bf16!)} (median ${median(speeds.bf16!).toFixed(1)})`);
console.log(`  int8 rows: ${fmt(speeds.int8!)} (median ${median(speeds.int8!).toFixed(1)})`);
console.log(
  `  int8 / bf16, per round: ${ratios.map((x) => x.toFixed(2)).join(' ')}; median ${median(ratios).toFixed(2)}x`,
);

// How far int8's logits are from bf16's, on the same steps (random weights: near ties are common).
let agree = 0;
const kls: number[] = [],
  diffs: number[] = [];
for (let s = 0; s < DECODE; s++) {
  const a = last.bf16![s]!,
    b = last.int8![s]!;
  const lse = (x: Float32Array) => {
    let m = -Infinity;
    for (const v of x) m = Math.max(m, v);
    let sum = 0;
    for (const v of x) sum += Math.exp(v - m);
    return m + Math.log(sum);
  };
  const la = lse(a),
    lb = lse(b);
  let kl = 0,
    diff = 0,
    topA = 0,
    topB = 0;
  for (let j = 0; j < a.length; j++) {
    const pa = a[j]! - la;
    kl += Math.exp(pa) * (pa - (b[j]! - lb));
    diff = Math.max(diff, Math.abs(a[j]! - b[j]!));
    if (a[j]! > a[topA]!) topA = j;
    if (b[j]! > b[topB]!) topB = j;
  }
  kls.push(kl);
  diffs.push(diff);
  if (topA === topB) agree++;
}
console.log(
  `\nint8 rows against bf16 rows, ${DECODE} decode steps: KL(bf16 || int8) median ${median(kls).toExponential(2)} ` +
    `nats (max ${Math.max(...kls).toExponential(2)}), max |logit diff| median ${median(diffs).toExponential(2)}, ` +
    `top-1 equal ${agree}/${DECODE}`,
);
