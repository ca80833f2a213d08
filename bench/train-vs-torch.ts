// Training benchmark against PyTorch at its best on this CPU, in one run on the same model,
// sample, loss and optimizer (bench/torch_train.py): one step = forward/backward over one
// 512-token sequence (last half the completion) + AdamW, LoRA r16 on all projections and full
// fine-tuning, 2 threads on both sides. PyTorch configurations:
//   fp32        as this environment configures it (OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE set)
//   fp32-own    the two OpenBLAS variables removed for that command only: OpenBLAS picks its own
//               core (printed; Cooperlake on this EPYC)
//   bf16        torch.autocast('cpu', dtype=torch.bfloat16) (oneDNN bf16 matmuls), vars set
//   bf16-own    the same with the vars removed
// Ours: fp32, and bf16 when the learner takes `precision` (see PRECISION below), run as
// `openclaw-rl train` runs it: the learner on the main thread, idle OpenMP threads spinning
// briefly before they sleep (spinIdleThreadsWhileTraining; OMP_WAIT_POLICY=passive measures the
// policy serve keeps, where they sleep at once). Printed: time
// and CPU time per step, ours against each PyTorch configuration and against the targets
// (>= 1.5x PyTorch's best fp32, >= 1.0x PyTorch's best bf16 autocast), and the fraction of the
// best GEMM peak measured in this run (ours sgemm and gemmBf16, torch fp32/bf16 matmul; target
// >= 70%); at bf16 also each round's fraction of our gemmBf16 peak measured just before its step.
//
//   npm run bench:train-vs-torch                       # tiny, then qwen3-0.6b
//   npm run bench:train-vs-torch -- tiny               # quick run
//   BENCH_MODES=lora BENCH_TORCH=fp32-own,bf16-own npm run bench:train-vs-torch -- qwen3-0.6b
//
// Rounds (BENCH_ROUNDS, 3) alternate ours and PyTorch; ratios are the median of the rounds' ratios.
// Knobs: BENCH_THREADS (2), BENCH_STEPS (timed steps after one warm-up; 3), BENCH_ROUNDS (3), BENCH_SEQ (512),
// BENCH_MODES (lora,full), BENCH_TORCH (fp32,fp32-own,bf16,bf16-own), BENCH_OURS (fp32,bf16).

