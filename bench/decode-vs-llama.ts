// Decode benchmark of our engine against llama.cpp (node-llama-cpp, prebuilt CPU binaries) on
// the same random model: our Hugging Face folder converted to GGUF (bench/gguf.ts) as Q8_0 (the
// target: ours >= 1.0x llama.cpp Q8_0), BF16 and F32; ours at fp32, bf16 and int8. Greedy, a
// 128-token prompt (BENCH_PROMPT: long prompts, where decode streams the KV cache more than the
// weights; llama.cpp's cache is F16, ours bf16 at bf16 and int8 and fp32 at fp32), 64 generated
// tokens, the same thread count for both; every candidate's runs
// alternate with runs of our fp32 engine (the reference, loaded once), so each ratio compares
// runs made side by side.
// Correctness: llama.cpp's greedy tokens on the F32 GGUF must equal ours at fp32 (a wrong
// tensor layout, norm or RoPE would change them at once); agreement is printed for every variant,
// on prompt 0 and on each timed prompt. The random 0.6B model has near ties (prompt 0's first
// token: fp32's top two logits 0.0116 apart), which bf16 or int8 rounding can flip
// (docs/cpu-performance.md, int8 decode): read agreement over all the prompts.
//
//   npm run bench:decode-vs-llama                      # tiny, then qwen3-0.6b (the headline)
//   npm run bench:decode-vs-llama -- tiny              # the quick check
//   BENCH_GGUF=Q8_0 BENCH_REPS=5 npm run bench:decode-vs-llama -- qwen3-0.6b
//
// Knobs: BENCH_THREADS (2), BENCH_REPS (runs per side after a warm-up; 7 tiny, 3 otherwise),
// BENCH_PROMPT (128), BENCH_DECODE (64), BENCH_GGUF (Q8_0,BF16,F32), BENCH_REF (fp32: the precision
// of our reference engine, which every other run alternates with; int8 pairs the target's runs
// directly and spares fp32's slow prefill at long prompts), BENCH_OURS (bf16,int8: our other
// rows). GGUF files are cached in .cache/bench-gguf/.

import { availableParallelism, loadavg } from 'node:os';
import { LocalEngine, type LocalEngineOptions } from '../src/engine/local/engine.js';
import type { GgufWeightType } from '../src/engine/llama-cpp/gguf.js';
import {
  cachedGguf,
  importNodeLlamaCpp,
  LlamaRunner,
  NODE_LLAMA_CPP_VERSION,
  openLlama,
  type DecodeRun,
} from './llama-cpp.js';
import { median, printMachine } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const PROMPT = Number(process.env.BENCH_PROMPT ?? 128);
const DECODE = Number(process.env.BENCH_DECODE ?? 64);
const CHECK = 8; // the first tokens that must agree at fp32/F32
const GGUF_TYPES = (process.env.BENCH_GGUF ?? 'Q8_0,BF16,F32').split(',') as GgufWeightType[];
/** Thread counts llama.cpp Q8_0 is timed at (its best counts for the target). */
const LLAMA_Q8_THREADS = [...new Set([THREADS, ...(process.env.BENCH_LLAMA_Q8_THREADS ?? '1').split(',').map(Number)])];

type Precision = 'fp32' | 'bf16' | 'int8';
const REF = (process.env.BENCH_REF ?? 'fp32') as Precision;
const OURS = (process.env.BENCH_OURS ?? 'bf16,int8').split(',').filter((p) => p && p !== REF) as Precision[];

const promptIds = (salt: number) => Array.from({ length: PROMPT }, (_, i) => ((i * 31 + salt * 17) % 400) + 10);

interface Runner {
  name: string;
  run(salt: number): Promise<DecodeRun>;
  close(): Promise<void>;
}

