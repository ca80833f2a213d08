// The PyTorch learner as the rest of the project sees it: a process tree started by PyTorch's
// launcher, driven over rank 0's stdin/stdout (JSON lines), publishing each version as a folder
// on disk that the embedded sampler then loads. Its surface is LocalLearner's (logprobs,
// forwardBackward, optimStep, publishTo, save, close, resumed), so learn/ppo.ts and serve drive
// either one the same way.

import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { ForwardBackwardResult, LossSpec, OptimStepResult, TrainingSample } from '../types.js';
import type { LocalEngine } from '../local/engine.js';
import { policyVersionAt, readPolicyUpdate } from '../local/policy-versions.js';
import type { PolicyVersion } from '../policy-version.js';
import type { Publication } from '../local/learner.js';
import type { LearnerConfig } from '../local/train/learner.js';
import {
  freeLoopbackPort,
  learnerEnv,
  launchCommand,
  preflight,
  tail,
  TorchLearnerError,
  type TorchLaunch,
} from './launcher.js';

export interface TorchLearnerOptions {
  launch: TorchLaunch;
  config: LearnerConfig;
  /** Keep a copy of the frozen base for a KL term under full fine-tuning (LoRA has the base anyway). */
  keepReference?: boolean;
  modelDir: string;
  checkpointDir: string;
  versionsDir: string;
  /** A PEFT adapter folder to start a LoRA from (so both learners start alike); default: a seeded init. */
  initAdapter?: string | null;
  /** Version folders kept, the newest included (default 2; Infinity keeps all, for rollbacks). */
  keepVersions?: number;
  /** The next publication is max(versionAfter, the checkpoint's published version) + 1. */
  versionAfter: number;
  /** Longest wait for the learner to load and say ready (default 10 minutes). */
  startTimeoutMs?: number;
  /** Called once if the learner process ends while open (crash, SIGKILL, out of memory). */
  onExit?: (message: string) => void;
}

export interface TorchStatus {
  steps: number;
  version: number;
  consumedSampleIds: string[];
  torch: string;
  device: string;
  bf16: boolean;
  world: number;
  /** optimizer when AdamW's state is sharded over the ranks (never with one rank). */
  shard: 'none' | 'optimizer';
  /** The elements of AdamW's state (both moments) each rank holds, by rank. */
  optimizerElements: number[];
}

type Reply =
  | { type: 'ready'; status: TorchStatus }
  | { type: 'fatal'; message: string }
  | { type: 'reply'; id: number; result: unknown }
  | { type: 'failed'; id: number; message: string };

