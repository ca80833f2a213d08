// Token-exactness checks run after the response is sent, off the request path: queued, worked off
// when the server is quiet (or the backlog grows) in slices of a few milliseconds, and saved in
// one transaction per slice.

import type { RetemplateCheck } from '../types.js';

interface Item {
  turnId: string;
  compute: () => RetemplateCheck;
}

export class CheckQueue {
  private readonly items: Item[] = [];
  private scheduled = false;
  /** settled() was called: work everything off now, regardless of load. */
  private flushing = false;
  private waiters: (() => void)[] = [];

  constructor(
    private readonly save: (results: [string, RetemplateCheck][]) => void,
    private readonly onError: (e: unknown) => void,
    /** True while requests are being served; checks wait unless the backlog passes maxBacklog. */
    private readonly busy: () => boolean = () => false,
    private readonly opts: { sliceMs?: number; maxBacklog?: number; retryMs?: number } = {},
  ) {}

  get length(): number {
    return this.items.length;
  }

  push(turnId: string, compute: () => RetemplateCheck): void {
    this.items.push({ turnId, compute });
    this.schedule();
  }

  /** Computes everything queued now, then resolves (tests, shutdown). */
  settled(): Promise<void> {
    if (this.items.length === 0 && !this.scheduled) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.flushing = true;
      setImmediate(() => this.drain());
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setTimeout(() => this.drain(), this.opts.retryMs ?? 20).unref();
  }

  private drain(): void {
    this.scheduled = false;
    if (!this.flushing && this.busy() && this.items.length < (this.opts.maxBacklog ?? 256)) return this.schedule();
    const start = performance.now();
    const results: [string, RetemplateCheck][] = [];
    while (this.items.length > 0 && (this.flushing || performance.now() - start < (this.opts.sliceMs ?? 4))) {
      const item = this.items.shift()!;
      try {
        results.push([item.turnId, item.compute()]);
      } catch (e) {
        this.onError(e);
      }
    }
    if (results.length > 0) {
      try {
        this.save(results);
      } catch (e) {
        this.onError(e);
      }
    }
    if (this.items.length > 0) return this.schedule();
    this.flushing = false;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