async function ourEngine(dir: string, precision: Precision): Promise<Runner | string> {
  const options: LocalEngineOptions = { threads: THREADS, maxStepTokens: 512, kvCacheBytes: 0, precision };
  const engine = await LocalEngine.open(dir, options);
  if (engine.info.precision !== precision) {
    await engine.close();
    return `the engine serves ${engine.info.precision} here, not ${precision}`;
  }
  return {
    name: `ours ${precision}`,
    async run(salt) {
      const ids: number[] = [];
      const t0 = performance.now();
      let first = 0;
      for await (const e of engine.generate(promptIds(salt), { maxTokens: DECODE, temperature: 0, stopTokenIds: [] })) {
        if (e.type !== 'token') continue;
        if (ids.length === 0) first = performance.now();
        ids.push(e.token.id);
      }
      const end = performance.now();
      return {
        prefillTokPerS: PROMPT / ((first - t0) / 1000),
        decodeTokPerS: (ids.length - 1) / ((end - first) / 1000),
        tokens: ids,
      };
    },
    close: () => engine.close(),
  };
}

const agree = (a: number[], b: number[]) => {
  let n = 0;
  while (n < Math.min(a.length, b.length) && a[n] === b[n]) n++;
  return n;
};

interface Row {
  name: string;
  decode: number;
  prefill: number;
  refDecode: number;
  agreeRef: number;
  /** Agreement on each timed rep's prompt (the same prompt on both sides). */
  agreeReps: number[];
  note?: string;
}

/** Warm-up, then `reps` alternating runs of the reference and the candidate, different prompts each rep. */
async function pair(ref: Runner, cand: Runner, reps: number): Promise<Row> {
  const r0 = await ref.run(0),
    c0 = await cand.run(0);
  const refDecode: number[] = [],
    decode: number[] = [],
    prefill: number[] = [],
    agreeReps: number[] = [];
  for (let r = 1; r <= reps; r++) {
    const refRun = await ref.run(r);
    refDecode.push(refRun.decodeTokPerS);
    const c = await cand.run(r);
    decode.push(c.decodeTokPerS);
    prefill.push(c.prefillTokPerS);
    agreeReps.push(agree(refRun.tokens, c.tokens));
  }
  return {
    name: cand.name,
    decode: median(decode),
    prefill: median(prefill),
    refDecode: median(refDecode),
    agreeRef: agree(r0.tokens, c0.tokens),
    agreeReps,
  };
}