export class TorchLearner {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(r: unknown): void; reject(e: Error): void }>();
  private exited: string | null = null;
  private closing = false;

  private constructor(
    private readonly child: ChildProcess,
    readonly resumed: TorchStatus,
    private readonly stderr: () => string,
    private readonly opts: TorchLearnerOptions,
  ) {}

  static async open(opts: TorchLearnerOptions): Promise<TorchLearner> {
    preflight(opts.launch);
    const single = opts.launch.nnodes === 1 && opts.launch.masterPort === null;
    const { command, args } = launchCommand(
      single ? { ...opts.launch, masterPort: await freeLoopbackPort() } : opts.launch,
    );
    // Its own process group, so close() can end the launcher and every rank it started.
    const child = spawn(command, args, { env: learnerEnv(), stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    let errText = '';
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      errText = (errText + d).slice(-20_000);
    });
    const lines = createInterface({ input: child.stdout! });
    const config = {
      ...opts.config,
      keepReference: opts.keepReference ?? false,
      modelDir: opts.modelDir,
      checkpointDir: opts.checkpointDir,
      versionsDir: opts.versionsDir,
      initAdapter: opts.initAdapter ?? null,
      versionAfter: opts.versionAfter,
      // JSON has no Infinity: null keeps every version.
      keepVersions: Number.isFinite(opts.keepVersions ?? 2) ? (opts.keepVersions ?? 2) : null,
      shard: opts.launch.shard ?? 'none',
    };
    child.stdin!.on('error', () => {}); // a dead learner is reported by 'exit'
    child.stdin!.write(`${JSON.stringify({ op: 'start', config })}\n`);
    let learner: TorchLearner | null = null;
    const ready = new Promise<TorchStatus>((resolve, reject) => {
      const limitMs = opts.startTimeoutMs ?? 600_000;
      const timer = setTimeout(
        () =>
          reject(
            new TorchLearnerError(`the PyTorch learner did not start within ${limitMs / 1000} s: ${tail(errText)}`),
          ),
        limitMs,
      );
      lines.on('line', (line) => {
        let m: Reply;
        try {
          m = JSON.parse(line) as Reply;
        } catch {
          errText += `\n(stdout) ${line}`;
          return;
        }
        if (m.type === 'ready') {
          clearTimeout(timer);
          resolve(m.status);
        } else if (m.type === 'fatal') {
          clearTimeout(timer);
          reject(new TorchLearnerError(m.message));
        } else learner?.onReply(m);
      });
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(new TorchLearnerError(`the PyTorch learner could not be launched: ${e.message}`));
      });
      child.on('exit', (code, signal) => {
        clearTimeout(timer);
        const how = signal ? `signal ${signal}` : `code ${code}`;
        const message = `the PyTorch learner exited (${how})${errText ? `: ${tail(errText, 6)}` : ''}`;
        if (learner) learner.onExit(message);
        else reject(new TorchLearnerError(message));
      });
    });
    try {
      const status = await ready;
      learner = new TorchLearner(child, status, () => errText, opts);
      return learner;
    } catch (e) {
      killGroup(child);
      throw e;
    }
  }

  /** The launcher's process id (its process group holds every local rank). */
  get pid(): number {
    return this.child.pid!;
  }

  /** Null while it runs; the reason once it ended. */
  get failure(): string | null {
    return this.exited;
  }

  /** Each sample's completion log-probs under the current weights, computed over the ranks. */
  logprobs(samples: TrainingSample[]): Promise<Float32Array[]> {
    return (this.request({ op: 'logprobs', samples }) as Promise<(number | null)[][]>).then((rows) =>
      rows.map((row) => Float32Array.from(row, (x) => x ?? NaN)),
    );
  }

  /** Adds the gradients of `loss` over `samples` (divided by batchSize), split over the ranks. */
  forwardBackward(
    samples: TrainingSample[],
    loss: LossSpec,
    batchSize = samples.length,
  ): Promise<ForwardBackwardResult> {
    return this.request({ op: 'forwardBackward', samples, loss, batchSize }) as Promise<ForwardBackwardResult>;
  }

  /** All-reduces the accumulated gradients, clips them, applies one AdamW step and clears them. */
  optimStep(): Promise<OptimStepResult> {
    return (this.request({ op: 'optimStep' }) as Promise<Omit<OptimStepResult, 'yieldedMs'>>).then((r) => ({
      ...r,
      gradNorm: r.gradNorm ?? NaN,
      // It runs on its own devices: it never waits for the sampler.
      yieldedMs: 0,
    }));
  }

  /** Writes the current weights as the next version's folder (a PEFT adapter or a model folder). */
  async publish(): Promise<PolicyVersion> {
    const r = (await this.request({ op: 'publish' })) as { version: number; path: string };
    return policyVersionAt(r.path, r.version);
  }

  /** Publishes the current weights and makes `engine` serve them; reading the folder counts as the snapshot. */
  async publishTo(engine: LocalEngine): Promise<Publication> {
    const t0 = performance.now();
    const v = await this.publish();
    const update = readPolicyUpdate(v, engine.folder.config);
    const snapshotMs = performance.now() - t0;
    const swapMs = await engine.use({ ...v, update });
    return { version: v.version, snapshotMs, swapMs, weightsPath: v.path };
  }

  /**
   * A rollback: the trained weights become those of a published version's folder (null: the start
   * of training), and AdamW's moments are reset; a folder that does not fit changes nothing.
   */
  async restore(path: string | null): Promise<void> {
    await this.request({ op: 'restore', path });
  }

  async save(consumedSampleIds: string[]): Promise<void> {
    await this.request({ op: 'save', consumedSampleIds });
  }

  /** Asks the learner to stop, and ends its process group if it has not within `graceMs`. */
  async close(graceMs = 10_000): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    if (this.exited) return;
    const gone = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin!.end(`${JSON.stringify({ op: 'shutdown', id: 0 })}\n`);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), graceMs);
    });
    if ((await Promise.race([gone, late])) === 'late') {
      killGroup(this.child);
      await gone;
    }
    clearTimeout(timer);
    this.failAll(new Error('the PyTorch learner was closed'));
  }

  private request(body: Record<string, unknown>): Promise<unknown> {
    if (this.exited) return Promise.reject(new TorchLearnerError(this.exited));
    if (this.closing) return Promise.reject(new Error('the PyTorch learner is closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.stdin!.write(`${JSON.stringify({ ...body, id }, wireValue)}\n`);
    });
  }

  private onReply(m: Reply): void {
    if (m.type !== 'reply' && m.type !== 'failed') return;
    const p = this.pending.get(m.id);
    this.pending.delete(m.id);
    if (m.type === 'reply') p?.resolve(m.result);
    else p?.reject(new TorchLearnerError(`the PyTorch learner failed: ${m.message}`));
  }

  private onExit(message: string): void {
    if (this.closing) return;
    this.exited = message;
    // The launcher may outlive a killed rank (or the reverse): end whatever is left.
    killGroup(this.child);
    this.failAll(new TorchLearnerError(`${message}\n${tail(this.stderr(), 4)}`));
    this.opts.onExit?.(message);
  }

  private failAll(e: Error): void {
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }
}

/** JSON has no NaN (null stands for it) and writes typed arrays as objects. */
function wireValue(_key: string, v: unknown): unknown {
  if (typeof v === 'number' && !Number.isFinite(v)) return null;
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return Array.from(v as Float32Array);
  return v;
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}
