// Training benchmark of the embedded learner against PyTorch CPU (bench/torch_train.py) on the
// same model, loss and optimizer, in the same run: train tokens/s for LoRA (rank 16, all seven
// projections) and full fine-tuning, one 512-token sequence per step with the last half as the
// completion; CPU seconds per step, which other load on the machine distorts less than wall
// time; the fraction of the GEMM-bound limit (sgemm peak measured in this run), peak RSS, and
// the p99 event-loop delay of the main thread while the learner worker trains.
//
//   npm run bench:train                  # tiny and qwen3-0.6b shapes
//   npm run bench:train -- tiny          # one shape
//   BENCH_MODES=lora npm run bench:train -- qwen3-0.6b

import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { LocalEngine } from '../src/engine/local/engine.js';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { LocalLearner } from '../src/engine/local/learner.js';
import type { ModelConfig } from '../src/engine/local/model/config.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import type { TrainingSample } from '../src/engine/types.js';
import { DEFAULT_PPO } from '../src/learn/ppo.js';
import { benchModel, PYTHON, ROOT, type BenchPreset } from './models.js';

const THREADS = Number(process.env.BENCH_THREADS ?? 2);
const SEQ = 512;
const STEPS = Number(process.env.BENCH_STEPS ?? 3);
const LORA = { rank: 16, alpha: 32 };

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
  const attention = (2 * 2 * cfg.numLayers * cfg.numHeads * cfg.headDim * (T * T)) / 2; // QK^T and PV over the causal half
  const forward = linear + head + attention;
  const backward = (lora ? 1 : 2) * (linear + head) + 2 * attention;
  return forward + backward;
}

function sgemmPeak(): number {
  const k = loadKernels();
  k.setThreads(THREADS);
  const n = 1024,
    a = new Float32Array(n * n).fill(0.5),
    c = new Float32Array(n * n);
  k.sgemm(false, false, n, n, n, 1, a, n, a, n, 0, c, n);
  const t0 = performance.now();
  let reps = 0;
  while (performance.now() - t0 < 1000) {
    k.sgemm(false, false, n, n, n, 1, a, n, a, n, 0, c, n);
    reps++;
  }
  return (2 * n * n * n * reps) / ((performance.now() - t0) / 1000);
}

async function measureOurs(dir: string, lora: boolean) {
  const engine = await LocalEngine.open(dir, { threads: THREADS });
  const learner = await LocalLearner.open(engine, {
    threads: THREADS,
    config: {
      mode: lora
        ? { kind: 'lora', spec: { ...LORA, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } }
        : { kind: 'full' },
      optimizer: { lr: 1e-5, beta1: 0.9, beta2: 0.98, eps: 1e-8, weightDecay: 0.1, warmupSteps: 0, maxGradNorm: 1 },
      microBatchTokens: SEQ,
    },
  });
  try {
    const rng = createRng(1);
    const V = engine.folder.config.vocabSize;
    const ids = Array.from({ length: SEQ }, () => Math.floor(rng.next() * V));
    const sample: TrainingSample = {
      promptIds: ids.slice(0, SEQ / 2),
      completionIds: ids.slice(SEQ / 2),
      advantages: ids.slice(SEQ / 2).map(() => rng.next() - 0.5),
    };
    const delay = monitorEventLoopDelay({ resolution: 5 });
    const times: number[] = [],
      cpuTimes: number[] = [];
    for (let s = 0; s <= STEPS; s++) {
      if (s === 1) delay.enable();
      const t0 = performance.now(),
        cpu0 = process.cpuUsage();
      await learner.forwardBackward([sample], DEFAULT_PPO.loss);
      await learner.optimStep();
      const cpu = process.cpuUsage(cpu0);
      if (s > 0) {
        times.push((performance.now() - t0) / 1000);
        cpuTimes.push((cpu.user + cpu.system) / 1e6);
      }
    }
    delay.disable();
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const seconds = median(times);
    return {
      seconds,
      cpuSeconds: median(cpuTimes),
      tokPerS: SEQ / seconds,
      loopP99Ms: delay.percentile(99) / 1e6,
      loopMaxMs: delay.max / 1e6,
      cfg: engine.folder.config,
    };
  } finally {
    await learner.close();
    await engine.close();
  }
}

function measureTorch(dir: string, lora: boolean) {
  const run = spawnSync(PYTHON, [join(ROOT, 'bench', 'torch_train.py')], {
    input: JSON.stringify({ model: dir, threads: THREADS, seqLen: SEQ, steps: STEPS, lora: lora ? LORA : null }),
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  if (run.status !== 0) throw new Error(`torch benchmark failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as {
    trainTokPerS: number;
    stepSeconds: number;
    stepCpuUser: number;
    stepCpuSys: number;
    peakRssMB: number;
  };
}

async function main() {
  const which = process.argv.slice(2);
  const presets = (which.length ? which : ['tiny', 'qwen3-0.6b']) as BenchPreset[];
  const modes = (process.env.BENCH_MODES ?? 'lora,full').split(',');
  const peak = sgemmPeak();
  console.log(`sgemm peak in this run (1024^3, ${THREADS} threads): ${(peak / 1e9).toFixed(1)} GFLOP/s`);
  for (const preset of presets) {
    const dir = benchModel(preset);
    for (const mode of modes) {
      const lora = mode === 'lora';
      const ours = await measureOurs(dir, lora);
      const torch = measureTorch(dir, lora);
      const flops = stepFlops(ours.cfg, lora);
      console.log(
        `\n== ${preset}, ${lora ? `LoRA r${LORA.rank} (all projections)` : 'full fine-tuning'}, ${SEQ}-token sequence (${SEQ / 2} completion), ${THREADS} threads ==`,
      );
      console.log(
        `train tok/s   engine ${ours.tokPerS.toFixed(1).padStart(9)}   torch ${torch.trainTokPerS.toFixed(1).padStart(9)}   ratio ${(ours.tokPerS / torch.trainTokPerS).toFixed(2)}x   (target >= 1.5x)`,
      );
      console.log(`step seconds  engine ${ours.seconds.toFixed(3)}   torch ${torch.stepSeconds.toFixed(3)}`);
      // CPU seconds (all threads) stretch far less than wall time when other jobs share the cores.
      const torchCpu = torch.stepCpuUser + torch.stepCpuSys;
      console.log(
        `CPU s/step    engine ${ours.cpuSeconds.toFixed(3)}   torch ${torchCpu.toFixed(3)}   ratio ${(torchCpu / ours.cpuSeconds).toFixed(2)}x   (less sensitive to other load than wall time)`,
      );
      console.log(
        `GEMM-bound limit: ${(flops / 1e9).toFixed(1)} GFLOP per step -> ${(flops / peak).toFixed(3)} s at peak; engine reaches ${((100 * flops) / peak / ours.seconds).toFixed(0)}% of it`,
      );
      console.log(
        `main-thread event-loop delay while training: p99 ${ours.loopP99Ms.toFixed(1)} ms, max ${ours.loopMaxMs.toFixed(1)} ms (target p99 < 20 ms)`,
      );
      console.log(
        `peak RSS so far: engine process ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB, torch ${torch.peakRssMB.toFixed(0)} MB`,
      );
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