async function main() {
  const which = process.argv.slice(2);
  const presets = (which.length ? which : ['tiny', 'qwen3-0.6b']) as BenchPreset[];
  printMachine(THREADS);
  const mod = await importNodeLlamaCpp();
  const llama =
    typeof mod === 'string' ? mod : await openLlama(mod, THREADS).catch((e: Error) => `getLlama failed: ${e.message}`);
  if (typeof llama === 'string') console.log(`llama.cpp: not measured: ${llama}`);
  else {
    console.log(
      `llama.cpp: node-llama-cpp ${NODE_LLAMA_CPP_VERSION}, ${llama.buildType} binaries, gpu ${String(llama.gpu)}`,
    );
    console.log(`llama.cpp system info: ${llama.systemInfo}`);
  }

  for (const preset of presets) {
    const dir = benchModel(preset, Math.ceil((PROMPT + DECODE + 64) / 1024) * 1024);
    const reps = Number(process.env.BENCH_REPS ?? (preset === 'tiny' ? 7 : 3));
    console.log(
      `\nload average before: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')} on ${availableParallelism()} cores`,
    );
    console.log(
      `== ${preset}: greedy decode, prompt ${PROMPT}, ${DECODE} generated tokens, ${THREADS} threads, median of ${reps} runs per side ==`,
    );
    const ref = await ourEngine(dir, REF);
    if (typeof ref === 'string') throw new Error(ref);
    const rows: Row[] = [];
    const selfRows: DecodeRun[] = [];
    for (let r = 0; r <= reps; r++) selfRows.push(await ref.run(r));
    rows.push({
      name: `ours ${REF} (reference)`,
      decode: median(selfRows.slice(1).map((x) => x.decodeTokPerS)),
      prefill: median(selfRows.slice(1).map((x) => x.prefillTokPerS)),
      refDecode: NaN,
      agreeRef: DECODE,
      agreeReps: [],
    });

    const candidates: { name: string; open: () => Promise<Runner | string> }[] = [];
    if (typeof llama !== 'string') {
      // ggml's thread pool spins at barriers: on a machine shared with other jobs a descheduled
      // worker stalls every op, so llama.cpp is also timed on 1 thread and its best counts.
      for (const type of GGUF_TYPES)
        for (const threads of type === 'Q8_0' ? LLAMA_Q8_THREADS : [THREADS]) {
          const name = `llama.cpp ${type}${threads === THREADS ? '' : ` ${threads}t`}`;
          candidates.push({
            name,
            open: async () => {
              const path = cachedGguf(preset, dir, type);
              try {
                const runner = await LlamaRunner.open(llama, path, threads, PROMPT + DECODE + 64);
                return {
                  name,
                  run: (salt: number) => runner.run(promptIds(salt), DECODE),
                  close: () => runner.close(),
                };
              } catch (e) {
                return `llama.cpp could not load ${path}: ${(e as Error).message}`;
              }
            },
          });
        }
    }
    for (const precision of OURS) candidates.push({ name: `ours ${precision}`, open: () => ourEngine(dir, precision) });

    for (const c of candidates) {
      const runner = await c.open();
      if (typeof runner === 'string') {
        rows.push({
          name: c.name,
          decode: NaN,
          prefill: NaN,
          refDecode: NaN,
          agreeRef: NaN,
          agreeReps: [],
          note: runner,
        });
        continue;
      }
      try {
        const row = await pair(ref, runner, reps);
        rows.push(row);
        console.log(
          `  measured ${row.name}: ${row.decode.toFixed(1)} tok/s decode (ours ${REF} alongside ${row.refDecode.toFixed(1)}), greedy agreement ${row.agreeRef}/${DECODE} (timed prompts: ${row.agreeReps.join(' ')})`,
        );
      } finally {
        await runner.close();
      }
    }
    await ref.close();
    console.log(
      `load average after: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
    );

    console.log(
      `${'system'.padEnd(24)} ${'decode tok/s'.padStart(12)} ${'prefill tok/s'.padStart(13)}  ${`ours ${REF} alongside`.padStart(19)}  ${`ours ${REF} / it`.padStart(14)}  greedy tokens = ours ${REF} (prompt 0; timed prompts)`,
    );
    for (const r of rows) {
      if (r.note) {
        console.log(`${r.name.padEnd(24)} not measured: ${r.note}`);
        continue;
      }
      const ratio = Number.isNaN(r.refDecode) ? '' : `${(r.refDecode / r.decode).toFixed(2)}x`;
      console.log(
        `${r.name.padEnd(24)} ${r.decode.toFixed(1).padStart(12)} ${r.prefill.toFixed(1).padStart(13)}  ${(Number.isNaN(r.refDecode) ? '' : r.refDecode.toFixed(1)).padStart(19)}  ${ratio.padStart(14)}  ${r.agreeRef}/${DECODE}; ${r.agreeReps.join(' ')}`,
      );
    }
    const q8 = rows
      .filter((r) => r.name.startsWith('llama.cpp Q8_0') && !r.note)
      .sort((a, b) => a.refDecode / a.decode - b.refDecode / b.decode)[0];
    const f32 = rows.find((r) => r.name === 'llama.cpp F32' && !r.note);
    const lower = rows.filter((r) => OURS.some((p) => r.name === `ours ${p}`) && !r.note);
    if (q8) {
      const ratio = q8.refDecode / q8.decode;
      console.log(
        `target: decode >= 1.0x llama.cpp Q8_0 (its best thread count: ${q8.name}) -> ours ${REF} ${ratio.toFixed(2)}x ${ratio >= 1 ? 'MET' : 'NOT MET'}`,
      );
      for (const r of lower) {
        console.log(
          `         ${r.name} ${(r.decode / q8.decode).toFixed(2)}x (runs not side by side: via the two medians)`,
        );
      }
    }
    if (f32 && REF === 'fp32')
      console.log(
        `correctness: llama.cpp F32 greedy tokens equal ours fp32 for the first ${f32.agreeRef} of ${DECODE} (need >= ${CHECK}): ${f32.agreeRef >= CHECK ? 'OK' : 'MISMATCH'}`,
      );
  }
  if (typeof llama !== 'string') await llama.dispose();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
