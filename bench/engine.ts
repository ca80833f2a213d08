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
import { benchModel, PYTHON, ROOT, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const PROMPT = 128;
const DECODE = 32;


const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const promptIds = (n: number, salt: number) => Array.from({ length: n }, (_, i) => (i * 31 + salt * 17) % 400 + 10);

async function measureEngine(dir: string, reps: number) {
  const engine = await LocalEngine.open(dir, { threads: THREADS, maxStepTokens: 512 });
  try {
    const prefill: number[] = [], decode: number[] = [];
    for (let r = 0; r <= reps; r++) {
      const t0 = performance.now();
      let first = 0, n = 0;
      for await (const e of engine.generate(promptIds(PROMPT, r), { maxTokens: DECODE, temperature: 0, stopTokenIds: [] })) {
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
      const counts = await Promise.all(Array.from({ length: k }, async (_, i) => {
        let n = 0;
        for await (const e of engine.generate(promptIds(16, i), { maxTokens: DECODE, temperature: 1, seed: i, stopTokenIds: [] })) if (e.type === 'token') n++;
        return n;
      }));
      return counts.reduce((a, b) => a + b, 0) / ((performance.now() - t0) / 1000);
    };
    const c1 = await concurrent(1);
    const c8 = await concurrent(8);
    return { prefill: median(prefill), decode: median(decode), concurrent1: c1, concurrent8: c8, kernels: engine.info.kernels };
  } finally {
    await engine.close();
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
    console.log(`\n== ${preset} (qwen3 family, ${THREADS} threads, prompt ${PROMPT}, decode ${DECODE}, kernels ${ours.kernels}) ==`);
    console.log(`prefill tok/s   engine ${ours.prefill.toFixed(1).padStart(9)}   torch ${torch.prefillTokPerS.toFixed(1).padStart(9)}   ratio ${(ours.prefill / torch.prefillTokPerS).toFixed(2)}x`);
    console.log(`decode  tok/s   engine ${ours.decode.toFixed(1).padStart(9)}   torch ${torch.decodeTokPerS.toFixed(1).padStart(9)}   ratio ${(ours.decode / torch.decodeTokPerS).toFixed(2)}x`);
    console.log(`concurrent decode (aggregate tok/s, incl. 16-token prompts): 1 stream ${ours.concurrent1.toFixed(1)}, 8 streams ${ours.concurrent8.toFixed(1)} (${(ours.concurrent8 / ours.concurrent1).toFixed(2)}x)`);
    if (preset === 'qwen3-0.6b') console.log(`decode vs llama.cpp Q8_0 measured 20-27 tok/s: ${(ours.decode / 20).toFixed(2)}x - ${(ours.decode / 27).toFixed(2)}x`);
    console.log(`peak RSS so far: engine process ${rssMB.toFixed(0)} MB, torch ${torch.peakRssMB.toFixed(0)} MB`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
