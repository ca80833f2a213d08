// The learning loop as `serve` runs it: the judging feed (closed turns -> judgments + samples)
// and the trainer (samples -> batches -> published versions), woken by new samples and a poll
// timer, with a status summary for GET /admin/status and the progress line, and the versions
// record with rollbacks (learn/rollback.ts).

import type { JudgeClient, JudgeLog, JudgeTurnOptions } from '../judge/index.js';
import type { Store } from '../store/store.js';
import type { RollbackRequest, RollbackRequester, VersionRecord, VersionSummary } from '../store/versions.js';
import { guardConfigOf, type LearnConfig } from './config.js';
import { JudgingFeed } from './judging.js';
import { learningStatus, type LearningStatus } from './status.js';
import type { TeacherModel } from './teacher.js';
import { RollbackRefused, Rollbacks, type GuardStatus } from './rollback.js';
import { Trainer, type PolicyBackend } from './trainer.js';

/** What GET /admin/status adds about versions: the guard and the latest rollbacks. */
export interface VersionsStatus {
  guard: GuardStatus;
  rollbacks: VersionRecord[];
}

export interface LearningLoopOptions {
  store: Store;
  config: LearnConfig;
  judgeClient: JudgeClient;
  judge: Partial<Omit<JudgeTurnOptions, 'signal'>>;
  teacher: TeacherModel;
  policy: PolicyBackend;
  log: JudgeLog;
}

export class LearningLoop {
  readonly feed: JudgingFeed;
  readonly trainer: Trainer;
  readonly rollbacks: Rollbacks;
  private timer: NodeJS.Timeout | null = null;
  private readonly startedAt = Date.now();

  constructor(private readonly opts: LearningLoopOptions) {
    this.rollbacks = new Rollbacks(opts.store, opts.policy, guardConfigOf(opts.config), opts.log, () =>
      this.trainer.notify(),
    );
    this.trainer = new Trainer(opts.store.learning, opts.policy, opts.config, opts.log, this.rollbacks);
    this.feed = new JudgingFeed({
      store: opts.store,
      client: opts.judgeClient,
      judge: opts.judge,
      config: opts.config,
      teacher: opts.teacher,
      servingVersion: opts.policy.servingVersion,
      log: opts.log,
      onSample: () => this.trainer.notify(),
    });
  }

  start(): void {
    this.trainer.start();
    this.feed.pump();
    this.timer = setInterval(() => this.pump(), this.opts.config.pollMs);
    this.timer.unref();
  }

  /** Offers newly closed turns to the judge now (the gateway calls it when it closes one). */
  pump(): void {
    if (this.opts.store.isOpen) this.feed.pump();
  }

  /** Every recorded version, newest first, with its turns and judge scores. */
  versions(): VersionSummary[] {
    return this.opts.store.versions.list(this.opts.policy.servingVersion());
  }

  /**
   * Rolls back to `target` (a new version with its weights) between two batches; resolves with
   * the answered request. Throws RollbackRefused when it cannot be done.
   */
  rollback(target: number, by: RollbackRequester): Promise<RollbackRequest> {
    const state = this.trainer.state;
    if (state === 'failed' || state === 'closed')
      throw new RollbackRefused(
        `the trainer is ${state}${this.trainer.error ? ` (${this.trainer.error})` : ''}; restart serve to roll back`,
        'rollback_unavailable',
      );
    return this.rollbacks.request(target, by);
  }

  status(): LearningStatus & { versions: VersionsStatus } {
    return {
      ...this.learningStatus(),
      versions: { guard: this.rollbacks.status(), rollbacks: this.opts.store.versions.rollbacks(10) },
    };
  }

  private learningStatus(): LearningStatus {
    return learningStatus({
      store: this.opts.store,
      config: this.opts.config,
      feed: this.feed,
      trainer: this.trainer,
      servingVersion: this.opts.policy.servingVersion(),
      judge: this.opts.judgeClient.name,
      startedAt: this.startedAt,
    });
  }

  /** Stops judging and training; what was not committed stays queued for the next start. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.feed.close();
    await this.trainer.close();
  }
}
