// The embedded engine's prefix cache, read at scrape time from its shared counters: the hit rate is
// rate(hit_tokens) / (rate(hit_tokens) + rate(miss_tokens)).

import type { Registry } from 'prom-client';
import type { PrefixCacheStats } from '../engine/local/engine.js';
import { scrapedCounter, scrapedGauge } from './scraped.js';

export function registerPrefixCacheMetrics(registry: Registry, stats: () => PrefixCacheStats): void {
  const families: [kind: 'counter' | 'gauge', name: string, help: string, field: keyof PrefixCacheStats][] = [
    ['counter', 'hit_tokens_total', 'Prompt tokens whose keys and values came from the cache', 'hitTokens'],
    ['counter', 'miss_tokens_total', 'Prompt tokens computed (generation prompts and scored sequences)', 'missTokens'],
    ['counter', 'evictions_total', 'Entries dropped to stay within the budget', 'evictions'],
    ['gauge', 'bytes', 'Bytes of keys and values the cache holds', 'bytes'],
    ['gauge', 'entries', 'Entries the cache holds', 'entries'],
    ['gauge', 'budget_bytes', 'The byte budget (0: the cache is off)', 'budgetBytes'],
  ];
  for (const [kind, suffix, help, field] of families) {
    const register = kind === 'counter' ? scrapedCounter : scrapedGauge;
    register(registry, { name: `openclaw_rl_prefix_cache_${suffix}`, help }, () => stats()[field]);
  }
}
