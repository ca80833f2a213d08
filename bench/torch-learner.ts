// The PyTorch learner against the embedded TypeScript learner on this CPU, same batch, same
// config, in one run: tiny and Qwen3-0.6B shapes, LoRA (and full fine-tuning on tiny), PyTorch on
// 1 and 2 ranks (gloo, threads split between them). Reports train tokens/s per batch (the PPO
// anchor pass included, as serve runs it) and checks that the first batch's losses agree.
//
//   npm run bench:torch-learner                      # tiny and qwen3-0.6b
//   npm run bench:torch-learner -- tiny              # one shape
//   BENCH_MODES=lora,full BENCH_BATCHES=3 npm run bench:torch-learner -- qwen3-0.6b

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalEngine } from '../src/engine/local/engine.js';
import { LocalLearner } from '../src/engine/local/learner.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { DEFAULT_LEARNER, type LearnerConfig } from '../src/engine/local/train/learner.js';
import { LORA_TARGETS } from '../src/engine/local/train/lora.js';
import { DEFAULT_LAUNCH } from '../src/engine/torch/launcher.js';
import { TorchLearner } from '../src/engine/torch/learner.js';
import type { StepMetrics, TrainingSample } from '../src/engine/types.js';
import { DEFAULT_PPO, trainBatch } from '../src/learn/ppo.js';
import { benchModel, PYTHON, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const BATCHES = Number(process.env.BENCH_BATCHES ?? 2);
const SAMPLES = 4,
  PROMPT = 128,
  COMPLETION = 128;

const PPO = { ...DEFAULT_PPO, miniBatchSize: SAMPLES, epochs: 1 };

function config(lora: boolean): LearnerConfig {
  return {
    ...DEFAULT_LEARNER,
    mode: lora ? { kind: 'lora', spec: { rank: 16, alpha: 32, targets: [...LORA_TARGETS] } } : { kind: 'full' },
    optimizer: { ...DEFAULT_LEARNER.optimizer, lr: 1e-5 },
    microBatchTokens: 2 * (PROMPT + COMPLETION),
  };
}

function batch(vocab: number): TrainingSample[] {
  const rng = createRng(1);
  const ids = (n: number) => Array.from({ length: n }, () => Math.floor(rng.next() * vocab));
  return Array.from({ length: SAMPLES }, (_, i) => ({
    promptIds: ids(PROMPT),
    completionIds: ids(COMPLETION),
    advantages: Array(COMPLETION).fill(i % 2 ? 1 : -1),
    rolloutLogprobs: Array.from({ length: COMPLETION }, () => -Math.log(vocab) + (rng.next() - 0.5)),
  }));
}

interface Run {
  tokPerS: number;
  seconds: number;
  first: StepMetrics[];
}

/** One warm-up batch, then BATCHES timed ones (median). */
async function timed(train: (s: TrainingSample[]) => Promise<StepMetrics[]>, samples: TrainingSample[]): Promise<Run> {
  const first = await train(samples);
  const times: number[] = [];
  for (let b = 0; b < BATCHES; b++) {
    const t0 = performance.now();
    await train(samples);
    times.push((performance.now() - t0) / 1000);
  }
  const seconds = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
  return { tokPerS: (SAMPLES * (PROMPT + COMPLETION)) / seconds, seconds, first };
}

async function typescript(dir: string, lora: boolean): Promise<Run> {
  const engine = await LocalEngine.open(dir, { threads: THREADS });
  const learner = await LocalLearner.open(engine, { threads: THREADS, config: config(lora), yieldToServing: false });
  try {
    return await timed((s) => trainBatch(learner, s, PPO), batch(engine.folder.config.vocabSize));
  } finally {
    await learner.close();
    await engine.close();
  }
}

async function torch(dir: string, lora: boolean, nproc: number, vocab: number): Promise<Run> {
  const work = mkdtempSync(join(tmpdir(), 'bench-torch-'));
  // The same cores, split between the ranks.
  process.env.OMP_NUM_THREADS = String(Math.max(1, Math.floor(THREADS / nproc)));
  const learner = await TorchLearner.open({
    launch: { ...DEFAULT_LAUNCH, python: PYTHON, nproc },
    config: config(lora),
    modelDir: dir,
    checkpointDir: join(work, 'checkpoints'),
    versionsDir: join(work, 'versions'),
    versionAfter: 0,
  });
  try {
    return await timed((s) => trainBatch(learner, s, PPO), batch(vocab));
  } finally {
    await learner.close();
    rmSync(work, { recursive: true, force: true });
  }
}

async function main() {
  const which = process.argv.slice(2);
  const presets = (which.length ? which : ['tiny', 'qwen3-0.6b']) as BenchPreset[];
  console.log(
    `batch: ${SAMPLES} samples x (${PROMPT} prompt + ${COMPLETION} completion) tokens, one mini-batch, ${THREADS} threads` +
      ` in all; median of ${BATCHES} batches after a warm-up`,
  );
  for (const preset of presets) {
    const dir = benchModel(preset);
    const modes = (process.env.BENCH_MODES ?? (preset === 'tiny' ? 'lora,full' : 'lora')).split(',');
    for (const mode of modes) {
      const lora = mode === 'lora';
      const ts = await typescript(dir, lora);
      const vocab = readModelFolder(dir).config.vocabSize;
      console.log(`\n== ${preset}, ${lora ? 'LoRA r16 (all projections)' : 'full fine-tuning'} ==`);
      console.log(
        `TypeScript learner       ${ts.tokPerS.toFixed(1).padStart(9)} tok/s  ${ts.seconds.toFixed(2)} s/batch`,
      );
      for (const nproc of [1, 2]) {
        const t = await torch(dir, lora, nproc, vocab);
        const dLoss = Math.abs(t.first[0]!.loss - ts.first[0]!.loss);
        const ranks = `${nproc} rank${nproc > 1 ? 's' : ' '}`;
        console.log(
          `PyTorch, ${ranks}        ${t.tokPerS.toFixed(1).padStart(9)} tok/s  ${t.seconds.toFixed(2)} s/batch` +
            `  (${(t.tokPerS / ts.tokPerS).toFixed(2)}x TypeScript; first-batch loss differs by ${dLoss.toExponential(2)})`,
        );
      }
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
