// Rollbacks and the guard, between the trainer's batches. A rollback publishes an earlier
// version's weights as a NEW version (history is never rewritten): the learner restores them
// (AdamW's moments reset, see LearnerCore.restore), publishes them like a trained batch (the
// sampler swaps between two steps, no request is refused), checkpoints, and only then records the
// version and answers the request, so a crash in between re-applies the request at the next start
// instead of serving the abandoned weights. Requests come from the CLI (a row in the store), the
// admin route and the guard; the trainer applies them in order.

import { existsSync } from 'node:fs';
import type { JudgeLog } from '../judge/index.js';
import type { Store } from '../store/store.js';
import type { RollbackRequest, RollbackRequester } from '../store/versions.js';
import type { GuardConfig } from './guard.js';
import { guardVerdict } from './guard.js';
import type { PolicyBackend } from './trainer.js';

/** A rollback that cannot be done; `code` tells the admin route's error. */
export class RollbackRefused extends Error {
  constructor(
    message: string,
    readonly code: 'unknown_version' | 'weights_gone' | 'already_serving' | 'rollback_unavailable',
  ) {
    super(message);
    this.name = 'RollbackRefused';
  }
}

export interface GuardStatus {
  enabled: boolean;
  window: number;
  margin: number;
  alpha: number;
  /** The trained version waiting for its verdict (training waits too), and its judged turns so far. */
  waitingOn: { version: number; judged: number } | null;
}

export class Rollbacks {
  private readonly waiters = new Map<number, (r: RollbackRequest) => void>();

  constructor(
    private readonly store: Store,
    private readonly backend: PolicyBackend,
    private readonly guard: GuardConfig,
    private readonly log: JudgeLog,
    private readonly wake: () => void,
  ) {}

  /**
   * Checks a rollback to `target` now; throws RollbackRefused with the reason. Returns the folder
   * to restore (null: version 0, the start of training).
   */
  check(target: number): string | null {
    if (!this.backend.restore)
      throw new RollbackRefused(
        'no learner is running to restore a version (see learner_unavailable in the log)',
        'rollback_unavailable',
      );
    const serving = this.backend.servingVersion();
    if (target === serving) throw new RollbackRefused(`version ${target} is serving already`, 'already_serving');
    if (target === 0) return null;
    const v = this.store.versions.get(target);
    if (!v)
      throw new RollbackRefused(
        `no version ${target} was recorded (see openclaw-rl versions list); versions published before schema 9 are not listed`,
        'unknown_version',
      );
    if (v.weightsPath === null || !existsSync(v.weightsPath))
      throw new RollbackRefused(
        `the weights of version ${target} are no longer kept${v.weightsPath ? ` (${v.weightsPath} is gone)` : ''}; ` +
          'choose a version listed with weights, or raise --keep-versions for the future',
        'weights_gone',
      );
    return v.weightsPath;
  }

  /** Queues a rollback (checked first) and resolves when the trainer has applied or refused it. */
  request(target: number, by: RollbackRequester): Promise<RollbackRequest> {
    this.check(target);
    const id = this.store.versions.request(target, by);
    const answered = new Promise<RollbackRequest>((resolve) => this.waiters.set(id, resolve));
    this.wake();
    return answered;
  }

  /** Applies every pending request, oldest first (the trainer calls it between batches). */
  async applyPending(): Promise<void> {
    for (const r of this.store.versions.pendingRequests()) {
      let path: string | null;
      try {
        path = this.check(r.target);
      } catch (e) {
        if (!(e instanceof RollbackRefused)) throw e;
        this.store.versions.refuse(r.id, e.message);
        this.log('rollback_refused', {
          request: r.id,
          target: r.target,
          requestedBy: r.requestedBy,
          message: e.message,
        });
        this.answer(r.id);
        continue;
      }
      await this.apply(r, path);
    }
  }

  private async apply(r: RollbackRequest, path: string | null): Promise<void> {
    const from = this.backend.servingVersion();
    try {
      await this.backend.restore!(path);
    } catch (e) {
      // Nothing changed: the folder could not be read into the learner.
      const message = `cannot restore version ${r.target}: ${(e as Error).message}`;
      this.store.versions.refuse(r.id, message);
      this.log('rollback_refused', { request: r.id, target: r.target, requestedBy: r.requestedBy, message });
      this.answer(r.id);
      return;
    }
    // From here a failure leaves the learner ahead of the serving version: the trainer stops.
    const t0 = performance.now();
    const published = await this.backend.publish();
    const publishMs = performance.now() - t0;
    await this.backend.checkpoint();
    const step = this.store.learning.lastStep();
    this.store.versions.finishRollback(r.id, {
      version: published.version,
      publishedAt: Date.now(),
      step,
      source: 'rollback',
      rolledBackFrom: from,
      restores: r.target,
      requestedBy: r.requestedBy,
      weightsPath: published.weightsPath ?? null,
    });
    this.log('rollback', {
      request: r.id,
      requestedBy: r.requestedBy,
      from,
      restores: r.target,
      version: published.version,
      step,
      publishMs,
      swapMs: published.swapMs,
    });
    this.answer(r.id);
  }

  private answer(id: number): void {
    const resolve = this.waiters.get(id);
    this.waiters.delete(id);
    const r = this.store.versions.requestById(id);
    if (resolve && r) resolve(r);
  }

  /** Refuses what waits in memory when the trainer stops; the rows stay pending for the next start. */
  abandon(message: string): void {
    for (const [id, resolve] of this.waiters) {
      const r = this.store.versions.requestById(id);
      if (r) resolve({ ...r, message });
    }
    this.waiters.clear();
  }

  /** The serving version when the guard has yet to judge it (a trained version without a verdict). */
  private awaitingVerdict(): number | null {
    if (!this.guard.enabled) return null;
    const serving = this.backend.servingVersion();
    const v = this.store.versions.get(serving);
    if (v?.source !== 'train') return null;
    return this.store.versions.verdictOf(serving) === null ? serving : null;
  }

  /** While the guard waits on the serving version, no new batch is published over it. */
  holdsTraining(): boolean {
    return this.awaitingVerdict() !== null;
  }

  /** Judges the serving version once it has `window` judged turns; a worse one is rolled back. */
  checkGuard(): void {
    const version = this.awaitingVerdict();
    if (version === null) return;
    const scores = this.store.versions.judgedScores(version, this.guard.window);
    if (scores.length < this.guard.window) return;
    const previous = this.store.versions.previous(version);
    const previousScores = this.store.versions.judgedScores(previous, this.guard.window, true);
    const verdict = guardVerdict(previous, previousScores, scores, this.guard);
    this.store.versions.setGuard(version, verdict);
    this.log('guard_verdict', { version, ...verdict });
    if (verdict.decision !== 'rolled_back') return;
    try {
      this.check(previous);
    } catch (e) {
      if (!(e instanceof RollbackRefused)) throw e;
      this.log('rollback_refused', { target: previous, requestedBy: 'guard', message: e.message });
      return;
    }
    const request = this.store.versions.request(previous, 'guard');
    this.log('auto_rollback', { version, restores: previous, request, p: verdict.p, reason: verdict.reason });
  }

  status(): GuardStatus {
    const v = this.awaitingVerdict();
    return {
      enabled: this.guard.enabled,
      window: this.guard.window,
      margin: this.guard.margin,
      alpha: this.guard.alpha,
      waitingOn:
        v === null ? null : { version: v, judged: this.store.versions.judgedScores(v, this.guard.window).length },
    };
  }
}
