// The prefix cache on its own (no threads, no model): longest-prefix lookup, version isolation,
// redundant entries, least-recently-used eviction under the byte budget, retirement, the
// counters the main thread reads, and the default budget.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultKvCacheBytes } from '../src/engine/local/kv-cache-budget.js';
import { modelConfigOf, PRESETS } from '../src/engine/local/model/init.js';
import { copyKvPrefix, createKvCache, type KvCache, kvBytesPerToken } from '../src/engine/local/model/kv-cache.js';
import { PrefixCache } from '../src/engine/local/runtime/prefix-cache.js';
import {
  createPrefixCacheStatsBuffer,
  PrefixCacheCounters,
  readPrefixCacheStats,
} from '../src/engine/local/runtime/prefix-cache-stats.js';

const cfg = modelConfigOf({ family: 'qwen3', ...PRESETS.tiny! }, [0]);
const perToken = kvBytesPerToken(cfg); // 2 layers * 2 * 2 kv heads * 16 * 4 = 512

/** A cache of `ids.length` positions whose rows hold recognisable values (ids[p] at position p). */
function filled(ids: readonly number[], capacity = ids.length): KvCache {
  const cache = createKvCache(cfg, capacity);
  for (let l = 0; l < cfg.numLayers; l++) {
    for (let p = 0; p < ids.length; p++) {
      (cache.k[l] as Float32Array).fill(ids[p]!, p * cache.rowSize, (p + 1) * cache.rowSize);
      (cache.v[l] as Float32Array).fill(-ids[p]!, p * cache.rowSize, (p + 1) * cache.rowSize);
    }
  }
  cache.length = ids.length;
  return cache;
}

function withStats(budget: number) {
  const buffer = createPrefixCacheStatsBuffer();
  return { cache: new PrefixCache(budget, new PrefixCacheCounters(buffer)), stats: () => readPrefixCacheStats(buffer) };
}

const seq = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

test('kvBytesPerToken is numLayers * 2 * numKvHeads * headDim * 4, and matches what a cache holds', () => {
  assert.equal(perToken, 2 * 2 * 2 * 16 * 4);
  const { cache, stats } = withStats(1 << 20);
  cache.insert(0, seq(1, 10), filled(seq(1, 10)));
  assert.equal(stats().bytes, 10 * perToken);
});

test('lookup finds the entry sharing the longest prefix, capped at the limit, and the rows copy over', () => {
  const { cache } = withStats(1 << 20);
  cache.insert(0, [1, 2, 3, 4, 5], filled([1, 2, 3, 4, 5]));
  cache.insert(0, [1, 2, 9, 9], filled([1, 2, 9, 9]));
  cache.insert(0, [7, 8], filled([7, 8]));

  const a = cache.longest(0, [1, 2, 3, 4, 6, 6], 10)!;
  assert.deepEqual([...a.entry.ids], [1, 2, 3, 4, 5]);
  assert.equal(a.length, 4);
  assert.equal(cache.longest(0, [1, 2, 3, 4, 6, 6], 3)!.length, 3, 'the limit caps the match');
  const b = cache.longest(0, [1, 2, 9, 9, 9], 10)!;
  assert.deepEqual([...b.entry.ids], [1, 2, 9, 9]);
  assert.equal(b.length, 4);
  assert.equal(cache.longest(0, [5, 1, 2], 10), null);
  assert.equal(cache.longest(0, [1, 2, 3], 0), null);

  const target = createKvCache(cfg, 2);
  copyKvPrefix(a.entry.cache, target, a.length);
  assert.equal(target.length, 4);
  const rows = (values: number[]) => values.flatMap((x) => Array(target.rowSize).fill(x));
  assert.deepEqual([...(target.k[1] as Float32Array).subarray(0, 4 * target.rowSize)], rows([1, 2, 3, 4]));
  assert.deepEqual([...(target.v[0] as Float32Array).subarray(0, 4 * target.rowSize)], rows([-1, -2, -3, -4]));
  (target.k[0] as Float32Array)[0] = 99;
  assert.equal((a.entry.cache.k[0] as Float32Array)[0], 1, 'a copy, not a view: the job appends to its own cache');
});

test('entries serve only requests on their own policy version', () => {
  const { cache } = withStats(1 << 20);
  cache.insert(3, [1, 2, 3, 4], filled([1, 2, 3, 4]));
  assert.equal(cache.longest(3, [1, 2, 3, 4, 5], 4)!.length, 4);
  assert.equal(cache.longest(0, [1, 2, 3, 4, 5], 4), null);
  assert.equal(cache.longest(4, [1, 2, 3, 4, 5], 4), null);
});

