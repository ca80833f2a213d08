// A PyTorch learner that comes back: when its process died (SIGKILL, out of memory, a lost node),
// the next batch relaunches it from its last checkpoint, returns to the queue what the checkpoint
// lacks (the caller's reconcile, as at a restart of serve) and trains the batch on it (`train`
// runs the caller's training of one batch, learn/ppo.ts's, against the live learner). A learner
// that keeps dying is given up after maxRestarts, with the last reason.

import type { LocalEngine } from '../local/engine.js';
import type { Publication } from '../local/learner.js';
import type { PolicyVersion } from '../policy-version.js';
import type { TorchLearner, TorchStatus } from './learner.js';

export interface SupervisorHooks {
  /** Launches a fresh learner (it resumes from the checkpoint folder). */
  reopen(): Promise<TorchLearner>;
  /** Requeues what was trained after `steps`; returns how many samples. */
  reconcile(steps: number): number;
  log(event: string, fields: Record<string, unknown>): void;
}

export class SupervisedTorchLearner {
  private restarts = 0;
  /** What the first learner resumed from. */
  readonly resumed: TorchStatus;

  constructor(
    private learner: TorchLearner,
    private readonly hooks: SupervisorHooks,
    private readonly maxRestarts = 3,
  ) {
    this.resumed = learner.resumed;
  }

  /** Runs `batch` (one batch's training) on the learner; once more on a fresh one if it died meanwhile. */
  async train<T>(batch: (learner: TorchLearner) => Promise<T>): Promise<T> {
    if (this.learner.failure) await this.restart();
    try {
      return await batch(this.learner);
    } catch (e) {
      if (!this.learner.failure) throw e; // a bad batch, not a dead learner
      await this.restart();
      return batch(this.learner);
    }
  }

  /** Writes the current weights as the next version's folder. */
  publish(): Promise<PolicyVersion> {
    return this.learner.publish();
  }

  publishTo(engine: LocalEngine): Promise<Publication> {
    return this.learner.publishTo(engine);
  }

  /** Restores a version's weights (a rollback), on a fresh learner if this one died. */
  restore(path: string | null): Promise<void> {
    return this.train((learner) => learner.restore(path));
  }

  save(consumedSampleIds: string[]): Promise<void> {
    return this.learner.save(consumedSampleIds);
  }

  close(): Promise<void> {
    return this.learner.close();
  }

  private async restart(): Promise<void> {
    const reason = this.learner.failure;
    if (this.restarts >= this.maxRestarts) {
      throw new Error(
        `the PyTorch learner died ${this.restarts + 1} times; not restarting it again. ` + `Last: ${reason}`,
      );
    }
    this.restarts++;
    await this.learner.close();
    this.learner = await this.hooks.reopen();
    const requeued = this.hooks.reconcile(this.learner.resumed.steps);
    this.hooks.log('learner_restarted', {
      restarts: this.restarts,
      steps: this.learner.resumed.steps,
      requeuedSamples: requeued,
      pid: this.learner.pid,
    });
  }
}
