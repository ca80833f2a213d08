// Long context, as OpenClaw's default prompt makes it (a ~17k-token prompt on every turn):
//
// (a) time to first token of turns 1-5 of a growing session, prefix cache on vs off: runs
//     bench/prefix-cache.ts (16k-token first prompt, ~300 new tokens per turn);
// (b) a training step (forward, backward, optimizer; after a first one, also shown) at 2k, 8k and
//     16k tokens, LoRA r16 and full fine-tuning, each in its own child process: wall time and peak
//     RSS of the whole process (weights, learner, step), next to PyTorch's (bench/torch_train.py: same model, loss and
//     optimizer; under bf16 autocast where ours trains at bf16) at the same length, in the same run.
//     Half of each sample is completion, as in bench:train. Bytes per token: the peak's growth from
//     the shortest length, per token. The engine runs at serve's precision (BENCH_PRECISION, default
//     auto: int8 serving and a bf16 learner on a processor with bf16 and VNNI instructions) with
//     serve's memory plan for the length (step budget, packed frozen weights where they fit), its
//     default prefix cache's share of the machine included (the engine here opens none: only the
//     learner runs).
//
//   npm run bench:long-context                          # tiny and small, (a) and (b)
//   npm run bench:long-context -- qwen3-0.6b            # one preset
//   BENCH_PARTS=train BENCH_LENGTHS=2048,16384 BENCH_MODES=lora npm run bench:long-context -- qwen3-0.6b
//
// PyTorch (Debian's 1.13, no fused attention on the CPU) keeps every layer's T x T scores for its
// backward; a length whose scores would take more than half of this machine's memory is not run
// for it (it would be killed, or take the machine down), and says so.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalEngine } from '../src/engine/local/engine.js';
import { LocalLearner } from '../src/engine/local/learner.js';
import { memoryPlan, packableOn, trainableValuesOf } from '../src/engine/local/memory-plan.js';
import { parsePrecision, trainPrecisionOf, type TrainPrecision } from '../src/engine/local/precision.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import type { LearnerConfig } from '../src/engine/local/train/learner.js';
import type { LoraSpec } from '../src/engine/local/train/lora.js';
import type { TrainingSample } from '../src/engine/types.js';
import { DEFAULT_PPO } from '../src/learn/ppo.js';
import { benchModel, PYTHON, ROOT, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const LENGTHS = (process.env.BENCH_LENGTHS ?? '2048,8192,16384').split(',').map(Number);
const MODES = (process.env.BENCH_MODES ?? 'lora,full').split(',');
const PARTS = (process.env.BENCH_PARTS ?? 'ttft,train').split(',');
const PRECISION = parsePrecision(process.env.BENCH_PRECISION ?? 'auto');
const LORA: LoraSpec = { rank: 16, alpha: 32, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] };
const MiB = 2 ** 20;
/** The bench models' context: the longest length asked for, at least 32k. */
const LONGEST = Math.max(32_768, ...LENGTHS);

interface Case {
  preset: BenchPreset;
  tokens: number;
  lora: boolean;
}
interface Result {
  seconds: number;
  peakBytes: number;
}
interface ChildResult extends Result {
  /** The first step, which also allocates (and page-faults in) the step's buffers. */
  firstSeconds: number;
  /** The learner's precision, and whether it kept packed copies of the frozen weights. */
  precision: TrainPrecision;
  packed: boolean;
}

