// Keys and values of token sequences computed before, kept so that a request whose prompt starts
// with one of them copies those rows and computes only the rest. Pure bookkeeping over KvCaches:
// no threads, no model; the scheduler decides when to look up, copy and hand caches over.
//
// Entries are keyed by token ids and policy version (keys and values depend on the weights), are
// evicted least-recently-used under a byte budget, and those of a version are dropped together
// when the scheduler retires it. An entry whose ids are a prefix of another's (same version) is
// redundant and is not kept.

import { type KvCache, kvCacheBytes, trimKvCache } from '../model/kv-cache.js';
import type { PrefixCacheCounters } from './prefix-cache-stats.js';

export interface PrefixEntry {
  readonly version: number;
  /** The ids whose keys and values `cache` holds: ids.length === cache.length. */
  readonly ids: Int32Array;
  readonly cache: KvCache;
  readonly bytes: number;
  /** Clock value of its last insertion or use (least recently used goes first). */
  lastUsed: number;
}

export interface PrefixMatch {
  entry: PrefixEntry;
  /** Leading ids the entry shares with the request (> 0), at most the limit asked for. */
  length: number;
}

/**
 * Length of the common prefix of a and b, at most `limit`. Compares ids directly: unrelated
 * sequences differ within a few ids, so the cost is in the ids actually shared (17k ids of a
 * shared prompt: some tens of microseconds).
 */
export function commonPrefixLength(a: ArrayLike<number>, b: ArrayLike<number>, limit = Infinity): number {
  const n = Math.min(a.length, b.length, limit);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export class PrefixCache {
  /** Dozens of entries in practice: a scanned list is enough (40 of 17k shared ids: under 1 ms a lookup). */
  private readonly entries: PrefixEntry[] = [];
  private clock = 0;
  private held = 0;

  /** budgetBytes 0 turns the cache off: nothing is stored. */
  constructor(
    readonly budgetBytes: number,
    private readonly counters: PrefixCacheCounters | null = null,
  ) {
    counters?.set('budgetBytes', budgetBytes);
  }

  get enabled(): boolean {
    return this.budgetBytes > 0;
  }

  /** The entry of `version` sharing the most leading ids with `ids` (at most `limit`), or null. */
  longest(version: number, ids: ArrayLike<number>, limit: number): PrefixMatch | null {
    let best: PrefixMatch | null = null;
    for (const entry of this.entries) {
      if (entry.version !== version) continue;
      const length = commonPrefixLength(entry.ids, ids, limit);
      if (length > (best?.length ?? 0)) best = { entry, length };
    }
    return best;
  }

  /** Marks an entry as just used, so eviction takes it last. */
  touch(entry: PrefixEntry): void {
    entry.lastUsed = ++this.clock;
  }

  /**
   * Takes over `cache` (no copy; trimmed when much of its capacity is unused) as the keys and
   * values of `ids` under `version`. Entries it makes redundant are dropped; it is not kept
   * itself when an entry already covers it, or when it alone exceeds the budget.
   */
  insert(version: number, ids: ArrayLike<number>, cache: KvCache): void {
    if (!this.enabled || cache.length === 0) return;
    if (ids.length !== cache.length) throw new RangeError(`${ids.length} ids for a cache of ${cache.length} positions`);
    for (const e of this.entries) {
      if (e.version === version && e.ids.length >= ids.length && commonPrefixLength(e.ids, ids) === ids.length) {
        this.touch(e);
        return;
      }
    }
    this.removeWhere((e) => e.version === version && commonPrefixLength(e.ids, ids) === e.ids.length);
    const kept = trimKvCache(cache);
    const bytes = kvCacheBytes(kept);
    if (bytes <= this.budgetBytes) this.add(version, ids, kept, bytes);
    this.report();
  }

  /** Drops every entry of a version no request can run on any more. */
  retire(version: number): void {
    this.removeWhere((e) => e.version === version);
    this.report();
  }

  /** Prompt tokens served from cached (or in-flight) keys and values. */
  countHit(tokens: number): void {
    this.counters?.add('hitTokens', tokens);
  }

  /** Prompt tokens computed. */
  countMiss(tokens: number): void {
    this.counters?.add('missTokens', tokens);
  }

  private add(version: number, ids: ArrayLike<number>, kept: KvCache, bytes: number): void {
    this.entries.push({ version, ids: Int32Array.from(ids), cache: kept, bytes, lastUsed: ++this.clock });
    this.held += bytes;
    let evicted = 0;
    while (this.held > this.budgetBytes) {
      const oldest = this.entries.reduce((a, b) => (b.lastUsed < a.lastUsed ? b : a));
      this.removeWhere((e) => e === oldest);
      evicted++;
    }
    this.counters?.add('evictions', evicted);
  }

  private removeWhere(drop: (e: PrefixEntry) => boolean): void {
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const e = this.entries[i]!;
      if (!drop(e)) continue;
      this.entries.splice(i, 1);
      this.held -= e.bytes;
    }
  }

  private report(): void {
    this.counters?.set('bytes', this.held);
    this.counters?.set('entries', this.entries.length);
  }
}
