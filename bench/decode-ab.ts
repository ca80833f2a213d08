// Decode speed of two builds of this project in one process: this checkout's engine (B) against
// another checkout's (A, BENCH_BASE: a folder with its own `dist` and native build, e.g. a
// `git worktree` of an earlier commit), runs alternated, so that both see the same machine.
// Each engine runs in its own worker with its own native addon, so native changes compare too.
// Prints each side's decode and prefill tokens/s per run, the medians and the median of the runs'
// paired ratios.
//
//   BENCH_BASE=/tmp/base npm run bench:decode-ab                    # qwen3-0.6b, int8, greedy
//   BENCH_BASE=/tmp/base BENCH_TEMPERATURE=0.7 BENCH_TOP_P=0.9 npm run bench:decode-ab -- tiny
//
// Knobs: BENCH_PRECISION (int8), BENCH_THREADS (2), BENCH_PROMPT (128 tokens), BENCH_DECODE (64),
// BENCH_REPS (6), BENCH_TEMPERATURE (0), BENCH_TOP_P (1), BENCH_TOP_K (0: off).

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { LocalEngine } from '../src/engine/local/engine.js';
import { median, printMachine } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';

const BASE = process.env.BENCH_BASE;
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const PROMPT = Number(process.env.BENCH_PROMPT ?? 128);
const DECODE = Number(process.env.BENCH_DECODE ?? 64);
const REPS = Number(process.env.BENCH_REPS ?? 6);
const TEMPERATURE = Number(process.env.BENCH_TEMPERATURE ?? 0);
const TOP_P = Number(process.env.BENCH_TOP_P ?? 1);
const TOP_K = Number(process.env.BENCH_TOP_K ?? 0);
const PRECISION = (process.env.BENCH_PRECISION ?? 'int8') as 'fp32' | 'bf16' | 'int8';

type Engine = Pick<LocalEngine, 'generate' | 'close'>;

/**
 * Decode tokens/s of one generation (the first token, which ends the prefill, excluded), and
 * prefill tokens/s (the prompt over the time to the first token).
 */
async function rates(engine: Engine, salt: number): Promise<{ decode: number; prefill: number }> {
  const prompt = Array.from({ length: PROMPT }, (_, i) => ((i * 31 + salt * 17) % 400) + 10);
  const params = {
    maxTokens: DECODE,
    temperature: TEMPERATURE,
    topP: TOP_P,
    topK: TOP_K,
    stopTokenIds: [],
    seed: salt,
  };
  const start = performance.now();
  let first = 0,
    tokens = 0;
  for await (const e of engine.generate(prompt, params)) {
    if (e.type !== 'token') continue;
    if (tokens++ === 0) first = performance.now();
  }
  return { decode: (tokens - 1) / ((performance.now() - first) / 1000), prefill: PROMPT / ((first - start) / 1000) };
}

async function main() {
  if (!BASE) throw new Error('set BENCH_BASE to another checkout of this project, built (npm run build)');
  const preset = (process.argv[2] ?? 'qwen3-0.6b') as BenchPreset;
  const baseModule = pathToFileURL(resolve(BASE, 'dist/src/engine/local/engine.js')).href;
  const { LocalEngine: BaseEngine } = (await import(baseModule)) as { LocalEngine: typeof LocalEngine };
  printMachine(THREADS);
  const dir = benchModel(preset);
  const options = { threads: THREADS, maxStepTokens: 512, kvCacheBytes: 0, precision: PRECISION };
  const a: Engine = await BaseEngine.open(dir, options);
  const b: Engine = await LocalEngine.open(dir, options);
  const decode: [number[], number[]] = [[], []],
    prefill: [number[], number[]] = [[], []];
  try {
    await rates(a, 0);
    await rates(b, 0);
    for (let rep = 1; rep <= REPS; rep++) {
      // Alternate which side goes first, so neither always runs on a machine the other warmed.
      const order: [Engine, number][] =
        rep % 2
          ? [
              [a, 0],
              [b, 1],
            ]
          : [
              [b, 1],
              [a, 0],
            ];
      for (const [engine, side] of order) {
        const r = await rates(engine, rep);
        decode[side]!.push(r.decode);
        prefill[side]!.push(r.prefill);
      }
    }
  } finally {
    await a.close();
    await b.close();
  }
  console.log(
    `\n== ${preset}, ${PRECISION}: decode after a ${PROMPT}-token prompt, ${DECODE} tokens, temperature ` +
      `${TEMPERATURE}, top-p ${TOP_P}, ${THREADS} threads, ${REPS} alternated runs per side ==`,
  );
  const show = (rs: number[]) => rs.map((r) => r.toFixed(1)).join(' ');
  for (const [what, rs] of [
    ['decode', decode],
    ['prefill', prefill],
  ] as const) {
    console.log(`${what}: A ${BASE}: ${show(rs[0])} tok/s, median ${median(rs[0]).toFixed(1)}`);
    console.log(`${what}: B this checkout: ${show(rs[1])} tok/s, median ${median(rs[1]).toFixed(1)}`);
    const paired = rs[1].map((r, i) => r / rs[0][i]!);
    console.log(
      `${what}: B / A: ${(median(rs[1]) / median(rs[0])).toFixed(3)} (medians), ${median(paired).toFixed(3)} (paired)`,
    );
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
