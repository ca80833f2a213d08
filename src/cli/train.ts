// openclaw-rl train --model DIR --samples FILE.jsonl --out DIR [options]
//
//   openclaw-rl train --model models/small --samples turns.jsonl --out adapters/a1 --steps 20
//   openclaw-rl train --model models/small --samples turns.jsonl --out models/small-ft --lora-rank 0
//
// Offline training from recorded or hand-made samples (see samples-file.ts for the format).
// Writes a PEFT adapter (LoRA) or a complete model folder (--lora-rank 0), atomically.

import { readFileSync, renameSync, rmSync, existsSync, readdirSync, mkdirSync } from 'node:fs';
import { totalmem } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { loadKernels } from '../engine/local/kernels/index.js';
import { spinIdleThreadsWhileTraining } from '../engine/local/kernels/native.js';
import { readModelFolder } from '../engine/local/model/folder.js';
import { saveModelFolder } from '../engine/local/model/save.js';
import { loadWeights } from '../engine/local/model/weights.js';
import { writePeftAdapter } from '../engine/local/train/peft-adapter.js';
import { DEFAULT_LEARNER, LearnerCore } from '../engine/local/train/learner.js';
import { LORA_TARGETS } from '../engine/local/train/lora.js';
import type { LinearName } from '../engine/local/train/model-params.js';
import { CliError, numberFlag, parseFlags, precisionFlag, PRECISION_USAGE, stringFlag } from './args.js';
import { resolvePrecision, trainPrecisionOf } from '../engine/local/precision.js';
import { trainingAffordsPacking } from '../engine/local/memory-plan.js';
import { parseSamplesJsonl } from './samples-file.js';
import { DEFAULT_PPO, trainBatch } from '../learn/ppo.js';

const USAGE = `usage: openclaw-rl train --model DIR --samples FILE.jsonl --out DIR [options]

options:
  --lora-rank R       LoRA rank (default 16); 0 = full fine-tuning (writes a model folder)
  --lora-alpha A      default 2 * rank
  --lora-targets L    comma list of q,k,v,o,gate,up,down (default all)
  --steps N           optimizer steps (default: one pass over the samples)
  --batch-size B      samples per step (default min(16, samples))
  --epochs E          PPO epochs per batch (default 1)
  --lr X              learning rate (default 1e-4 LoRA, 1e-5 full)
  --weight-decay X    default 0.1
  --max-grad-norm X   default 1
  --seed N            LoRA initialisation seed (default 0)
  --threads N         BLAS threads
  ${PRECISION_USAGE}

samples: one JSON object per line:
  {"promptIds": [...], "completionIds": [...], "advantages": number | number[], "rolloutLogprobs": [...] (optional)}`;

