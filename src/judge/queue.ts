// Closed turns waiting for the judge: a few judged at once, a bounded number waiting, and a plain
// `false` when full so the caller leaves the turn pending in the store and offers it again later.
// Nothing here touches serving: the judge's slowness or failures only delay learning.

import type { ClosedTurn } from '../types.js';
import { judgeTurn, resolveJudgeOptions, type JudgeTurnOptions } from './judge-turn.js';
import { JudgeMetrics } from './metrics.js';
import type { JudgeClient, JudgedTurn } from './types.js';

/** Structured events without conversation text (compatible with gateway/log.ts Logger.event). */
export type JudgeLog = (event: string, fields: Record<string, unknown>) => void;

export interface JudgeQueueOptions {
  client: JudgeClient;
  /** judgeTurn settings; the queue supplies the signal. */
  judge?: Partial<Omit<JudgeTurnOptions, 'signal'>>;
  /** Turns judged at once (each sends votes + hintVotes requests). Default 4. */
  concurrency?: number;
  /** Turns waiting to start; offer() refuses beyond this. Default 256. */
  maxWaiting?: number;
  /** Persists the judgment (store, then the learning loop). A throw is counted and logged; the turn stays pending upstream. */
  onJudged(judged: JudgedTurn, closed: ClosedTurn): void | Promise<void>;
  log?: JudgeLog;
  metrics?: JudgeMetrics;
}

export class JudgeQueue {
  readonly metrics: JudgeMetrics;
  private readonly waitingTurns: ClosedTurn[] = [];
  /** Turn ids waiting or running: offering one again is a no-op. */
  private readonly held = new Set<string>();
  private runningCount = 0;
  private readonly stop = new AbortController();
  private closed = false;
  private idleWaiters: (() => void)[] = [];
  private readonly judgeOptions: JudgeTurnOptions;
  private readonly concurrency: number;
  private readonly maxWaiting: number;

  constructor(private readonly opts: JudgeQueueOptions) {
    this.judgeOptions = resolveJudgeOptions({ ...opts.judge, signal: this.stop.signal });
    this.concurrency = opts.concurrency ?? 4;
    this.maxWaiting = opts.maxWaiting ?? 256;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1)
      throw new RangeError(`judge queue: concurrency must be an integer >= 1, got ${this.concurrency}`);
    if (!Number.isInteger(this.maxWaiting) || this.maxWaiting < 0)
      throw new RangeError(`judge queue: maxWaiting must be an integer >= 0, got ${this.maxWaiting}`);
    this.metrics = opts.metrics ?? new JudgeMetrics();
  }

  get waiting(): number {
    return this.waitingTurns.length;
  }

  get running(): number {
    return this.runningCount;
  }

  /**
   * Takes a turn for judging. True when it is queued, running, or already was; false when the
   * queue is full or closed (nothing was taken: keep it pending and offer it again later).
   */
  offer(closed: ClosedTurn): boolean {
    this.metrics.queue('offered');
    if (this.held.has(closed.turn.id)) {
      this.metrics.queue('duplicate');
      return true;
    }
    if (this.closed) {
      this.metrics.queue('closed');
      return false;
    }
    const canStart = this.runningCount < this.concurrency;
    if (!canStart && this.waitingTurns.length >= this.maxWaiting) {
      this.metrics.queue('full');
      return false;
    }
    this.metrics.queue('accepted');
    this.held.add(closed.turn.id);
    this.waitingTurns.push(closed);
    this.pump();
    return true;
  }

  /** Resolves when nothing is waiting or running (new offers in the meantime are waited for too). */
  drain(): Promise<void> {
    if (this.idle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Stops: refuses offers, forgets waiting turns, aborts running ones (their requests end), and
   * resolves once they have settled. None of these is reported to onJudged: they stay pending upstream.
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.waitingTurns.splice(0)) {
      this.held.delete(t.turn.id);
      this.metrics.queue('dropped_on_close');
    }
    this.stop.abort(new Error('judge queue closed'));
    await this.drain();
  }

  private idle(): boolean {
    return this.waitingTurns.length === 0 && this.runningCount === 0;
  }

  private pump(): void {
    while (this.runningCount < this.concurrency && this.waitingTurns.length > 0) {
      const closed = this.waitingTurns.shift()!;
      this.runningCount += 1;
      void this.run(closed).finally(() => {
        this.runningCount -= 1;
        this.held.delete(closed.turn.id);
        this.pump();
        if (this.idle()) for (const resolve of this.idleWaiters.splice(0)) resolve();
      });
    }
  }

  private async run(closed: ClosedTurn): Promise<void> {
    const log = this.opts.log ?? (() => {});
    let judged: JudgedTurn;
    try {
      judged = await judgeTurn(this.opts.client, closed, this.judgeOptions);
    } catch (e) {
      // Only an abort gets here (judgeTurn turns every vote failure into a value).
      this.metrics.queue(this.stop.signal.aborted ? 'cancelled' : 'failed');
      if (!this.stop.signal.aborted)
        log('judge_failed', { turnId: closed.turn.id, message: e instanceof Error ? e.message : String(e) });
      return;
    }
    const before = this.metrics.health().state;
    this.metrics.recordJudged(judged);
    log('turn_judged', summary(judged));
    const health = this.metrics.health();
    // Said once when the judge starts failing and once when it recovers, not on every turn.
    if (health.state === 'failing' && before !== 'failing') {
      log('judge_unhealthy', {
        votes: health.votes,
        failed: health.failed,
        reasons: health.reasons,
        message: health.summary,
      });
    } else if (health.state === 'ok' && before === 'failing') {
      log('judge_recovered', { votes: health.votes, failed: health.failed });
    }
    try {
      await this.opts.onJudged(judged, closed);
    } catch (e) {
      this.metrics.queue('persist_failed');
      log('judge_persist_failed', { turnId: closed.turn.id, message: e instanceof Error ? e.message : String(e) });
    }
  }
}

/** What a log line says about a judgment: counts and figures, no text. */
export function summary(j: JudgedTurn): Record<string, unknown> {
  const failures: Record<string, number> = {};
  for (const v of [...j.evalVotes, ...j.hintVotes]) if (v.failure) failures[v.failure] = (failures[v.failure] ?? 0) + 1;
  return {
    turnId: j.turnId,
    judge: j.judge,
    skipped: j.skipped,
    score: j.score,
    agreement: j.agreement,
    votes: j.evalVotes.map((v) => v.score),
    failures,
    hint: j.hint !== null,
    hintChars: j.hint?.length ?? 0,
    hintRejections: j.hintRejections.map((r) => r.reason),
    ms: j.finishedAt - j.startedAt,
  };
}
