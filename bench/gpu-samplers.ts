// llama.cpp on a GPU through our LlamaCppSampler (run by scripts/gpu-check-samplers.sh): at the
// Qwen3-0.6B and 1.7B shapes (random weights, as the other benchmarks), F16 and Q8_0, it reports
// prefill and decode tokens/s (1 and 8 streams), checks the GPU's log-probs of its own samples
// against the embedded engine's fp32 (0.6B only: the CPU scoring of 1.7B takes too long), and
// times one LoRA publication: a random PEFT adapter written as a PolicyVersion, loaded with
// `use`, and a request served on it whose log-probs must differ from the base's.
// Prints one JSON line per case; exits 1 when a check fails or no GPU backend loads (with --gpu auto).
//
//   node dist/bench/gpu-samplers.js [--shapes qwen3-0.6b,qwen3-1.7b] [--gpu auto|off] [--threads N]

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LocalEngine } from '../src/engine/local/engine.js';
import { type ModelShape, PRESETS, writeModelFolder } from '../src/engine/local/model/init.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { policyVersionAt, writePolicyVersion } from '../src/engine/local/policy-versions.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { Lora } from '../src/engine/local/train/lora.js';
import { LlamaCppSampler } from '../src/engine/llama-cpp/sampler.js';
import { LLAMA_PREFIX } from './llama-cpp.js';
import { ROOT } from './models.js';
import { measureThroughput, promptOf } from './sampler-throughput.js';

const SHAPES: Record<string, Omit<ModelShape, 'family'>> = {
  tiny: PRESETS.tiny!,
  'qwen3-0.6b': PRESETS['qwen3-0.6b']!,
  'qwen3-1.7b': { ...PRESETS['qwen3-0.6b']!, hiddenSize: 2048, intermediateSize: 6144 },
};
/** Largest |fp32 - llama.cpp| log-prob allowed at the 99th percentile of sampled tokens (F16). */
const F16_P99_BOUND = 0.05;

function modelOf(shape: string): string {
  const dir = join(ROOT, '.cache', 'bench-models', shape);
  if (!existsSync(join(dir, 'config.json'))) {
    const big = shape !== 'tiny';
    writeModelFolder({
      out: dir,
      shape: { family: 'qwen3', ...SHAPES[shape]! },
      seed: 0,
      dtype: big ? 'BF16' : 'F32',
      shards: 1,
      tokenizerVocab: 4096,
      initStd: 0.02,
    });
  }
  return dir;
}

const emit = (row: Record<string, unknown>) => console.log(JSON.stringify(row));
const stage = (what: string) => console.error(`gpu-samplers: ${what}`);

async function loraPublication(sampler: LlamaCppSampler, dir: string, vocab: number): Promise<Record<string, unknown>> {
  const { config } = readModelFolder(dir);
  const lora = new Lora(config, { rank: 16, alpha: 32, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] });
  lora.initialise(7);
  const rng = createRng(8);
  for (const t of lora.tensors)
    if (t.part === 'B')
      lora.view(t).forEach((_, i, v) => {
        v[i] = (rng.next() - 0.5) * 0.05;
      });
  const versionsDir = join(dir, 'gpu-check-versions');
  const written = writePolicyVersion(
    versionsDir,
    { version: 1, kind: 'lora', spec: lora.spec, data: lora.data },
    {
      modelDir: dir,
      config,
    },
  );
  const prompt = promptOf(64, 9, vocab);
  const before = await sampler.logprobs(prompt, promptOf(16, 10, vocab));
  const t0 = performance.now();
  const switchMs = await sampler.use(policyVersionAt(written.path!));
  const useMs = performance.now() - t0;
  let version = -1;
  for await (const e of sampler.generate(prompt, { maxTokens: 16, seed: 1 }))
    if (e.type === 'finish') version = e.version;
  const after = await sampler.logprobs(prompt, promptOf(16, 10, vocab), { version: 1 });
  const moved = Math.max(...after.logprobs.map((x, i) => Math.abs(x - before.logprobs[i]!)));
  return { useMs, switchMs, servedVersion: version, maxLogprobChange: moved, ok: version === 1 && moved > 1e-3 };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      shapes: { type: 'string', default: 'qwen3-0.6b,qwen3-1.7b' },
      gpu: { type: 'string', default: 'auto' },
      threads: { type: 'string' },
    },
  });
  const gpu = values.gpu === 'off' ? 'off' : 'auto';
  let failed = false;
  for (const shape of values.shapes!.split(',')) {
    if (!SHAPES[shape]) throw new Error(`unknown shape ${shape}: tiny, qwen3-0.6b or qwen3-1.7b`);
    const dir = modelOf(shape);
    const vocab = Math.min(SHAPES[shape]!.vocabSize, 4096);
    for (const type of ['F16', 'Q8_0'] as const) {
      stage(`${shape} ${type}: loading`);
      const sampler = await LlamaCppSampler.open({
        modelDir: dir,
        ggufType: type,
        gpu,
        ...(values.threads ? { threads: Number(values.threads) } : {}),
        contextSize: Math.min(4096, SHAPES[shape]!.maxPositionEmbeddings),
        sequences: 8,
        nodeLlamaCppFallback: LLAMA_PREFIX,
      });
      try {
        if (gpu === 'auto' && sampler.gpu === false) {
          emit({ shape, type, error: 'no GPU backend loaded: install one with npm run setup:llama-cpp -- --gpu cuda' });
          failed = true;
          continue;
        }
        const prefillTokens = Math.min(2048, SHAPES[shape]!.maxPositionEmbeddings / 2);
        const shapeOf = { prefillTokens, decodePrompt: 128, decodeTokens: 128, streams: 8, vocab };
        stage(`${shape} ${type}: throughput`);
        await measureThroughput(sampler, shapeOf, 0);
        const t = await measureThroughput(sampler, shapeOf, 1);
        const row: Record<string, unknown> = { shape, type, gpu: sampler.gpu, ...t };
        if (shape !== 'qwen3-1.7b' && type === 'F16') {
          stage(`${shape} ${type}: log-probs against fp32`);
          const prompt = promptOf(128, 11, vocab);
          const ids: number[] = [];
          const served: number[] = [];
          for await (const e of sampler.generate(prompt, { maxTokens: 64, seed: 3, stopTokenIds: [] }))
            if (e.type === 'token') {
              ids.push(e.token.id);
              served.push(e.token.logprob);
            }
          const engine = await LocalEngine.open(dir, { precision: 'fp32', kvCacheBytes: 0 });
          const ref = await engine.logprobs(prompt, ids).finally(() => engine.close());
          const deltas = ref.logprobs.map((x, i) => Math.abs(x - served[i]!)).sort((a, b) => a - b);
          const p99 = deltas[Math.min(deltas.length - 1, Math.floor(0.99 * deltas.length))]!;
          row.logprobVsFp32 = { p50: deltas[Math.floor(deltas.length / 2)], p99, bound: F16_P99_BOUND };
          if (!(p99 <= F16_P99_BOUND)) failed = true;
        }
        if (type === 'F16') {
          stage(`${shape} ${type}: LoRA publication`);
          row.loraPublication = await loraPublication(sampler, dir, vocab);
          if (!(row.loraPublication as { ok: boolean }).ok) failed = true;
        }
        emit(row);
      } finally {
        await sampler.close();
      }
    }
  }
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
