// Peak memory of one training step against trainStepBytes (src/engine/local/train/memory.ts).
// Each case runs in its own child process, so that no peak carries over: it loads the model,
// allocates what does not grow with the step (weights, gradient buffers, BLAS's work buffers),
// resets and reads VmHWM, runs one forward and backward of a sample whose last quarter is the completion,
// and reads VmHWM again. The growth is the step's memory; its slope per token between lengths
// is what a --max-train-tokens limit rests on. Layouts: the whole tape, layers recomputed with
// each layer's attention output kept (`kept`), or all recomputed (`layers`), each with every row's
// logits kept or the LM head chunked (`+head`).
//
//   npm run build && node dist/bench/train-memory.js                     # tiny, 2k to 16k tokens
//   node dist/bench/train-memory.js qwen3-0.6b 512 2048                  # LoRA r16 at these lengths
//   BENCH_MODES=full node dist/bench/train-memory.js tiny 4096 8192
//   BENCH_LAYOUTS=kept,layers+head node dist/bench/train-memory.js qwen3-0.6b 4096

import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { allocateParams, loadWeights } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { Lora } from '../src/engine/local/train/lora.js';
import { HEAD_CHUNK_ROWS, trainStepBytes } from '../src/engine/local/train/memory.js';
import { TrainModel } from '../src/engine/local/train/model.js';
import { benchModel, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const RANK = 16;
const MiB = 2 ** 20;

interface Case {
  preset: BenchPreset;
  tokens: number;
  lora: boolean;
  checkpoint: boolean;
  keepAttention: boolean;
  chunkedHead: boolean;
}
const LAYOUTS = ['tape', 'tape+head', 'kept', 'kept+head', 'layers', 'layers+head'] as const;
interface Measured {
  before: number;
  after: number;
  estimate: number;
  allocated: number;
  seconds: number;
}

/** Resets VmHWM to the current RSS (Linux), so that the model load's transient peak is not the step's. */
function resetPeakRss(): void {
  writeFileSync('/proc/self/clear_refs', '5');
}

function peakRssBytes(): number {
  const line = readFileSync('/proc/self/status', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'));
  if (!line) throw new Error('no VmHWM in /proc/self/status (Linux only)');
  return Number(line.split(/\s+/)[1]) * 1024;
}

function child(c: Case): Measured {
  const dir = benchModel(c.preset);
  const folder = readModelFolder(dir).config;
  // Lengths past the preset's context are fine for measuring memory.
  const cfg = { ...folder, maxPositionEmbeddings: Math.max(folder.maxPositionEmbeddings, c.tokens) };
  const base = loadWeights(dir, cfg);
  const k = loadKernels();
  k.setThreads(THREADS);
  // BLAS touches more of its work buffers as products grow; a large one of each layout first,
  // so that those pages (a constant) are not counted as the step's. With threads, OpenBLAS
  // touches more of them as M grows in a tall, narrow product (x W^T with M = tokens), up to
  // tens of MiB past M = 2^19: one of those too, its operands freed again.
  const n = 2048,
    warm = new Float32Array(n * n);
  for (const [ta, tb] of [
    [false, false],
    [true, false],
    [false, true],
  ] as const) {
    k.sgemm(ta, tb, n, n, n, 1, warm, n, warm, n, 0, warm, n);
  }
  const tall = 2 ** 19,
    narrow = 64;
  k.sgemm(
    false,
    true,
    tall,
    narrow,
    narrow,
    1,
    new Float32Array(tall * narrow),
    narrow,
    warm,
    narrow,
    0,
    new Float32Array(tall * narrow),
    narrow,
  );
  (globalThis as { gc?: () => void }).gc?.();
  let lora: Lora | null = null;
  let grads = null;
  if (c.lora) {
    lora = new Lora(cfg, { rank: RANK, alpha: 2 * RANK, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] });
    lora.initialise(0);
    lora.grads.fill(0);
  } else {
    grads = allocateParams(base.specs);
    grads.data.fill(0);
  }
  const { checkpoint, keepAttention, chunkedHead } = c;
  const model = new TrainModel(cfg, base, grads, lora, k, { checkpoint, keepAttention, chunkedHead });
  const rng = createRng(c.tokens);
  const tokens = Array.from({ length: c.tokens }, () => Math.floor(rng.next() * cfg.vocabSize));
  const completion = Math.ceil(c.tokens / 4);
  resetPeakRss();
  const before = peakRssBytes();
  const t0 = performance.now();
  const out = model.forward([{ tokens, promptLength: c.tokens - completion }]);
  model.backward(
    out.logprobs.map(() => rng.next() - 0.5),
    new Float32Array(completion),
  );
  const seconds = (performance.now() - t0) / 1000;
  const after = peakRssBytes();
  const estimate = trainStepBytes(cfg, {
    tokens: c.tokens,
    completionTokens: completion,
    loraRank: c.lora ? RANK : 0,
    checkpoint,
    keepAttention,
    ...(chunkedHead ? { headChunkRows: HEAD_CHUNK_ROWS } : {}),
  });
  return { before, after, estimate, allocated: model.bufferBytes, seconds };
}

function measure(c: Case): Measured {
  const script = fileURLToPath(import.meta.url);
  const args = ['--expose-gc', script, '--child', JSON.stringify(c)];
  const run = spawnSync(process.execPath, args, { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`child for ${JSON.stringify(c)} failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Measured;
}

function main(): void {
  const args = process.argv.slice(2);
  if (args[0] === '--child') {
    console.log(JSON.stringify(child(JSON.parse(args[1]!) as Case)));
    return;
  }
  const preset = (args[0] ?? 'tiny') as BenchPreset;
  const lengths = args.length > 1 ? args.slice(1).map(Number) : [2048, 4096, 8192, 16384];
  const modes = (process.env.BENCH_MODES ?? 'lora').split(',');
  const layouts = (process.env.BENCH_LAYOUTS ?? LAYOUTS.join(',')).split(',');
  for (const l of layouts) if (!(LAYOUTS as readonly string[]).includes(l)) throw new Error(`unknown layout ${l}`);
  console.log(`peak RSS growth of one forward + backward (last quarter completion), ${preset}, ${THREADS} threads`);
  console.log('mode        layout       tokens  estimate MiB  measured MiB  measured/estimate  step s  peak RSS MiB');
  for (const mode of modes) {
    for (const layout of layouts) {
      const keepAttention = layout.startsWith('kept'),
        checkpoint = keepAttention || layout.startsWith('layers'),
        chunkedHead = layout.endsWith('+head');
      const rows: Array<{ tokens: number; m: Measured }> = [];
      for (const tokens of lengths) {
        const m = measure({ preset, tokens, lora: mode === 'lora', checkpoint, keepAttention, chunkedHead });
        rows.push({ tokens, m });
        const growth = m.after - m.before;
        console.log(
          [
            (mode === 'lora' ? `LoRA r${RANK}` : 'full').padEnd(11),
            layout.padEnd(12),
            String(tokens).padStart(6),
            (m.estimate / MiB).toFixed(1).padStart(13),
            (growth / MiB).toFixed(1).padStart(13),
            (growth / m.estimate).toFixed(3).padStart(18),
            m.seconds.toFixed(2).padStart(7),
            (m.after / MiB).toFixed(0).padStart(13),
          ].join(' '),
        );
        if (m.allocated !== m.estimate) {
          console.log(`  (TrainModel holds ${m.allocated} bytes, the estimate says ${m.estimate})`);
        }
      }
      for (let i = 1; i < rows.length; i++) {
        const a = rows[i - 1]!,
          b = rows[i]!,
          dt = b.tokens - a.tokens;
        const est = (b.m.estimate - a.m.estimate) / dt;
        const got = (b.m.after - b.m.before - (a.m.after - a.m.before)) / dt;
        const kib = (x: number) => `${(x / 1024).toFixed(1)} KiB`;
        const ratio = (got / est).toFixed(3);
        console.log(`  per token ${a.tokens}->${b.tokens}: estimate ${kib(est)}, measured ${kib(got)} (${ratio}x)`);
      }
    }
  }
}

main();
