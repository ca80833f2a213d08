// A long step with layers recomputed: each layer's attention output and lse kept (the backward's
// recomputation skips the attention) against the attention recomputed too. Two learners in one
// process, on the same weights and sample, alternating (ABBA), each with the step budget that gives
// it its layout (train/memory.ts): layers recomputed and the LM head chunked in both, so the
// attention is the only difference. Prints each round's times and the median of the paired ratios.
//
//   npm run bench:train-kept-attention                                  # qwen3-0.6b, 2,048 tokens
//   BENCH_SEQ=16384 BENCH_ROUNDS=1 BENCH_PACK=0 npm run bench:train-kept-attention
//
// Knobs: BENCH_SEQ (2048; half of it completion), BENCH_ROUNDS (4), BENCH_THREADS (2), BENCH_PACK (1:
// both learners keep packed frozen weights; 0 for none, half the memory of two learners).

import { loadKernels } from '../src/engine/local/kernels/index.js';
import { spinIdleThreadsWhileTraining } from '../src/engine/local/kernels/native.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { DEFAULT_LEARNER, LearnerCore } from '../src/engine/local/train/learner.js';
import { LORA_TARGETS } from '../src/engine/local/train/lora.js';
import { HEAD_CHUNK_ROWS, trainStepBytes } from '../src/engine/local/train/memory.js';
import { printMachine } from './machine.js';
import { benchModel, type BenchPreset } from './models.js';
import { randomSample, stepSeconds } from './train-steps.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const SEQ = Number(process.env.BENCH_SEQ ?? 2048);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const PACK = process.env.BENCH_PACK !== '0';
const RANK = 16;

spinIdleThreadsWhileTraining();
const preset = (process.argv[2] ?? 'qwen3-0.6b') as BenchPreset;
printMachine(THREADS);
const dir = benchModel(preset);
const { config: cfg } = readModelFolder(dir);
const kernels = loadKernels();
kernels.setThreads(THREADS);
if (!(kernels.name === 'native' && kernels.info.bf16Instructions)) {
  throw new Error(
    'this bench compares bf16 learners: it needs the native kernels on a processor with bf16 instructions',
  );
}
const weights = loadWeights(dir, cfg);

// The step's bytes with the attention kept, as TrainModel sizes it: a budget of exactly that keeps
// it, one byte less recomputes it (the next layout that fits).
const size = {
  tokens: SEQ,
  completionTokens: SEQ / 2,
  loraRank: RANK,
  loraTargets: LORA_TARGETS.length,
  longestSequence: SEQ,
  attentionThreads: THREADS,
  bf16: true,
  checkpoint: true,
  headChunkRows: HEAD_CHUNK_ROWS,
};
const kept = trainStepBytes(cfg, { ...size, keepAttention: true }),
  recomputed = trainStepBytes(cfg, { ...size, keepAttention: false });
const learnerWith = (activationBudgetBytes: number) =>
  new LearnerCore(
    cfg,
    weights,
    {
      ...DEFAULT_LEARNER,
      mode: { kind: 'lora', spec: { rank: RANK, alpha: 2 * RANK, targets: [...LORA_TARGETS] } },
      microBatchTokens: SEQ,
      precision: 'bf16',
      packFrozenWeights: PACK,
      activationBudgetBytes,
    },
    kernels,
  );
const recomputing = learnerWith(kept - 1),
  keeping = learnerWith(kept);

const sample = randomSample(createRng(SEQ), cfg.vocabSize, SEQ);
const step = (learner: LearnerCore): number => stepSeconds(learner, sample);

const MiB = 2 ** 20;
console.log(
  `== ${preset}, LoRA r${RANK}, bf16, ${SEQ} tokens (half completion), layers recomputed, head chunked, ` +
    `packed frozen weights: ${PACK ? 'yes' : 'no'}; step buffers ${(recomputed / MiB).toFixed(0)} MiB with ` +
    `the attention recomputed, ${(kept / MiB).toFixed(0)} MiB kept ==`,
);
console.log(`first steps: attention recomputed ${step(recomputing).toFixed(2)} s, kept ${step(keeping).toFixed(2)} s`);
const ratios: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  // Which learner goes first alternates, so that a drift in the machine's speed cancels.
  let recomputedSeconds: number, keptSeconds: number;
  if (r % 2) {
    recomputedSeconds = step(recomputing);
    keptSeconds = step(keeping);
  } else {
    keptSeconds = step(keeping);
    recomputedSeconds = step(recomputing);
  }
  ratios.push(recomputedSeconds / keptSeconds);
  console.log(
    `round ${r}: attention recomputed ${recomputedSeconds.toFixed(2)} s, kept ${keptSeconds.toFixed(2)} s: ${(recomputedSeconds / keptSeconds).toFixed(3)}x`,
  );
}
const sorted = [...ratios].sort((x, y) => x - y),
  mid = sorted.length >> 1;
const median = sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
console.log(`kept against recomputed: median of ${ROUNDS} paired ratios ${median.toFixed(3)}x`);
