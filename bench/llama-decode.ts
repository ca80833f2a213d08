// Decode through our LlamaCppSampler against node-llama-cpp's own generation loop, in one process,
// on the same GGUF and thread count, rounds alternating the two so the machine's noise falls on
// both (issue 17: `serve --sampler llama-cpp` decoded about 4x slower than node-llama-cpp's loop).
// Each sampling setting runs with the same settings on both sides: greedy and temperature 1 over
// the whole vocabulary (llama.cpp samples, our sampler reads back a few logits); Qwen3's default,
// temperature 0.6, top-p 0.95, top-k 20 (our sampler samples the 256 largest logits in JS); the
// bench models' default, temperature 0.7, top-p 0.9 (random weights give flat distributions whose
// nucleus lies beyond those 256, so our sampler mostly takes the whole row). node-llama-cpp's own
// loop applies top-k and top-p before the temperature, ours after: the same work, other samples.
//
//   npm run bench:llama-decode                      # tiny, then qwen3-0.6b
//   npm run bench:llama-decode -- tiny              # the quick check
//   BENCH_ROUNDS=3 npm run bench:llama-decode -- qwen3-0.6b
//
// Knobs: BENCH_LLAMA_THREADS (1), BENCH_GGUF (Q8_0), BENCH_OWN_FLASH_ATTENTION (1: the own loop with
// node-llama-cpp's default, flash attention on), BENCH_ROUNDS (5 tiny, 2 otherwise), BENCH_DECODE
// (128 tiny, 16 otherwise: at the 0.6B shape on two cores a step takes 50-250 ms).

import { availableParallelism, loadavg } from 'node:os';
import { cachedModelGguf, type GgufWeightType } from '../src/engine/llama-cpp/gguf.js';
import { LlamaCppSampler } from '../src/engine/llama-cpp/sampler.js';
import type { SamplingParams } from '../src/engine/types.js';
import {
  importNodeLlamaCpp,
  LLAMA_PREFIX,
  type LlamaSampling,
  LlamaRunner,
  NODE_LLAMA_CPP_VERSION,
  openLlama,
} from './llama-cpp.js';
import { median } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';
import { promptOf } from './sampler-throughput.js';

const THREADS = Number(process.env.BENCH_LLAMA_THREADS ?? 1);
const GGUF = (process.env.BENCH_GGUF ?? 'Q8_0') as GgufWeightType;
const PROMPT = 64;
const CONTEXT = 512;
/** BENCH_OWN_FLASH_ATTENTION=1: node-llama-cpp's own loop with its default flash attention (on). */
const FLASH_ATTENTION = process.env.BENCH_OWN_FLASH_ATTENTION === '1' ? undefined : false;

interface Setting {
  name: string;
  ours: Pick<SamplingParams, 'temperature' | 'topP' | 'topK'>;
  own: LlamaSampling;
}

const SETTINGS: Setting[] = [
  { name: 'greedy', ours: { temperature: 0 }, own: { temperature: 0 } },
  { name: 'temperature 1', ours: { temperature: 1 }, own: { temperature: 1, topK: 0, topP: 1 } },
  {
    name: 'T 0.6, p 0.95, k 20',
    ours: { temperature: 0.6, topP: 0.95, topK: 20 },
    own: { temperature: 0.6, topK: 20, topP: 0.95 },
  },
  { name: 'T 0.7, p 0.9', ours: { temperature: 0.7, topP: 0.9 }, own: { temperature: 0.7, topK: 0, topP: 0.9 } },
];

/** Decode tokens/s after the first token of one request through our sampler. */
async function ours(sampler: LlamaCppSampler, prompt: number[], n: number, s: Setting, seed: number) {
  let first = 0;
  let tokens = 0;
  for await (const e of sampler.generate(prompt, { ...s.ours, maxTokens: n, seed, stopTokenIds: [] })) {
    if (e.type !== 'token') continue;
    if (tokens++ === 0) first = performance.now();
  }
  return { decode: (tokens - 1) / ((performance.now() - first) / 1000), tokens };
}

async function bench(preset: BenchPreset): Promise<void> {
  const dir = benchModel(preset);
  const rounds = Number(process.env.BENCH_ROUNDS ?? (preset === 'tiny' ? 5 : 2));
  const n = Number(process.env.BENCH_DECODE ?? (preset === 'tiny' ? 128 : 16));
  const sampler = await LlamaCppSampler.open({
    modelDir: dir,
    ggufType: GGUF,
    gpu: 'off',
    threads: THREADS,
    contextSize: CONTEXT,
    nodeLlamaCppFallback: LLAMA_PREFIX,
  });
  const mod = await importNodeLlamaCpp();
  if (typeof mod === 'string') throw new Error(mod);
  const llama = await openLlama(mod, THREADS);
  // Flash attention off on both sides: our sampler keeps it off (scores and generation agree
  // without it, docs/engine.md); node-llama-cpp's default turns it on, 15-25% faster decode here.
  const own = await LlamaRunner.open(llama, cachedModelGguf(dir, GGUF), THREADS, CONTEXT, FLASH_ATTENTION);
  const vocab = Math.min(sampler.config.vocabSize, 4096);
  const load = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
  console.log(
    `\n== ${preset} ${GGUF}: ${n} tokens after ${PROMPT}, 1 stream, ${THREADS} llama.cpp threads, own loop's flash attention ${FLASH_ATTENTION === false ? 'off' : 'default'}, ${rounds} rounds (load ${load} on ${availableParallelism()} cores) ==`,
  );
  console.log(`${'setting'.padEnd(22)} ${'own loop'.padStart(9)} ${'ours'.padStart(9)}   ours / own loop per round`);
  try {
    for (const s of SETTINGS) {
      await own.run(promptOf(PROMPT, 0, vocab), n, { ...s.own, yieldEogToken: true }); // warm-up
      await ours(sampler, promptOf(PROMPT, 0, vocab), n, s, 0);
      const o: number[] = [];
      const u: number[] = [];
      const short: string[] = [];
      for (let r = 1; r <= rounds; r++) {
        const prompt = promptOf(PROMPT, r, vocab);
        // Alternate which side goes first.
        const runOwn = () => own.run(prompt, n, { ...s.own, seed: r, yieldEogToken: true });
        const first = r % 2 === 1 ? await runOwn() : null;
        const mine = await ours(sampler, prompt, n, s, r);
        const theirs = first ?? (await runOwn());
        o.push(theirs.decodeTokPerS);
        u.push(mine.decode);
        if (theirs.tokens.length < n) short.push(`own loop stopped at ${theirs.tokens.length} tokens (end of text)`);
      }
      const ratios = u.map((x, i) => x / o[i]!);
      console.log(
        `${s.name.padEnd(22)} ${median(o).toFixed(1).padStart(9)} ${median(u).toFixed(1).padStart(9)}   ${ratios.map((x) => x.toFixed(2)).join(' ')} (median ${median(ratios).toFixed(2)})${short.length ? `; ${short.join('; ')}` : ''}`,
      );
    }
  } finally {
    await own.close();
    await llama.dispose();
    await sampler.close();
  }
}

async function main(): Promise<void> {
  const which = process.argv.slice(2) as BenchPreset[];
  console.log(`node-llama-cpp ${NODE_LLAMA_CPP_VERSION}, CPU; decode tokens/s after the first token`);
  for (const preset of which.length ? which : (['tiny', 'qwen3-0.6b'] as BenchPreset[])) await bench(preset);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