function peakRssBytes(): number {
  const line = readFileSync('/proc/self/status', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmHWM:'));
  if (!line) throw new Error('no VmHWM in /proc/self/status (Linux only)');
  return Number(line.split(/\s+/)[1]) * 1024;
}

/** In the child: the engine and its learner as serve runs them, one step on one sample. */
async function child(c: Case): Promise<ChildResult> {
  const engine = await LocalEngine.open(benchModel(c.preset, LONGEST), {
    threads: THREADS,
    kvCacheBytes: 0,
    precision: PRECISION,
  });
  const { info } = engine;
  const mode: LearnerConfig['mode'] = c.lora ? { kind: 'lora', spec: LORA } : { kind: 'full' };
  // The step's budget and packed weights as serve plans them for a longest sample of this length,
  // beside serve's default prefix cache.
  const plan = memoryPlan({
    cfg: engine.folder.config,
    totalBytes: totalmem(),
    parameters: info.parameters,
    loraRank: c.lora ? LORA.rank : 0,
    trainableValues: trainableValuesOf(engine.folder.config, info.parameters, c.lora ? LORA.rank : 0),
    precision: info.precision,
    packable: packableOn(info.kernelInfo),
    maxTrainTokens: c.tokens,
  });
  const precision = trainPrecisionOf(info.precision);
  const packed = plan.packedWeightsBytes > 0;
  const learner = await LocalLearner.open(engine, {
    threads: THREADS,
    yieldToServing: false,
    config: {
      mode,
      microBatchTokens: c.tokens,
      activationBudgetBytes: plan.activationBudgetBytes,
      packFrozenWeights: packed,
    },
  });
  try {
    const V = engine.folder.config.vocabSize;
    const rng = createRng(c.tokens);
    const ids = Array.from({ length: c.tokens }, () => Math.floor(rng.next() * V));
    const half = c.tokens / 2;
    const sample: TrainingSample = {
      promptIds: ids.slice(0, half),
      completionIds: ids.slice(half),
      advantages: ids.slice(half).map(() => rng.next() - 0.5),
    };
    const step = async () => {
      const t0 = performance.now();
      await learner.forwardBackward([sample], DEFAULT_PPO.loss);
      await learner.optimStep();
      return (performance.now() - t0) / 1000;
    };
    // As PyTorch's is timed: after a first step that allocates the step's buffers.
    const firstSeconds = await step();
    return { seconds: await step(), firstSeconds, peakBytes: peakRssBytes(), precision, packed };
  } finally {
    await learner.close();
    await engine.close();
  }
}

function runChild(c: Case): ChildResult {
  const self = fileURLToPath(import.meta.url);
  const run = spawnSync(process.execPath, [self, '--child', JSON.stringify(c)], {
    encoding: 'utf8',
    maxBuffer: 16 * MiB,
  });
  if (run.status !== 0) throw new Error(`child ${JSON.stringify(c)} failed: ${run.stderr.slice(-2000)}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1)!) as ChildResult;
}

/**
 * PyTorch's step, or why it was not run: every layer keeps three T x T tensors per head for its
 * backward (scores, masked scores, probabilities), and the backward makes two more at a time
 * (tiny at 8k tokens: this estimate says 8.0 GB, the measured peak was 10.0 GB).
 */
function runTorch(c: Case, shape: { heads: number; layers: number }, precision: TrainPrecision): Result | string {
  const scoresBytes = (3 * shape.layers + 2) * shape.heads * c.tokens * c.tokens * 4;
  if (1.25 * scoresBytes > totalmem() / 2)
    return `not run: its T x T scores would take ${(scoresBytes / 2 ** 30).toFixed(0)} GB`;
  const run = spawnSync(PYTHON, [join(ROOT, 'bench', 'torch_train.py')], {
    input: JSON.stringify({
      model: benchModel(c.preset, LONGEST),
      threads: THREADS,
      seqLen: c.tokens,
      steps: 1,
      lora: c.lora ? { rank: LORA.rank, alpha: LORA.alpha } : null,
      autocast: precision === 'bf16' ? 'bf16' : null,
    }),
    encoding: 'utf8',
    maxBuffer: 16 * MiB,
  });
  if (run.status !== 0) return `failed: ${run.stderr.trim().split('\n').slice(-2).join(' ')}`;
  const r = JSON.parse(run.stdout) as { stepSeconds: number; peakRssMB: number };
  return { seconds: r.stepSeconds, peakBytes: r.peakRssMB * MiB };
}

function trainPart(preset: BenchPreset): void {
  const config = JSON.parse(readFileSync(join(benchModel(preset, LONGEST), 'config.json'), 'utf8')) as {
    num_attention_heads: number;
    num_hidden_layers: number;
  };
  const shape = { heads: config.num_attention_heads, layers: config.num_hidden_layers };
  for (const mode of MODES) {
    const lora = mode === 'lora';
    console.log(
      `\n== ${preset}, ${lora ? `LoRA r${LORA.rank}` : 'full fine-tuning'}: a training step after one, half of the sample completion, ${THREADS} threads ==`,
    );
    console.log(
      'tokens   learner       first s   engine s   engine peak   bytes/token   torch s   torch peak    time ratio',
    );
    let first: { tokens: number; peak: number } | null = null;
    for (const tokens of LENGTHS) {
      const ours = runChild({ preset, tokens, lora });
      first ??= { tokens, peak: ours.peakBytes };
      const perToken =
        tokens > first.tokens ? ((ours.peakBytes - first.peak) / (tokens - first.tokens)).toFixed(0) : '-';
      const torch = runTorch({ preset, tokens, lora }, shape, ours.precision);
      const t = typeof torch === 'string' ? null : torch;
      console.log(
        `${String(tokens).padStart(6)}   ${`${ours.precision}${ours.packed ? ', packed' : ''}`.padEnd(12)}${ours.firstSeconds.toFixed(2).padStart(7)}   ${ours.seconds.toFixed(2).padStart(8)}   ${(ours.peakBytes / MiB).toFixed(0).padStart(8)} MB` +
          `   ${perToken.padStart(11)}   ${t ? t.seconds.toFixed(2).padStart(7) : '      -'}   ${t ? `${(t.peakBytes / MiB).toFixed(0).padStart(7)} MB` : '         -'}` +
          `   ${t ? `${(t.seconds / ours.seconds).toFixed(2)}x` : typeof torch === 'string' ? torch : ''}`,
      );
    }
  }
}

async function main(): Promise<void> {
  if (process.argv[2] === '--child') {
    console.log(JSON.stringify(await child(JSON.parse(process.argv[3]!) as Case)));
    return;
  }
  const presets = (process.argv.slice(2).length ? process.argv.slice(2) : ['tiny', 'small']) as BenchPreset[];
  if (PARTS.includes('ttft')) {
    console.log(`== (a) time to first token of a growing session, prefix cache on vs off (bench/prefix-cache.ts) ==`);
    const run = spawnSync(process.execPath, [join(ROOT, 'dist', 'bench', 'prefix-cache.js'), ...presets], {
      stdio: 'inherit',
      env: process.env,
    });
    if (run.status !== 0) throw new Error('bench/prefix-cache failed');
  }
  if (PARTS.includes('train')) {
    console.log('\n== (b) training step at long lengths ==');
    for (const preset of presets) trainPart(preset);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