test('an entry that is a prefix of a new one (same version) is dropped; one covered by an entry is not added', () => {
  const { cache, stats } = withStats(1 << 20);
  cache.insert(0, [1, 2, 3], filled([1, 2, 3]));
  cache.insert(1, [1, 2, 3], filled([1, 2, 3]));
  cache.insert(0, [1, 2, 3, 4, 5], filled([1, 2, 3, 4, 5]));
  assert.equal(stats().entries, 2, 'version 1 keeps its own entry');
  assert.equal(stats().bytes, 8 * perToken);
  cache.insert(0, [1, 2], filled([1, 2]));
  cache.insert(0, [1, 2, 3, 4, 5], filled([1, 2, 3, 4, 5]));
  assert.equal(stats().entries, 2);
  assert.equal(stats().evictions, 0, 'redundant entries are not evictions');
  assert.deepEqual([...cache.longest(0, [1, 2, 3, 4, 5, 6], 6)!.entry.ids], [1, 2, 3, 4, 5]);
});

test('least recently used entries are evicted first, to stay within the byte budget', () => {
  const { cache, stats } = withStats(3 * 10 * perToken);
  const a = seq(100, 10),
    b = seq(200, 10),
    c = seq(300, 10),
    d = seq(400, 10);
  cache.insert(0, a, filled(a));
  cache.insert(0, b, filled(b));
  cache.insert(0, c, filled(c));
  cache.touch(cache.longest(0, a, 10)!.entry); // a used after c: b is now the oldest
  cache.insert(0, d, filled(d));
  assert.equal(cache.longest(0, b, 10), null, 'b was the least recently used');
  for (const x of [a, c, d]) assert.equal(cache.longest(0, x, 10)!.length, 10);
  const budgetBytes = 30 * perToken;
  assert.deepEqual(stats(), { hitTokens: 0, missTokens: 0, bytes: budgetBytes, entries: 3, evictions: 1, budgetBytes });

  const big = seq(500, 25);
  cache.insert(0, big, filled(big));
  assert.equal(stats().evictions, 4, 'a 25-token entry leaves room for none of the 10-token ones');
  assert.equal(stats().bytes, 25 * perToken);
  cache.insert(0, seq(600, 31), filled(seq(600, 31)));
  assert.equal(cache.longest(0, seq(600, 31), 31), null, 'an entry larger than the whole budget is not kept');
  assert.equal(stats().entries, 1);
});

test('a handed-over cache with much unused capacity is trimmed: the budget counts the bytes held', () => {
  const { cache, stats } = withStats(1 << 20);
  const ids = seq(1, 10);
  cache.insert(0, ids, filled(ids, 64));
  assert.equal(stats().bytes, 10 * perToken);
  const entry = cache.longest(0, ids, 10)!.entry;
  assert.equal(entry.cache.capacity, 10);
  assert.equal((entry.cache.k[1] as Float32Array)[9 * entry.cache.rowSize], 10, 'the rows survive the trim');
  cache.insert(0, seq(50, 60), filled(seq(50, 60), 64));
  assert.equal(stats().bytes, 10 * perToken + 64 * perToken, 'a cache nearly full keeps its capacity (no copy)');
});

test('retiring a version drops its entries and no other', () => {
  const { cache, stats } = withStats(1 << 20);
  cache.insert(0, [1, 2, 3], filled([1, 2, 3]));
  cache.insert(2, [1, 2, 3], filled([1, 2, 3]));
  cache.insert(2, [4, 5], filled([4, 5]));
  cache.retire(2);
  assert.equal(cache.longest(2, [1, 2, 3], 3), null);
  assert.equal(cache.longest(2, [4, 5], 2), null);
  assert.equal(cache.longest(0, [1, 2, 3], 3)!.length, 3);
  assert.equal(stats().entries, 1);
  assert.equal(stats().bytes, 3 * perToken);
});

test('budget 0 disables the cache: nothing is stored', () => {
  const { cache, stats } = withStats(0);
  assert.equal(cache.enabled, false);
  cache.insert(0, [1, 2, 3], filled([1, 2, 3]));
  assert.equal(cache.longest(0, [1, 2, 3, 4], 3), null);
  assert.deepEqual(stats(), { hitTokens: 0, missTokens: 0, bytes: 0, entries: 0, evictions: 0, budgetBytes: 0 });
});

test('hit and miss counters add up; counters pass 2^32 without wrapping', () => {
  const { cache, stats } = withStats(1 << 20);
  cache.countHit(1000);
  cache.countHit(24);
  cache.countMiss(7);
  cache.countMiss(2 ** 33);
  assert.equal(stats().hitTokens, 1024);
  assert.equal(stats().missTokens, 2 ** 33 + 7);
});

test('the default budget: a few full-context sequences, capped by a quarter of the memory', () => {
  const contexts = defaultKvCacheBytes(cfg, 'f32', 1e15) / (cfg.maxPositionEmbeddings * perToken);
  assert.equal(contexts, 4);
  assert.equal(defaultKvCacheBytes(cfg, 'bf16', 1e15), (4 * cfg.maxPositionEmbeddings * perToken) / 2, 'bf16 rows');
  assert.equal(defaultKvCacheBytes(cfg, 'f32', 4_000_000), 1_000_000);
  const qwen06 = modelConfigOf({ family: 'qwen3', ...PRESETS['qwen3-0.6b']! }, [0]);
  assert.equal(kvBytesPerToken(qwen06), 229_376);
  assert.equal(defaultKvCacheBytes(qwen06, 'bf16', 16 * 2 ** 30), 4 * 2 ** 30);
});