export async function runTrain(argv: string[]): Promise<number> {
  const v = parseFlags(
    argv,
    {
      model: { type: 'string' },
      samples: { type: 'string' },
      out: { type: 'string' },
      'lora-rank': { type: 'string' },
      'lora-alpha': { type: 'string' },
      'lora-targets': { type: 'string' },
      steps: { type: 'string' },
      'batch-size': { type: 'string' },
      epochs: { type: 'string' },
      lr: { type: 'string' },
      'weight-decay': { type: 'string' },
      'max-grad-norm': { type: 'string' },
      seed: { type: 'string' },
      threads: { type: 'string' },
      precision: { type: 'string' },
    },
    USAGE,
  );
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const modelDir = stringFlag(v, 'model', USAGE);
  const samplesPath = stringFlag(v, 'samples', USAGE);
  const out = stringFlag(v, 'out', USAGE);
  if (existsSync(out) && readdirSync(out).length > 0)
    throw new CliError(`--out ${out} exists and is not empty; choose a new folder`);
  const rank = numberFlag(v, 'lora-rank', { integer: true, min: 0 }) ?? 16;
  const precisionSetting = precisionFlag(v);
  if (precisionSetting === 'int8') {
    throw new CliError(
      '--precision int8 is for serve and generate (decoding from int8 weights); train at fp32, bf16 or auto',
    );
  }
  const targets = ((v['lora-targets'] as string | undefined) ?? LORA_TARGETS.join(',')).split(',').map((t) => t.trim());
  const badTarget = targets.find((t) => !(LORA_TARGETS as readonly string[]).includes(t));
  if (badTarget !== undefined)
    throw new CliError(`--lora-targets: "${badTarget}" is not one of ${LORA_TARGETS.join(', ')}`);

  const folder = readModelFolder(modelDir);
  let text: string;
  try {
    text = readFileSync(samplesPath, 'utf8');
  } catch (e) {
    throw new CliError(`cannot read --samples ${samplesPath}: ${(e as Error).message}`);
  }
  const { samples, errors } = parseSamplesJsonl(text, folder.config.vocabSize, samplesPath);
  if (errors.length > 0) {
    const shown = errors.slice(0, 20).join('\n');
    throw new CliError(
      `nothing was trained: ${errors.length} bad line${errors.length > 1 ? 's' : ''} in ${samplesPath}\n${shown}${errors.length > 20 ? `\n... and ${errors.length - 20} more` : ''}`,
    );
  }
  const tooLong = samples.findIndex(
    (s) => s.promptIds.length + s.completionIds.length > folder.config.maxPositionEmbeddings,
  );
  if (tooLong >= 0)
    throw new CliError(
      `nothing was trained: sample ${tooLong + 1} is longer than the model's context of ${folder.config.maxPositionEmbeddings} tokens`,
    );

  const batchSize = numberFlag(v, 'batch-size', { integer: true, min: 1 }) ?? Math.min(16, samples.length);
  const steps = numberFlag(v, 'steps', { integer: true, min: 1 }) ?? Math.ceil(samples.length / batchSize);
  const ppo = {
    ...DEFAULT_PPO,
    miniBatchSize: batchSize,
    epochs: numberFlag(v, 'epochs', { integer: true, min: 1 }) ?? 1,
  };
  // Nothing else runs in this process: kernels follow each other, so idle threads wait spinning.
  spinIdleThreadsWhileTraining();
  const kernels = loadKernels();
  const threads = numberFlag(v, 'threads', { integer: true, min: 1 });
  if (threads) kernels.setThreads(threads);
  const precision = trainPrecisionOf(resolvePrecision(precisionSetting, kernels));
  const weights = loadWeights(modelDir, folder.config);
  const packFrozenWeights =
    rank > 0 &&
    precision === 'bf16' &&
    trainingAffordsPacking(folder.config, weights.data.length, DEFAULT_LEARNER.activationBudgetBytes, totalmem());
  const learner = new LearnerCore(
    folder.config,
    weights,
    {
      ...DEFAULT_LEARNER,
      mode:
        rank === 0
          ? { kind: 'full' }
          : {
              kind: 'lora',
              spec: {
                rank,
                alpha: numberFlag(v, 'lora-alpha', { min: 0 }) ?? 2 * rank,
                targets: targets as LinearName[],
              },
            },
      optimizer: {
        ...DEFAULT_LEARNER.optimizer,
        lr: numberFlag(v, 'lr', { min: 0 }) ?? (rank === 0 ? 1e-5 : 1e-4),
        weightDecay: numberFlag(v, 'weight-decay', { min: 0 }) ?? 0.1,
        maxGradNorm: numberFlag(v, 'max-grad-norm', { min: 0 }) ?? 1,
      },
      seed: numberFlag(v, 'seed', { integer: true, min: 0 }) ?? 0,
      precision,
      packFrozenWeights,
    },
    kernels,
  );

  console.error(
    `training ${rank === 0 ? 'all parameters' : `a rank-${rank} LoRA`} on ${samples.length} samples: ${steps} steps of ${batchSize} (kernels: ${kernels.name}, ${kernels.info.gemm} ${kernels.info.isa}; precision ${precision}${learner.packedBytes > 0 ? `; frozen weights packed, ${Math.round(learner.packedBytes / 2 ** 20)} MB` : ''})`,
  );
  let cursor = 0;
  for (let step = 0; step < steps; step++) {
    const batch = Array.from({ length: batchSize }, (_, i) => samples[(cursor + i) % samples.length]!);
    cursor = (cursor + batchSize) % samples.length;
    for (const m of await trainBatch(learner, batch, ppo)) {
      console.error(
        `step ${String(m.step).padStart(4)}/${steps * ppo.epochs}  loss ${m.loss.toFixed(4)}  grad-norm ${m.gradNorm.toFixed(3)}${m.applied ? '' : ' (skipped: not finite)'}  clip ${m.clipFraction.toFixed(3)}  kl ${m.approxKl.toExponential(2)}  entropy ${m.entropy.toFixed(3)}  ${m.tokensPerSecond.toFixed(0)} tok/s`,
      );
    }
  }

  if (learner.lora) {
    // The adapter's two files appear together: written into a temp folder, then renamed.
    mkdirSync(dirname(out), { recursive: true });
    const tmp = join(dirname(out), `.${basename(out)}.tmp-${process.pid}`);
    rmSync(tmp, { recursive: true, force: true });
    try {
      writePeftAdapter(tmp, learner.lora, { baseModel: modelDir });
      if (existsSync(out)) rmSync(out, { recursive: true });
      renameSync(tmp, out);
    } catch (e) {
      rmSync(tmp, { recursive: true, force: true });
      throw e;
    }
    console.error(`wrote the PEFT adapter to ${out}`);
  } else {
    saveModelFolder(out, modelDir, learner.params);
    console.error(`wrote the fine-tuned model folder to ${out}`);
  }
  return 0;
}
