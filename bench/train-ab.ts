// Training step time of two builds of this project in one process: this checkout's learner (B)
// against another checkout's (A, BENCH_BASE: a folder with its own `dist` and native build, e.g. a
// `git worktree` of an earlier commit), steps alternated (ABBA), so that both see the same machine.
// Each side loads its own native addon, so native changes compare too. Both train bf16 LoRA r16 on
// the same weights and sample. A step differs by a few percent from round to round on these
// machines: run it with BENCH_BASE set to this checkout itself (A/A) to see how far apart two equal
// builds come out.
//
//   BENCH_BASE=/tmp/base npm run bench:train-ab                     # qwen3-0.6b, 512 tokens
//   BENCH_BASE=/tmp/base BENCH_SEQ=2048 BENCH_ROUNDS=4 npm run bench:train-ab
//
// Knobs: BENCH_SEQ (512; half of it completion), BENCH_ROUNDS (10), BENCH_THREADS (2), BENCH_PACK (1:
// packed frozen weights on both sides, as serve and train take them where memory allows; 0: none).

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { spinIdleThreadsWhileTraining } from '../src/engine/local/kernels/native.js';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { DEFAULT_LEARNER, LearnerCore } from '../src/engine/local/train/learner.js';
import { LORA_TARGETS } from '../src/engine/local/train/lora.js';
import { median, printMachine } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';
import { randomSample, stepSeconds } from './train-steps.js';

const BASE = process.env.BENCH_BASE;
const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const SEQ = Number(process.env.BENCH_SEQ ?? 512);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const PACK = process.env.BENCH_PACK !== '0';
const RANK = 16;

interface Build {
  LearnerCore: typeof LearnerCore;
  kernels: Kernels;
}

/** The other checkout's learner and kernels, its addon loaded as its own code loads it. */
async function baseBuild(dir: string): Promise<Build> {
  const from = (path: string) => pathToFileURL(resolve(dir, 'dist/src/engine/local', path)).href;
  const native = (await import(from('kernels/native.js'))) as { spinIdleThreadsWhileTraining: () => void };
  native.spinIdleThreadsWhileTraining();
  const { loadKernels: loadBase } = (await import(from('kernels/index.js'))) as { loadKernels: () => Kernels };
  const learner = (await import(from('train/learner.js'))) as { LearnerCore: typeof LearnerCore };
  return { LearnerCore: learner.LearnerCore, kernels: loadBase() };
}

async function main() {
  if (!BASE) throw new Error('set BENCH_BASE to another checkout of this project, built (npm run build)');
  const preset = (process.argv[2] ?? 'qwen3-0.6b') as BenchPreset;
  spinIdleThreadsWhileTraining();
  const a = await baseBuild(BASE);
  const b: Build = { LearnerCore, kernels: loadKernels() };
  printMachine(THREADS);
  for (const { kernels } of [a, b]) {
    kernels.setThreads(THREADS);
    if (!(kernels.name === 'native' && kernels.info.bf16Instructions))
      throw new Error(
        'this bench compares bf16 learners: it needs the native kernels on a processor with bf16 instructions',
      );
  }
  const dir = benchModel(preset);
  const { config: cfg } = readModelFolder(dir);
  const weights = loadWeights(dir, cfg);
  const config = {
    ...DEFAULT_LEARNER,
    mode: { kind: 'lora' as const, spec: { rank: RANK, alpha: 2 * RANK, targets: [...LORA_TARGETS] } },
    microBatchTokens: SEQ,
    precision: 'bf16' as const,
    packFrozenWeights: PACK,
  };
  const learners = [a, b].map((side) => new side.LearnerCore(cfg, weights, config, side.kernels));
  const sample = randomSample(createRng(SEQ), cfg.vocabSize, SEQ);
  const step = (side: number): number => stepSeconds(learners[side]!, sample);
  console.log(
    `\n== ${preset}, LoRA r${RANK}, bf16, ${SEQ} tokens (half completion), packed frozen weights: ` +
      `${PACK ? 'yes' : 'no'}, ${THREADS} threads, ${ROUNDS} alternated rounds ==`,
  );
  console.log(`first steps: A ${step(0).toFixed(2)} s, B ${step(1).toFixed(2)} s`);
  const seconds: [number[], number[]] = [[], []];
  for (let r = 0; r < ROUNDS; r++) {
    // Which side goes first alternates, so that a drift in the machine's speed cancels.
    for (const side of r % 2 ? [0, 1] : [1, 0]) seconds[side]!.push(step(side));
    console.log(
      `round ${r}: A ${seconds[0].at(-1)!.toFixed(3)} s, B ${seconds[1].at(-1)!.toFixed(3)} s: ` +
        `${(seconds[0].at(-1)! / seconds[1].at(-1)!).toFixed(3)}x`,
    );
  }
  const paired = seconds[0].map((s, i) => s / seconds[1][i]!);
  console.log(`A ${BASE}: median ${median(seconds[0]).toFixed(3)} s/step`);
  console.log(`B this checkout: median ${median(seconds[1]).toFixed(3)} s/step`);
  console.log(`B's speed over A's: ${median(paired).toFixed(3)}x (median of the paired rounds)`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
