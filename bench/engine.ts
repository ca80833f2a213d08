// Inference benchmark of the embedded engine against PyTorch CPU on the same weights, in the
// same run: prefill and decode tokens/s for a tiny model and a random Qwen3-0.6B-shaped model,
// aggregate decode with 8 concurrent generations, and peak RSS.
//
//   npm run bench:engine                 # tiny + qwen3-0.6b shapes
//   npm run bench:engine -- tiny         # only the tiny model
//
// Models are generated once into .cache/bench-models/. Ratios > 1 mean the engine is faster.

import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { LocalEngine } from '../src/engine/local/engine.js';
import { cachedGguf, importNodeLlamaCpp, LlamaRunner, openLlama } from './llama-cpp.js';
import { benchModel, PYTHON, ROOT, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const PROMPT = 128;
const DECODE = 32;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const promptIds = (n: number, salt: number) => Array.from({ length: n }, (_, i) => ((i * 31 + salt * 17) % 400) + 10);

async function measureEngine(dir: string, reps: number) {
  const engine = await LocalEngine.open(dir, { threads: THREADS, maxStepTokens: 512 });
  try {
    const prefill: number[] = [],
      decode: number[] = [];
    for (let r = 0; r <= reps; r++) {
      const t0 = performance.now();
      let first = 0,
        n = 0;
      for await (const e of engine.generate(promptIds(PROMPT, r), {
        maxTokens: DECODE,
        temperature: 0,
        stopTokenIds: [],
      })) {
        if (e.type !== 'token') continue;
        if (n++ === 0) first = performance.now();
      }
      const end = performance.now();
      if (r === 0) continue; // warm-up
      prefill.push(PROMPT / ((first - t0) / 1000));
      decode.push((n - 1) / ((end - first) / 1000));
    }
    // 8 concurrent decodes after their prompts: aggregate tokens/s over the decode phase.
    const concurrent = async (k: number) => {
      const t0 = performance.now();
      const counts = await Promise.all(
        Array.from({ length: k }, async (_, i) => {
          let n = 0;
          for await (const e of engine.generate(promptIds(16, i), {
            maxTokens: DECODE,
            temperature: 1,
            seed: i,
            stopTokenIds: [],
          }))
            if (e.type === 'token') n++;
          return n;
        }),
      );
      return counts.reduce((a, b) => a + b, 0) / ((performance.now() - t0) / 1000);
    };
    const c1 = await concurrent(1);
    const c8 = await concurrent(8);
    return {
      prefill: median(prefill),
      decode: median(decode),
      concurrent1: c1,
      concurrent8: c8,
      kernels: engine.info.kernels,
    };
  } finally {
    await engine.close();
  }
}

/** llama.cpp's greedy decode tok/s on the Q8_0 GGUF of the same model, same prompts and lengths (median after a warm-up). */
async function measureLlamaQ8(preset: string, dir: string, reps: number): Promise<number | string> {
  const mod = await importNodeLlamaCpp();
  if (typeof mod === 'string') return mod;
  const llama = await openLlama(mod, THREADS);
  try {
    const runner = await LlamaRunner.open(llama, cachedGguf(preset, dir, 'Q8_0'), THREADS, PROMPT + DECODE + 64);
    try {
      const decode: number[] = [];
      for (let r = 0; r <= reps; r++) {
        const run = await runner.run(promptIds(PROMPT, r), DECODE);
        if (r > 0) decode.push(run.decodeTokPerS);
      }
      return median(decode);
    } finally {
      await runner.close();
    }
  } catch (e) {
    return (e as Error).message;
  } finally {
    await llama.dispose();
  }
}

function measureTorch(dir: string) {
  const run = spawnSync(PYTHON, [join(ROOT, 'bench', 'torch_engine.py')], {
    input: JSON.stringify({ model: dir, threads: THREADS, promptLen: PROMPT, decodeTokens: DECODE }),
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`torch benchmark failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as { prefillTokPerS: number; decodeTokPerS: number; peakRssMB: number };
}

async function main() {
  const which = process.argv.slice(2);
  const presets = (which.length ? which : ['tiny', 'qwen3-0.6b']) as BenchPreset[];
  for (const preset of presets) {
    const dir = benchModel(preset);
    const reps = preset === 'tiny' ? 5 : 2;
    // Alternate engine and torch so both see the same machine conditions.
    const ours = await measureEngine(dir, reps);
    const torch = measureTorch(dir);
    const rssMB = process.resourceUsage().maxRSS / 1024;
    console.log(
      `\n== ${preset} (qwen3 family, ${THREADS} threads, prompt ${PROMPT}, decode ${DECODE}, kernels ${ours.kernels}) ==`,
    );
    console.log(
      `prefill tok/s   engine ${ours.prefill.toFixed(1).padStart(9)}   torch ${torch.prefillTokPerS.toFixed(1).padStart(9)}   ratio ${(ours.prefill / torch.prefillTokPerS).toFixed(2)}x`,
    );
    console.log(
      `decode  tok/s   engine ${ours.decode.toFixed(1).padStart(9)}   torch ${torch.decodeTokPerS.toFixed(1).padStart(9)}   ratio ${(ours.decode / torch.decodeTokPerS).toFixed(2)}x`,
    );
    console.log(
      `concurrent decode (aggregate tok/s, incl. 16-token prompts): 1 stream ${ours.concurrent1.toFixed(1)}, 8 streams ${ours.concurrent8.toFixed(1)} (${(ours.concurrent8 / ours.concurrent1).toFixed(2)}x)`,
    );
    const llama = await measureLlamaQ8(preset, dir, reps);
    if (typeof llama === 'string') console.log(`decode vs llama.cpp Q8_0: not measured: ${llama}`);
    else
      console.log(
        `decode vs llama.cpp Q8_0 (node-llama-cpp, same model as GGUF, measured now): engine ${ours.decode.toFixed(1)} tok/s, llama.cpp ${llama.toFixed(1)} tok/s, ratio ${(ours.decode / llama).toFixed(2)}x (target >= 1.0x; bench:decode-vs-llama alternates runs and checks tokens)`,
      );
    console.log(`peak RSS so far: engine process ${rssMB.toFixed(0)} MB, torch ${torch.peakRssMB.toFixed(0)} MB`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
