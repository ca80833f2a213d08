// How the PyTorch learner is started: a check of the chosen Python's PyTorch (so "no torch" or
// "no CUDA" is one clear sentence, not a traceback), then PyTorch's own launcher
// (`python -m torch.distributed.run`, what `torchrun` runs) over python/openclaw_rl_learner.

import { spawnSync } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** The package folder holding openclaw_rl_learner (shipped with the npm package). */
export const LEARNER_PYTHONPATH = fileURLToPath(new URL('../../../../python/', import.meta.url));

export type LearnerDevice = 'cpu' | 'cuda' | 'mps';

/**
 * How the training state is split over the ranks: none (replicas), optimizer (AdamW's state
 * sharded, ZeRO stage 1), or fsdp, which the preflight refuses with the reason (not implemented).
 */
export type LearnerShard = 'none' | 'optimizer' | 'fsdp';

export interface TorchLaunch {
  /** A Python with PyTorch; default OPENCLAW_RL_PYTHON or python3. */
  python: string;
  /** Ranks on this node (--nproc_per_node). */
  nproc: number;
  device: LearnerDevice;
  /** Several nodes: the static rendezvous this node (rank 0, which talks to serve) hosts. */
  nnodes: number;
  masterAddr: string;
  masterPort: number | null;
  /** Default none. */
  shard?: LearnerShard;
}

export const DEFAULT_LAUNCH: TorchLaunch = {
  python: process.env.OPENCLAW_RL_PYTHON ?? 'python3',
  nproc: 1,
  device: 'cpu',
  nnodes: 1,
  masterAddr: '127.0.0.1',
  masterPort: null,
};

export class TorchLearnerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TorchLearnerError';
  }
}

export interface PreflightReport {
  ok: boolean;
  python: string;
  torch: string | null;
  bf16: boolean;
  /** Whether torch.distributed.fsdp imports on this PyTorch. */
  fsdp: boolean;
  missing: string[];
}

/** Runs the worker's own check; throws TorchLearnerError saying what is missing. */
export function preflight(launch: TorchLaunch): PreflightReport {
  const args = ['-m', 'openclaw_rl_learner', '--check', '--device', launch.device, '--world', String(launch.nproc)];
  args.push('--shard', launch.shard ?? 'none');
  const run = spawnSync(launch.python, args, {
    env: learnerEnv(),
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (run.error) {
    const code = (run.error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'not found' : run.error.message;
    throw new TorchLearnerError(
      `the PyTorch learner needs Python with PyTorch, but ${launch.python} was ${why}; ` +
        'set --learner-python or OPENCLAW_RL_PYTHON',
    );
  }
  let report: PreflightReport | null = null;
  try {
    report = JSON.parse(run.stdout.trim().split('\n').pop() ?? '') as PreflightReport;
  } catch {
    throw new TorchLearnerError(
      `${launch.python} could not run the learner's check (exit ${run.status}): ${tail(run.stderr)}`,
    );
  }
  if (!report.ok) {
    throw new TorchLearnerError(`the PyTorch learner cannot start with ${launch.python}: ${report.missing.join('; ')}`);
  }
  return report;
}

/**
 * A port on the loopback interface that is free now. A learner started on one node gets its own:
 * `--standalone` always rendezvouses on port 29400, where the launcher of a learner whose serve was
 * killed can still be listening, and the new learner then fails to start.
 */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The launcher's command line for one node. Node 0 (serve's) holds global rank 0, which talks to
 * serve; the static rendezvous puts it there, where a c10d one could give rank 0 to any node. One
 * node with a port: the same static rendezvous on it; without one, `--standalone`.
 */
export function launchCommand(launch: TorchLaunch, nodeRank = 0): { command: string; args: string[] } {
  const rendezvous =
    launch.nnodes > 1 || launch.masterPort !== null
      ? [
          '--nnodes',
          String(launch.nnodes),
          '--node_rank',
          String(nodeRank),
          '--master_addr',
          launch.masterAddr,
          '--master_port',
          String(launch.masterPort ?? 29500),
        ]
      : ['--standalone'];
  return {
    command: launch.python,
    args: [
      '-m',
      'torch.distributed.run',
      ...rendezvous,
      '--nproc_per_node',
      String(launch.nproc),
      // torch 1.13 on Python 3.11 parses the default redirect "0" as None and crashes; a mapping
      // (one digit only) for local rank 9 leaves every other rank's output alone on every version
      // (rank 9's, with 10 or more ranks per node, also goes to a log file in torch's log dir).
      '--redirects',
      '9:1',
      '--tee',
      '9:1',
      '-m',
      'openclaw_rl_learner',
      '--device',
      launch.device,
    ],
  };
}

/** The shell command another node runs to join (serve logs it for --learner-nnodes > 1). */
export function followerCommand(launch: TorchLaunch, nodeRank: number): string {
  const c = launchCommand(launch, nodeRank);
  return `PYTHONPATH=${LEARNER_PYTHONPATH} ${c.command} ${c.args.join(' ')}`;
}

export function learnerEnv(): NodeJS.ProcessEnv {
  const path = process.env.PYTHONPATH ? `${LEARNER_PYTHONPATH}:${process.env.PYTHONPATH}` : LEARNER_PYTHONPATH;
  // Passive OpenMP waits: spinning threads take the cores the serving engine needs (and on a
  // loaded machine made a tiny model's batch 30x slower here). OMP_WAIT_POLICY set by the user wins.
  return { OMP_WAIT_POLICY: 'PASSIVE', ...process.env, PYTHONPATH: path, PYTHONUNBUFFERED: '1' };
}

export function tail(text: string, lines = 12): string {
  return text.trim().split('\n').slice(-lines).join('\n');
}
