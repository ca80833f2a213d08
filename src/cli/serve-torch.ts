// serve's `--learner torch`: the flags, and opening the PyTorch learner on the served model. Kept
// apart from serve.ts and serve-learning.ts, which only spread these in.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { LocalEngine } from '../engine/local/engine.js';
import { writePeftAdapter } from '../engine/local/train/peft-adapter.js';
import { DEFAULT_LEARNER, type LearnerConfig } from '../engine/local/train/learner.js';
import { Lora } from '../engine/local/train/lora.js';
import {
  DEFAULT_LAUNCH,
  followerCommand,
  type LearnerDevice,
  type LearnerShard,
  type TorchLaunch,
} from '../engine/torch/launcher.js';
import { TorchLearner } from '../engine/torch/learner.js';
import { SupervisedTorchLearner } from '../engine/torch/supervised.js';
import type { JudgeLog } from '../judge/index.js';
import type { PolicyBackend } from '../learn/trainer.js';
import { CliError, numberFlag } from './args.js';

export const TORCH_FLAGS = {
  learner: { type: 'string' },
  'learner-nproc': { type: 'string' },
  'learner-device': { type: 'string' },
  'learner-python': { type: 'string' },
  'learner-nnodes': { type: 'string' },
  'learner-master-addr': { type: 'string' },
  'learner-master-port': { type: 'string' },
  'learner-shard': { type: 'string' },
} as const;

export const TORCH_USAGE = `
  --learner local|torch   who trains: the embedded TypeScript learner (default) or PyTorch (docs/torch-learner.md)
  --learner-nproc N       PyTorch ranks on this machine (default 1), data-parallel
  --learner-device D      cpu (default), cuda or mps
  --learner-python PATH   a Python with PyTorch >= 1.13 (default OPENCLAW_RL_PYTHON or python3)
  --learner-nnodes N      machines in the PyTorch job (default 1); serve's is node 0 and logs the
                          command each other node runs
  --learner-master-addr A / --learner-master-port P   node 0's rendezvous address (default 127.0.0.1:29500)
  --learner-shard S       none (default: every rank a replica) or optimizer (AdamW's state split over the
                          ranks); fsdp is refused: this learner does not implement it`;

/** The launch for `--learner torch`, or null for the embedded learner. */
export function torchLaunchOf(v: Record<string, unknown>): TorchLaunch | null {
  const kind = v.learner ?? 'local';
  const torchOnly = Object.keys(TORCH_FLAGS).filter((k) => k !== 'learner' && v[k] !== undefined);
  if (kind === 'local') {
    if (torchOnly.length > 0) throw new CliError(`--${torchOnly[0]} needs --learner torch`);
    return null;
  }
  if (kind !== 'torch') throw new CliError(`--learner must be local or torch, got "${String(kind)}"`);
  const device = (v['learner-device'] ?? 'cpu') as LearnerDevice;
  if (!['cpu', 'cuda', 'mps'].includes(device)) {
    throw new CliError(`--learner-device must be cpu, cuda or mps, got "${device}"`);
  }
  const shard = (v['learner-shard'] ?? 'none') as LearnerShard;
  if (!['none', 'optimizer', 'fsdp'].includes(shard)) {
    throw new CliError(`--learner-shard must be none, optimizer or fsdp, got "${shard}"`);
  }
  return {
    shard,
    python: (v['learner-python'] as string | undefined) ?? DEFAULT_LAUNCH.python,
    nproc: numberFlag(v, 'learner-nproc', { integer: true, min: 1 }) ?? 1,
    device,
    nnodes: numberFlag(v, 'learner-nnodes', { integer: true, min: 1 }) ?? 1,
    masterAddr: (v['learner-master-addr'] as string | undefined) ?? DEFAULT_LAUNCH.masterAddr,
    masterPort: numberFlag(v, 'learner-master-port', { integer: true, min: 1, max: 65535 }) ?? null,
  };
}

/**
 * Opens the PyTorch learner for `engine`'s model under `dir` (checkpoints/, versions/ and, for a
 * LoRA, the initial adapter: the embedded learner's own seeded init, so both start alike).
 */
export async function openTorchLearner(a: {
  engine: LocalEngine;
  launch: TorchLaunch;
  config: Partial<LearnerConfig>;
  /** Keep a copy of the frozen base for a KL term (full fine-tuning). */
  keepReference: boolean;
  dir: string;
  /** Version folders kept for rollbacks (Infinity: all). */
  keepVersions: number;
  /** The number the next publication must exceed (asked again at each relaunch). */
  versionAfter: () => number;
  /** Requeues the samples trained after a relaunched learner's checkpoint. */
  reconcile: (steps: number) => number;
  log: JudgeLog;
}): Promise<SupervisedTorchLearner> {
  const config: LearnerConfig = { ...DEFAULT_LEARNER, ...a.config };
  let initAdapter: string | null = null;
  if (config.mode.kind === 'lora') {
    initAdapter = join(a.dir, 'init-adapter');
    if (!existsSync(join(initAdapter, 'adapter_config.json'))) {
      const lora = new Lora(a.engine.folder.config, config.mode.spec);
      lora.initialise(config.seed);
      writePeftAdapter(initAdapter, lora, { baseModel: a.engine.folder.dir });
    }
  }
  for (let node = 1; node < a.launch.nnodes; node++) {
    a.log('learner_node_command', { node, command: followerCommand(a.launch, node) });
  }
  const open = async () => {
    const learner = await TorchLearner.open({
      launch: a.launch,
      config,
      keepReference: a.keepReference,
      modelDir: a.engine.folder.dir,
      checkpointDir: join(a.dir, 'checkpoints'),
      versionsDir: join(a.dir, 'versions'),
      keepVersions: a.keepVersions,
      initAdapter,
      versionAfter: a.versionAfter(),
      onExit: (message) =>
        a.log('learner_failed', {
          message:
            `${message}; serving goes on with the last published version, ` +
            'and the next batch relaunches the learner from its last checkpoint',
        }),
    });
    const r = learner.resumed;
    a.log('learner_started', {
      learner: 'torch',
      pid: learner.pid,
      torch: r.torch,
      device: r.device,
      bf16: r.bf16,
      ranks: r.world,
      shard: r.shard,
      optimizerElements: r.optimizerElements,
      steps: r.steps,
    });
    return learner;
  };
  return new SupervisedTorchLearner(await open(), { reopen: open, reconcile: a.reconcile, log: a.log });
}

/** The trainer's backend when the learner could not start: every batch fails with why. */
export function unavailablePolicy(message: string, servingVersion: () => number): PolicyBackend {
  const fail = () => Promise.reject(new Error(`the PyTorch learner is unavailable: ${message}`));
  return { trainBatch: fail, publish: fail, checkpoint: fail, servingVersion };
}
