// The retention rule (`serve --retention-days D`): at start and then every hour, turns completed
// more than D days ago are purged with everything that hangs off them (store/purge.ts), a bounded
// batch of rows per transaction with the event loop free between batches, and the freed pages are given
// back to the file system a chunk at a time. One JSON log line per purge, counts only.
//
//   const retention = RetentionPurger.start(store, { days: 30, log });
//   ...; await retention.stop();

import {
  addCounts,
  checkpointTruncate,
  convertToIncrementalVacuum,
  freePages,
  NO_ROWS,
  protectedTurns,
  purgeBatch,
  storeBytes,
  vacuumPages,
  vacuumsIncrementally,
  type PurgeCounts,
} from './purge.js';
import type { Store } from './store.js';

export const DAY_MS = 86_400_000;

export interface RetentionOptions {
  /** Turns completed more than this many days ago are purged. */
  days: number;
  /** Between purges (default an hour). */
  everyMs?: number;
  /** Turns (and sessions) per transaction at most (default 200). */
  batchRows?: number;
  /** Prompt + completion tokens of the turns one transaction deletes, at most (default 250,000). */
  batchTokens?: number;
  /** Pages given back per incremental-vacuum step (default 2048: 8 MB at SQLite's 4 kB pages). */
  vacuumPages?: number;
  now?: () => number;
  log: (event: string, fields: Record<string, unknown>) => void;
}

/** What one purge did: the `retention_purge` log line. */
export interface PurgeReport extends PurgeCounts {
  /** Turns completed before this time (ms since the epoch) were purged. */
  cutoff: number;
  /** Old turns kept because the learning loop still needs them (open, being judged, in a batch). */
  kept: number;
  transactions: number;
  pagesFreed: number;
  bytesBefore: number;
  bytesAfter: number;
  ms: number;
}

export class RetentionPurger {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<PurgeReport | null> | null = null;
  private stopped = false;
  private readonly now: () => number;

  private constructor(
    private readonly store: Store,
    private readonly opts: RetentionOptions,
  ) {
    if (!(opts.days > 0)) throw new RangeError(`retention days must be positive, got ${opts.days}`);
    this.now = opts.now ?? Date.now;
  }

  /**
   * Converts an older store to incremental vacuum first (one full VACUUM, logged: call this before
   * the gateway listens), then purges now and every `everyMs`, on timers that keep no process alive.
   */
  static start(store: Store, opts: RetentionOptions): RetentionPurger {
    const purger = new RetentionPurger(store, opts);
    if (!vacuumsIncrementally(store.db)) {
      const t0 = performance.now();
      const bytesBefore = storeBytes(store.path);
      try {
        convertToIncrementalVacuum(store.db);
        checkpointTruncate(store.db);
        opts.log('retention_vacuum', {
          bytesBefore,
          bytesAfter: storeBytes(store.path),
          ms: Math.round(performance.now() - t0),
        });
      } catch (e) {
        // E.g. not enough free disk for the copy: purges still delete, the file just keeps its size.
        opts.log('error', {
          message:
            'retention: VACUUM to enable incremental vacuum failed, the store file will not shrink: ' +
            (e as Error).message,
        });
      }
    }
    void purger.purgeNow();
    purger.timer = setInterval(() => void purger.purgeNow(), opts.everyMs ?? 3_600_000).unref();
    return purger;
  }

  /** Runs a purge now, or joins the one running; resolves to its report (null when stopped first). */
  purgeNow(): Promise<PurgeReport | null> {
    this.running ??= this.purge()
      .catch((e: unknown) => {
        this.opts.log('error', { message: `retention purge failed: ${(e as Error)?.message ?? String(e)}` });
        return null;
      })
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /** No more purges; waits for the one running to stop between two transactions. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  private live(): boolean {
    return !this.stopped && this.store.isOpen;
  }

  private async purge(): Promise<PurgeReport | null> {
    const db = this.store.db;
    const t0 = performance.now();
    const cutoff = this.now() - this.opts.days * DAY_MS;
    const bounds = { rows: this.opts.batchRows ?? 200, tokens: this.opts.batchTokens ?? 250_000 };
    const bytesBefore = storeBytes(this.store.path);
    let counts = NO_ROWS;
    let transactions = 0;
    for (;;) {
      await turn();
      if (!this.live()) return null;
      const { full, ...batch } = purgeBatch(db, cutoff, bounds);
      transactions++;
      counts = addCounts(counts, batch);
      if (!full) break;
    }
    let pagesFreed = 0;
    if (vacuumsIncrementally(db)) {
      for (let free = freePages(db); free > 0; ) {
        await turn();
        if (!this.live()) return null;
        vacuumPages(db, Math.min(free, this.opts.vacuumPages ?? 2048));
        const left = freePages(db);
        if (left >= free) break; // no progress: leave the rest for SQLite to reuse
        pagesFreed += free - left;
        free = left;
      }
    }
    if (!this.live()) return null;
    // Also the deleted rows' pages, overwritten by secure_delete, leave the WAL.
    if (counts.turns + counts.sessions + pagesFreed > 0) checkpointTruncate(db);
    const report: PurgeReport = {
      ...counts,
      cutoff,
      kept: protectedTurns(db, cutoff),
      transactions,
      pagesFreed,
      bytesBefore,
      bytesAfter: storeBytes(this.store.path),
      ms: Math.round(performance.now() - t0),
    };
    this.opts.log('retention_purge', { days: this.opts.days, ...report });
    return report;
  }
}

/** Lets the event loop run (requests, the learning loop) between two transactions. */
function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
