// int8 against bf16 for decoding, measured back to back in one process so that their ratio holds
// on a machine shared with other work: first one decode row's products at the Qwen3-0.6B shapes
// (gemmInt8 with its widest variant and capped to the fp32-activation one, gemmBf16, fp32 sgemv),
// then whole engines (bf16, int8, int8 capped) decoding the same prompts greedily, their runs
// interleaved rep by rep. Also prints whether int8's greedy tokens equal bf16's.
//
//   npm run bench:int8-decode                      # qwen3-0.6b
//   npm run bench:int8-decode -- tiny
//
// Knobs: BENCH_THREADS (2), BENCH_REPS (5), BENCH_DECODE (64).

import { LocalEngine } from '../src/engine/local/engine.js';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { INT8_BLOCK } from '../src/engine/local/kernels/int8.js';
import { median, printMachine } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';
import { secondsPerCall } from './timing.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const REPS = Number(process.env.BENCH_REPS ?? 5);
const DECODE = Number(process.env.BENCH_DECODE ?? 64);
const PROMPT = 128;
const CAP = 'OPENCLAW_RL_INT8_DOT';
/** The fp32-activation variant, for comparison with VNNI (read by gemmInt8 on every call). */
const FP32_ACTIVATIONS = 'avx512';

/** Runs `f` with gemmInt8 capped to the fp32-activation variant. */
function capped<T>(f: () => T): T {
  process.env[CAP] = FP32_ACTIVATIONS;
  try {
    return f();
  } finally {
    delete process.env[CAP];
  }
}

function products(): void {
  const k = loadKernels();
  k.setThreads(THREADS);
  const D = 1024;
  const shapes: [string, number, number][] = [
    ['q (2048 x 1024)', 2048, D],
    ['gate, up (3072 x 1024)', 3072, D],
    ['down (1024 x 3072)', D, 3072],
    ['head (151936 x 1024)', 151936, D],
  ];
  console.log(`\none decode row, ${THREADS} threads, ms per product (median), interleaved:`);
  console.log(
    `${'weight [N,K]'.padEnd(24)} ${`int8 ${k.info.int8Dot}`.padStart(12)} ${'int8 fp32-x'.padStart(12)} ` +
      `${'bf16'.padStart(8)} ${'fp32'.padStart(8)}  int8 / bf16 time`,
  );
  for (const [name, N, K] of shapes) {
    const w = Float32Array.from({ length: N * K }, (_, i) => Math.sin(i * 0.37) * 0.05);
    const x = Float32Array.from({ length: K }, (_, i) => Math.cos(i * 0.11));
    const q = new Int8Array(N * K),
      scales = new Float32Array((N * K) / INT8_BLOCK),
      b16 = new Uint16Array(N * K),
      y = new Float32Array(N);
    k.quantizeInt8(q, scales, w, N, K);
    k.toBf16(b16, w, N * K);
    const runs = {
      int8: () => k.gemmInt8(1, N, K, x, q, scales, y),
      int8Fp32x: () => capped(() => k.gemmInt8(1, N, K, x, q, scales, y)),
      bf16: () => k.gemmBf16(false, true, 1, N, K, 1, x, K, b16, K, 0, y, N),
      fp32: () => k.sgemv(false, N, K, 1, w, K, x, 0, y),
    };
    const times: Record<keyof typeof runs, number[]> = { int8: [], int8Fp32x: [], bf16: [], fp32: [] };
    for (let r = 0; r < 3; r++)
      for (const key of Object.keys(runs) as (keyof typeof runs)[]) times[key].push(secondsPerCall(runs[key], 0.3));
    const ms = (key: keyof typeof runs) => median(times[key]) * 1000;
    console.log(
      `${name.padEnd(24)} ${ms('int8').toFixed(3).padStart(12)} ${ms('int8Fp32x').toFixed(3).padStart(12)} ` +
        `${ms('bf16').toFixed(3).padStart(8)} ${ms('fp32').toFixed(3).padStart(8)}  ${(ms('int8') / ms('bf16')).toFixed(2)}`,
    );
  }
}

interface Run {
  decodeTokPerS: number;
  tokens: number[];
}

async function decode(engine: LocalEngine, salt: number): Promise<Run> {
  const prompt = Array.from({ length: PROMPT }, (_, i) => ((i * 31 + salt * 17) % 400) + 10);
  const tokens: number[] = [];
  let first = 0;
  for await (const e of engine.generate(prompt, { maxTokens: DECODE, temperature: 0, stopTokenIds: [] })) {
    if (e.type !== 'token') continue;
    if (tokens.length === 0) first = performance.now();
    tokens.push(e.token.id);
  }
  return { decodeTokPerS: (tokens.length - 1) / ((performance.now() - first) / 1000), tokens };
}

async function engines(preset: BenchPreset): Promise<void> {
  const dir = benchModel(preset);
  const open = (precision: 'bf16' | 'int8') =>
    LocalEngine.open(dir, { threads: THREADS, maxStepTokens: 512, kvCacheBytes: 0, precision });
  const bf16 = await open('bf16'),
    int8 = await open('int8');
  let salt = 0;
  const sides: [string, () => Promise<Run>][] = [
    ['bf16', () => decode(bf16, salt)],
    ['int8', () => decode(int8, salt)],
    // The cap is read by the worker's gemmInt8 on every call; only this side's runs see it.
    [
      `int8 ${FP32_ACTIVATIONS} (fp32 activations)`,
      async () => {
        process.env[CAP] = FP32_ACTIVATIONS;
        try {
          return await decode(int8, salt);
        } finally {
          delete process.env[CAP];
        }
      },
    ],
  ];
  const rates = sides.map(() => [] as number[]);
  const ratios = sides.map(() => [] as number[]);
  const agreement = sides.map(() => [] as number[]);
  try {
    for (const [, run] of sides) await run(); // warm-up
    for (salt = 1; salt <= REPS; salt++) {
      const runs: Run[] = [];
      for (const [, run] of sides) runs.push(await run());
      runs.forEach((r, i) => {
        rates[i]!.push(r.decodeTokPerS);
        ratios[i]!.push(r.decodeTokPerS / runs[0]!.decodeTokPerS);
        let same = 0;
        while (same < r.tokens.length && r.tokens[same] === runs[0]!.tokens[same]) same++;
        agreement[i]!.push(same);
      });
    }
  } finally {
    await bf16.close();
    await int8.close();
  }
  console.log(
    `\n== ${preset}: greedy decode after a ${PROMPT}-token prompt, ${DECODE} tokens, ${THREADS} threads, ` +
      `${REPS} reps, each rep's runs back to back ==`,
  );
  console.log(
    `${'engine'.padEnd(34)} ${'decode tok/s'.padStart(12)}  ${'/ bf16 (median of reps)'.padStart(24)}  greedy = bf16`,
  );
  sides.forEach(([name], i) => {
    console.log(
      `${name.padEnd(34)} ${median(rates[i]!).toFixed(1).padStart(12)}  ${`${median(ratios[i]!).toFixed(2)}x`.padStart(24)}  ` +
        `${agreement[i]!.map((n) => `${n}/${DECODE}`).join(' ')}`,
    );
  });
}

async function main() {
  const presets = (process.argv.slice(2).length ? process.argv.slice(2) : ['qwen3-0.6b']) as BenchPreset[];
  printMachine(THREADS);
  products();
  for (const p of presets) await engines(p);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
