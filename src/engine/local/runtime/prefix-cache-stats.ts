// The prefix cache's counters in a SharedArrayBuffer: the worker updates them as it works, and
// the main thread reads them at any time without a message round trip (like LocalEngine.activity).

/** What the prefix cache has done since the engine started, and what it holds now. */
export interface PrefixCacheStats {
  /** Prompt tokens whose keys and values were copied instead of computed. */
  hitTokens: number;
  /** Prompt tokens computed (generation prompts and scored sequences, decoding excluded). */
  missTokens: number;
  /** Bytes of keys and values the cache holds (its Float32Arrays). */
  bytes: number;
  entries: number;
  /** Entries dropped to stay within the budget (not those of retired versions or made redundant). */
  evictions: number;
  /** The byte budget; 0: the cache is off. */
  budgetBytes: number;
}

type Field = keyof PrefixCacheStats;
const FIELDS: readonly Field[] = ['hitTokens', 'missTokens', 'bytes', 'entries', 'evictions', 'budgetBytes'];

export function createPrefixCacheStatsBuffer(): SharedArrayBuffer {
  return new SharedArrayBuffer(FIELDS.length * BigInt64Array.BYTES_PER_ELEMENT);
}

/** The worker's side: each field is one atomic 64-bit integer (bytes pass 2^31 on real models). */
export class PrefixCacheCounters {
  private readonly cells: BigInt64Array;

  constructor(buffer: SharedArrayBuffer) {
    this.cells = new BigInt64Array(buffer);
  }

  add(field: Field, n: number): void {
    if (n !== 0) Atomics.add(this.cells, FIELDS.indexOf(field), BigInt(n));
  }

  set(field: Field, n: number): void {
    Atomics.store(this.cells, FIELDS.indexOf(field), BigInt(n));
  }
}

/** A snapshot (each field read atomically; fields updated between two reads may be one step apart). */
export function readPrefixCacheStats(buffer: SharedArrayBuffer): PrefixCacheStats {
  const cells = new BigInt64Array(buffer);
  const out = {} as PrefixCacheStats;
  FIELDS.forEach((f, i) => {
    out[f] = Number(Atomics.load(cells, i));
  });
  return out;
}