import { spawnSync } from 'node:child_process';
import { loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { trainingAffordsPacking } from '../src/engine/local/memory-plan.js';
import { spinIdleThreadsWhileTraining } from '../src/engine/local/kernels/native.js';
import type { ModelConfig } from '../src/engine/local/model/config.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { DEFAULT_LEARNER, LearnerCore, type LearnerConfig } from '../src/engine/local/train/learner.js';
import type { TrainingSample } from '../src/engine/types.js';
import { DEFAULT_PPO } from '../src/learn/ppo.js';
import { envWithoutOpenblasOverrides, median, printMachine } from './machine.js';
import { benchModel, PYTHON, ROOT, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const SEQ = Number(process.env.BENCH_SEQ ?? 512);
const STEPS = Number(process.env.BENCH_STEPS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LORA = { rank: 16, alpha: 32 };
const TORCH_CONFIGS = (process.env.BENCH_TORCH ?? 'fp32,fp32-own,bf16,bf16-own').split(',');
const OURS = (process.env.BENCH_OURS ?? 'fp32,bf16').split(',') as Precision[];

type Precision = 'fp32' | 'bf16';

/** Matmul FLOPs of one step: forward 2PT, backward 2PT for inputs (+2PT for weights when full). */
function stepFlops(cfg: ModelConfig, lora: boolean): number {
  const D = cfg.hiddenSize,
    F = cfg.intermediateSize,
    q = cfg.numHeads * cfg.headDim,
    kv = cfg.numKvHeads * cfg.headDim;
  const perLayer = D * q + 2 * D * kv + q * D + 3 * D * F;
  const T = SEQ,
    R = SEQ / 2;
  const linear = 2 * perLayer * cfg.numLayers * T,
    head = 2 * D * cfg.vocabSize * R;
  const attention = (2 * 2 * cfg.numLayers * cfg.numHeads * cfg.headDim * (T * T)) / 2;
  const forward = linear + head + attention;
  const backward = (lora ? 1 : 2) * (linear + head) + 2 * attention;
  return forward + backward;
}

/** Our sgemm GFLOP/s on square n x n x n (median over >= 1 s). */
function ourSgemmPeak(n: number): number {
  const k = loadKernels();
  k.setThreads(THREADS);
  const a = new Float32Array(n * n).fill(0.5),
    c = new Float32Array(n * n);
  return gflops(n, () => k.sgemm(false, false, n, n, n, 1, a, n, a, n, 0, c, n));
}

/**
 * Our gemmBf16 GFLOP/s on square n x n x n with bf16 operands (median over >= 1 s), and where the
 * kernels pack weights, the same product with B packed (gemmBf16Packed): a peak of ours too.
 */
function ourBf16Peaks(n: number): { plain: number; packed: number | null } {
  const k = loadKernels();
  k.setThreads(THREADS);
  const a = new Uint16Array(n * n).fill(0x3f00), // 0.5
    c = new Float32Array(n * n);
  const plain = gflops(n, () => k.gemmBf16(false, false, n, n, n, 1, a, n, a, n, 0, c, n));
  const P = k.packBf16?.(false, n, n, a, n) ?? null;
  const packed = P && gflops(n, () => k.gemmBf16Packed!(false, n, n, n, 1, a, n, P, 0, c, n));
  return { plain, packed };
}

function gflops(n: number, run: () => void): number {
  run();
  const times: number[] = [];
  const end = performance.now() + 1000;
  while (times.length < 3 || performance.now() < end) {
    const t0 = performance.now();
    run();
    times.push((performance.now() - t0) / 1000);
  }
  return (2 * n ** 3) / median(times) / 1e9;
}

interface StepResult {
  seconds: number;
  cpuSeconds: number;
  cfg?: ModelConfig;
  /** MB of packed frozen weights our learner made (LearnerConfig.packFrozenWeights). */
  packedMB?: number;
}

function measureOurs(dir: string, lora: boolean, precision: Precision): StepResult {
  const { config: cfg } = readModelFolder(dir);
  const kernels = loadKernels();
  kernels.setThreads(THREADS);
  const config: LearnerConfig = {
    ...DEFAULT_LEARNER,
    mode: lora
      ? { kind: 'lora', spec: { ...LORA, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } }
      : { kind: 'full' },
    optimizer: { lr: 1e-5, beta1: 0.9, beta2: 0.98, eps: 1e-8, weightDecay: 0.1, warmupSteps: 0, maxGradNorm: 1 },
    microBatchTokens: SEQ,
    precision,
  };
  const weights = loadWeights(dir, cfg);
  // As `train` decides it (BENCH_PACK=0 to compare without).
  config.packFrozenWeights =
    lora &&
    precision === 'bf16' &&
    process.env.BENCH_PACK !== '0' &&
    trainingAffordsPacking(cfg, weights.data.length, config.activationBudgetBytes, totalmem());
  let learner: LearnerCore | null = new LearnerCore(cfg, weights, config, kernels);
  try {
    const rng = createRng(1);
    const ids = Array.from({ length: SEQ }, () => Math.floor(rng.next() * cfg.vocabSize));
    const sample: TrainingSample = {
      promptIds: ids.slice(0, SEQ / 2),
      completionIds: ids.slice(SEQ / 2),
      advantages: ids.slice(SEQ / 2).map(() => rng.next() - 0.5),
    };
    const times: number[] = [],
      cpu: number[] = [];
    for (let s = 0; s <= STEPS; s++) {
      const t0 = performance.now(),
        c0 = process.cpuUsage();
      learner.forwardBackward([sample], DEFAULT_PPO.loss);
      learner.optimStep();
      const c = process.cpuUsage(c0);
      if (s === 0) continue; // warm-up
      times.push((performance.now() - t0) / 1000);
      cpu.push((c.user + c.system) / 1e6);
    }
    const packedMB = Math.round(learner.packedBytes / 2 ** 20);
    return { seconds: median(times), cpuSeconds: median(cpu), cfg, ...(packedMB ? { packedMB } : {}) };
  } finally {
    learner = null;
    // The model's gigabytes of arrays go back only when V8 collects them, and it has no reason to
    // before PyTorch's run, which then shares the memory with them (the OOM killer stopped a full
    // fine-tuning round at 12 + 12 GB on a 24 GB machine): collect now (npm script: --expose-gc).
    (globalThis as { gc?: () => void }).gc?.();
  }
}

interface TorchResult {
  stepSeconds: number;
  stepCpuUser: number;
  stepCpuSys: number;
  openblasCore: string | null;
  gemmPeakGflops: Record<string, number> | null;
  autocast: string | null;
}

/** Idle OpenMP threads spin briefly in our runs (see the header); PyTorch keeps its own default. */
const spinning = spinIdleThreadsWhileTraining();

function torchEnv(ownOpenblasCore: boolean): NodeJS.ProcessEnv {
  const env = ownOpenblasCore ? envWithoutOpenblasOverrides() : { ...process.env };
  if (spinning) delete env.GOMP_SPINCOUNT;
  return env;
}

function measureTorch(dir: string, lora: boolean, config: string, gemmPeak: boolean): TorchResult | string {
  const own = config.endsWith('-own');
  const run = spawnSync(PYTHON, [join(ROOT, 'bench', 'torch_train.py')], {
    input: JSON.stringify({
      model: dir,
      threads: THREADS,
      seqLen: SEQ,
      steps: STEPS,
      lora: lora ? LORA : null,
      autocast: config.startsWith('bf16') ? 'bf16' : null,
      gemmPeak,
    }),
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
    env: torchEnv(own),
  });
  if (run.status !== 0) {
    // A run the kernel's OOM killer stops leaves no stderr: say which signal ended it.
    const why = run.signal ? `killed by ${run.signal} (out of memory?)` : `exit ${run.status}`;
    const tail = (run.stderr || run.error?.message || '').trim().split('\n').slice(-2).join(' | ');
    return `torch_train.py failed (${why})${tail ? `: ${tail}` : ''}`;
  }
  return JSON.parse(run.stdout) as TorchResult;
}

const fmt = (x: number, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : '-');

async function main() {
  const which = process.argv.slice(2);
  const presets = (which.length ? which : ['tiny', 'qwen3-0.6b']) as BenchPreset[];
  const modes = (process.env.BENCH_MODES ?? 'lora,full').split(',');
  printMachine(THREADS);
  console.log(
    `ours: the learner on the main thread, as train runs it; idle OpenMP threads: OMP_WAIT_POLICY=${process.env.OMP_WAIT_POLICY ?? 'unset'}, GOMP_SPINCOUNT=${process.env.GOMP_SPINCOUNT ?? 'unset'}${spinning ? ' (set as train sets it)' : ''}`,
  );
  const peaks: Record<string, number> = {
    'ours sgemm fp32-1024': ourSgemmPeak(1024),
    'ours sgemm fp32-2048': ourSgemmPeak(2048),
  };
  const peaksFrom = new Set<string>();

  for (const preset of presets) {
    const dir = benchModel(preset);
    for (const mode of modes) {
      const lora = mode === 'lora';
      console.log(
        `\n== ${preset}, ${lora ? `LoRA r${LORA.rank} (all projections)` : 'full fine-tuning'}, one ${SEQ}-token sequence (${SEQ / 2} completion), ${THREADS} threads, median of ${STEPS} steps after a warm-up, ${ROUNDS} alternating rounds; load ${loadavg()[0]!.toFixed(2)} ==`,
      );
      // Rounds alternate ours and PyTorch, so that each round's ratio compares runs made side by
      // side: on a shared machine one run of each can differ by 1.5x either way.
      const runs = new Map<string, { r: StepResult | string; note?: string }[]>();
      const roundPeaks: number[] = [];
      const record = (name: string, r: StepResult | string, note?: string) =>
        runs.set(name, [...(runs.get(name) ?? []), { r, ...(note ? { note } : {}) }]);
      for (let round = 0; round < ROUNDS; round++) {
        for (const p of OURS) {
          // The peak again just before the step: on a shared machine it moves by 10% or more
          // between minutes, so the step's share is also taken against the peak of its moment.
          if (p === 'bf16') {
            const { plain, packed } = ourBf16Peaks(2048);
            roundPeaks.push(Math.max(plain, packed ?? 0));
            peaks[`ours gemmBf16 bf16-2048 (${preset} ${mode}, round ${round + 1})`] = plain;
            if (packed) peaks[`ours gemmBf16Packed bf16-2048 (${preset} ${mode}, round ${round + 1})`] = packed;
          }
          const r = measureOurs(dir, lora, p);
          record(`ours ${p}`, r, r.packedMB ? `frozen weights packed (${r.packedMB} MB)` : undefined);
        }
        for (const c of TORCH_CONFIGS) {
          // torch's matmul peaks once per OpenBLAS setting (as configured, own core choice)
          const blas = c.endsWith('-own') ? 'own' : 'env';
          const t = measureTorch(dir, lora, c, !peaksFrom.has(blas));
          if (typeof t === 'string') {
            record(`torch ${c}`, t);
            continue;
          }
          if (t.gemmPeakGflops) {
            peaksFrom.add(blas);
            for (const [k, v] of Object.entries(t.gemmPeakGflops))
              peaks[
                `torch matmul ${k} (${k.startsWith('bf16') ? 'oneDNN' : 'OpenBLAS'}, OpenBLAS core ${t.openblasCore})`
              ] = v;
          }
          record(
            `torch ${c}`,
            { seconds: t.stepSeconds, cpuSeconds: t.stepCpuUser + t.stepCpuSys },
            `OpenBLAS core ${t.openblasCore ?? '?'}${t.autocast ? ', autocast bf16' : ''}`,
          );
        }
      }
      const measured = (name: string) =>
        (runs.get(name) ?? []).map((x) => x.r).filter((r): r is StepResult => typeof r !== 'string');
      const rows = [...runs].map(([name, rs]) => {
        const ok = measured(name);
        const failure = rs.find((x) => typeof x.r === 'string')?.r as string | undefined;
        const r: StepResult | string =
          ok.length === 0
            ? (failure ?? 'no run')
            : { seconds: median(ok.map((x) => x.seconds)), cpuSeconds: median(ok.map((x) => x.cpuSeconds)) };
        return { name, r, note: rs.find((x) => x.note)?.note };
      });
      /** Per round, ref's time over `of`'s (rounds where both ran). */
      const roundRatios = (of: string, ref: string, key: 'seconds' | 'cpuSeconds') => {
        const [a, b] = [runs.get(of) ?? [], runs.get(ref) ?? []];
        return a.flatMap((x, i) => {
          const y = b[i]?.r;
          return typeof x.r === 'string' || y === undefined || typeof y === 'string' ? [] : [y[key] / x.r[key]];
        });
      };
      const ours = rows.find((x) => x.name === `ours ${OURS[0]}`)!.r;
      const cfg = [...runs.values()]
        .flat()
        .map((x) => (typeof x.r === 'string' ? undefined : x.r.cfg))
        .find((c) => c !== undefined);
      console.log(
        `${'run'.padEnd(16)} ${'s/step'.padStart(8)} ${'CPU s/step'.padStart(10)} ${'tok/s'.padStart(8)}  ${`ours ${OURS[0]} speedup`.padStart(17)}  notes (medians over ${ROUNDS} rounds)`,
      );
      for (const row of rows) {
        if (typeof row.r === 'string') {
          console.log(`${row.name.padEnd(16)} not measured: ${row.r}`);
          continue;
        }
        const speed = typeof ours === 'string' ? NaN : median(roundRatios(`ours ${OURS[0]}`, row.name, 'seconds'));
        const each = measured(row.name).map((x) => x.seconds.toFixed(2));
        console.log(
          `${row.name.padEnd(16)} ${fmt(row.r.seconds).padStart(8)} ${fmt(row.r.cpuSeconds).padStart(10)} ${fmt(SEQ / row.r.seconds, 1).padStart(8)}  ${(`${fmt(speed, 2)}x`).padStart(17)}  ${row.note ? `${row.note}; ` : ''}s/step per round ${each.join(' ')}`,
        );
      }
      const best = (prefix: string) =>
        rows
          .filter((x) => x.name.startsWith(prefix) && typeof x.r !== 'string')
          .sort((a, b) => (a.r as StepResult).seconds - (b.r as StepResult).seconds)[0];
      const bestFp32 = best('torch fp32'),
        bestBf16 = best('torch bf16');
      for (const p of OURS) {
        const o = rows.find((x) => x.name === `ours ${p}`)!.r;
        if (typeof o === 'string') continue;
        for (const [target, ref] of [
          [1.5, bestFp32],
          [1.0, bestBf16],
        ] as const) {
          if (!ref) continue;
          const wall = roundRatios(`ours ${p}`, ref.name, 'seconds');
          const ratio = median(wall);
          const cpuRatio = median(roundRatios(`ours ${p}`, ref.name, 'cpuSeconds'));
          console.log(
            `target: ours ${p} >= ${target.toFixed(1)}x PyTorch's best ${ref.name.slice(6, 10)} (${ref.name}): ${ratio.toFixed(2)}x wall (rounds ${wall.map((x) => x.toFixed(2)).join(' ')}), ${cpuRatio.toFixed(2)}x CPU time -> ${ratio >= target ? 'MET' : 'NOT MET'}`,
          );
        }
        if (cfg) {
          const flops = stepFlops(cfg, lora);
          const [peakName, peak] = Object.entries(peaks).sort((a, b) => b[1] - a[1])[0]!;
          const fp32Peak = Object.entries(peaks)
            .filter(([k]) => k.includes('fp32'))
            .sort((a, b) => b[1] - a[1])[0]!;
          console.log(
            `GEMM efficiency, ours ${p}: ${(flops / 1e9).toFixed(1)} GFLOP/step at ${(flops / o.seconds / 1e9).toFixed(1)} GFLOP/s = ${((100 * flops) / o.seconds / 1e9 / peak).toFixed(0)}% of the best peak (${peakName} ${peak.toFixed(1)} GFLOP/s), ${((100 * flops) / o.seconds / 1e9 / fp32Peak[1]).toFixed(0)}% of the best fp32 peak (${fp32Peak[0]} ${fp32Peak[1].toFixed(1)}); target >= 70% of the best`,
          );
          const steps = measured(`ours ${p}`);
          if (p === 'bf16' && steps.length === roundPeaks.length) {
            const shares = steps.map((s, i) => (100 * flops) / s.seconds / 1e9 / roundPeaks[i]!);
            console.log(
              `  per round, against our best gemmBf16 2048^3 peak (plain or packed) measured just before the step (${roundPeaks.map((x) => x.toFixed(0)).join(', ')} GFLOP/s): ${shares.map((x) => `${x.toFixed(0)}%`).join(', ')}; median ${median(shares).toFixed(0)}%`,
            );
          }
        }
      }
    }
  }
  console.log('\nGEMM peaks measured in this run (GFLOP/s, square n^3, 2 threads):');
  for (const [k, v] of Object.entries(peaks).sort((a, b) => b[1] - a[1]))
    console.log(`  ${k.padEnd(60)} ${v.toFixed(1)}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
