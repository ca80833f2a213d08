// Training steps on samples that get longer step by step, as a `serve` session's turns do: each
// length's first step against a step of the same length once the learner has seen it (the same
// process, the same learner), so the ratio is what a new length costs. The learner keeps its step
// buffers between steps (train/step-buffers.ts); this shows whether a slightly longer step reuses
// them or reallocates them.
//
//   npm run bench:train-growing                        # qwen3-0.6b, LoRA r16, bf16
//   BENCH_LENGTHS=400,401,402,410,450,520 npm run bench:train-growing -- tiny
//
// Knobs: BENCH_LENGTHS (400,401,402,403,410,430,460,500,520), BENCH_THREADS (2), BENCH_PRECISION (bf16).

import { totalmem } from 'node:os';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { spinIdleThreadsWhileTraining } from '../src/engine/local/kernels/native.js';
import { trainingAffordsPacking } from '../src/engine/local/memory-plan.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { DEFAULT_LEARNER, LearnerCore } from '../src/engine/local/train/learner.js';
import { printMachine } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';
import { randomSample, stepSeconds } from './train-steps.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const LENGTHS = (process.env.BENCH_LENGTHS ?? '400,401,402,403,410,430,460,500,520').split(',').map(Number);
const PRECISION = (process.env.BENCH_PRECISION ?? 'bf16') as 'fp32' | 'bf16';

spinIdleThreadsWhileTraining();

const preset = (process.argv[2] ?? 'qwen3-0.6b') as BenchPreset;
printMachine(THREADS);
const dir = benchModel(preset);
const { config: cfg } = readModelFolder(dir);
const kernels = loadKernels();
kernels.setThreads(THREADS);
const weights = loadWeights(dir, cfg);
const learner = new LearnerCore(
  cfg,
  weights,
  {
    ...DEFAULT_LEARNER,
    mode: { kind: 'lora', spec: { rank: 16, alpha: 32, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } },
    microBatchTokens: Math.max(...LENGTHS),
    precision: PRECISION,
    // As `train` decides it (and bench:train-vs-torch).
    packFrozenWeights:
      PRECISION === 'bf16' &&
      trainingAffordsPacking(cfg, weights.data.length, DEFAULT_LEARNER.activationBudgetBytes, totalmem()),
  },
  kernels,
);
const rng = createRng(1);
const step = (n: number): number =>
  stepSeconds(
    learner,
    randomSample(rng, cfg.vocabSize, n, () => 0.5),
  );

console.log(`\n== ${preset}, LoRA r16, ${PRECISION}, ${THREADS} threads: each length's first step, then again ==`);
step(LENGTHS[0]!); // warm-up: the first buffers, primitives and packed weights
const first = LENGTHS.map(step);
const again = LENGTHS.map(step);
console.log('tokens  first s  again s  first/again');
LENGTHS.forEach((n, i) =>
  console.log(
    `${String(n).padStart(6)}  ${first[i]!.toFixed(3).padStart(7)}  ${again[i]!.toFixed(3).padStart(7)}  ${(first[i]! / again[i]!).toFixed(2).padStart(10)}x`,
  ),
);
const total = (a: number[]) => a.reduce((s, x) => s + x, 0);
console.log(
  `all lengths: first ${total(first).toFixed(2)} s, again ${total(again).toFixed(2)} s, ratio ${(total(first) / total(again)).toFixed(2)}x`,
);
