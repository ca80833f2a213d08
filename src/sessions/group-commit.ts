// Group commit: the store writes that one event (an engine step's tokens, an arriving request)
// causes go to SQLite in one transaction. The flush runs on process.nextTick, that is once the
// promise reactions the event set off have run and before the event loop takes the next event: so
// when 32 streams finish in the same engine step their 32 turns share one commit instead of
// queueing 32 behind each other, and no write waits for unrelated I/O (a setImmediate flush
// waited behind every request parsed in the same poll phase: 3 ms at 8 streams).

/** One batch of writes in one transaction: all land or none (then it throws). */
export type WriteAll<W> = (writes: readonly W[]) => void;

interface Pending<W> {
  write: W;
  resolve: () => void;
  reject: (e: unknown) => void;
}

export class GroupCommit<W> {
  private queue: Pending<W>[] = [];
  private scheduled = false;
  private idle: (() => void)[] = [];

  constructor(
    private readonly writeAll: WriteAll<W>,
    private readonly schedule: (flush: () => void) => void = (flush) => process.nextTick(flush),
  ) {}

  /** Resolves once the write is in the store; rejects with the store's error for this write alone. */
  submit(write: W): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ write, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        this.schedule(() => this.flush());
      }
    });
  }

  get pending(): number {
    return this.queue.length;
  }

  /** Resolves when everything submitted so far has been written or has failed. */
  flushed(): Promise<void> {
    if (this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private flush(): void {
    const batch = this.queue;
    this.queue = [];
    this.scheduled = false;
    try {
      this.writeAll(batch.map((p) => p.write));
      for (const p of batch) p.resolve();
    } catch (e) {
      if (batch.length === 1) batch[0]!.reject(e);
      // One bad write must not fail the rest of its batch: write each alone, so only it fails.
      else for (const p of batch) this.writeAlone(p);
    }
    if (this.queue.length === 0) for (const done of this.idle.splice(0)) done();
  }

  private writeAlone(p: Pending<W>): void {
    try {
      this.writeAll([p.write]);
      p.resolve();
    } catch (e) {
      p.reject(e);
    }
  }
}
