// Holds the simulated users' next-state messages, for two reasons. Each next state closes one
// turn, which yields at most one sample; a message may go only while the samples that closed turns
// could still become (queued, being judged, closed but unclaimed, plus messages sent since the last
// status poll) fit in one batch, and only before the target step.
// - One batch at a time: the users are slower than the learner, as people are and as in the
//   reference's loop (collect a batch, then train it while the next is collected), so every sample
//   comes from the newest version or the one before. Before, users could run ahead by up to the
//   64 samples of four steps, so most of a step's samples could come from a version several steps
//   old. (Measured on Combined at step 8, the change was within the spread of three seeds.)
// - The target step: the learner reaches it and then finds less than a batch, so the score is
//   measured on exactly that version.

import type { AdminStatus, ServeClient } from './client.js';

export class StepGate {
  private target = 0;
  status: AdminStatus | null = null;
  private sent = 0;
  /** Next states answered before the last poll started: the server has counted them. */
  private accounted = 0;
  private answered: number[] = [];
  private waiters: (() => void)[] = [];
  private timer: NodeJS.Timeout | null = null;
  private failure: Error | null = null;

  constructor(
    private readonly client: ServeClient,
    private readonly batchSize: number,
    private readonly onStatus?: (s: AdminStatus) => void,
    private readonly pollMs = 200,
  ) {}

  start(): void {
    const poll = async () => {
      const startedAt = performance.now();
      try {
        this.status = await this.client.status();
        this.onStatus?.(this.status);
      } catch (e) {
        this.failure = e as Error;
      }
      if (this.status?.trainer?.state === 'failed')
        this.failure = new Error(`the trainer failed: ${this.status.trainer.error}`);
      this.accounted = this.answered.filter((t) => t < startedAt).length;
      this.wakeAll();
      if (this.timer !== null) this.timer = setTimeout(() => void poll(), this.pollMs);
    };
    this.timer = setTimeout(() => void poll(), 0);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.failure ??= new Error('stopped');
    this.wakeAll();
  }

  /** Lets the users go on until the learner reaches step `target`. */
  advance(target: number): void {
    this.target = target;
    this.wakeAll();
  }

  /** Waits while the learner is at the target (being measured): new conversations wait too. */
  async open(): Promise<void> {
    while (!this.status || this.status.steps >= this.target) {
      if (this.failure) throw this.failure;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** Waits until one more next state may be sent; the returned function marks it answered. */
  async acquire(): Promise<() => void> {
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.allows()) break;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    this.sent++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.answered.push(performance.now());
    };
  }

  /** Resolves once the learner is at the target step with no batch left to train. */
  async reached(): Promise<AdminStatus> {
    for (;;) {
      if (this.failure) throw this.failure;
      const s = this.status;
      if (s && s.steps >= this.target && s.trainer?.state !== 'training') return s;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private allows(): boolean {
    const s = this.status;
    if (!s || s.steps >= this.target) return false;
    const q = s.queues ?? { closedTurns: 0, judging: 0, samples: 0 };
    const unseen = this.sent - this.accounted;
    return q.closedTurns + q.judging + q.samples + unseen < this.batchSize;
  }

  private wakeAll(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
