// The Prometheus metrics of one serve (one registry per server, never prom-client's global one):
// process metrics, the gateway's request families, and, where serve has them, the judge, the
// learning loop and the prefix cache. Each scrape reads the learning status once.

import { collectDefaultMetrics, Registry } from 'prom-client';
import type { PrefixCacheStats } from '../engine/local/engine.js';
import type { GatewayLive, GatewayMetrics, RequestRecord } from '../gateway/metrics-route.js';
import type { LearningStatus } from '../learn/status.js';
import type { RecorderEvent } from '../sessions/recorder-contract.js';
import { HttpMetrics } from './http.js';
import { registerJudgeMetrics } from './judge.js';
import { LearningEvents, registerLearningMetrics } from './learning.js';
import { registerPrefixCacheMetrics } from './engine.js';
import { PerScrape, scrapedGauge } from './scraped.js';

export interface ServeMetricsSources {
  /** The learning loop's status; absent when serve does not learn (null: not started yet). */
  learning?: () => LearningStatus | null;
  prefixCache?: () => PrefixCacheStats;
  /** The version serving requests when there is no learning loop to say so. */
  servingVersion?: () => number;
  /** Node's process metrics (CPU, memory, event loop lag, GC): once per process, so off in tests that start many. */
  processMetrics?: boolean;
}

export class ServeMetrics implements GatewayMetrics {
  readonly registry = new Registry();
  private readonly http: HttpMetrics;
  private readonly learningEvents: LearningEvents | null;
  private readonly learning: PerScrape<LearningStatus | null>;

  constructor(sources: ServeMetricsSources = {}) {
    const registry = this.registry;
    if (sources.processMetrics ?? true) collectDefaultMetrics({ register: registry });
    this.http = new HttpMetrics(registry);
    this.learning = new PerScrape(() => sources.learning?.() ?? null);
    const status = () => this.learning.get();
    const version = () => status()?.version ?? sources.servingVersion?.() ?? null;
    scrapedGauge(
      registry,
      { name: 'openclaw_rl_serving_version', help: 'The policy version new requests get' },
      version,
    );
    if (sources.learning) {
      registerLearningMetrics(registry, status);
      registerJudgeMetrics(registry, () => status()?.judge ?? null);
    }
    this.learningEvents = sources.learning ? new LearningEvents(registry) : null;
    if (sources.prefixCache) registerPrefixCacheMetrics(registry, sources.prefixCache);
  }

  request(r: RequestRecord): void {
    this.http.request(r);
  }

  recorderEvent(e: RecorderEvent): void {
    this.http.recorderEvent(e);
  }

  /** The learning loop's log events (batch_trained feeds the step and publication histograms). */
  learningEvent(name: string, fields: Record<string, unknown>): void {
    this.learningEvents?.event(name, fields);
  }

  async exposition(live: GatewayLive): Promise<{ contentType: string; body: string }> {
    this.http.live(live);
    const body = await this.learning.during(() => this.registry.metrics());
    // prom-client 15 writes NaN as `Nan`; the format (and OpenMetrics) spell it NaN. Only a
    // sample line's value can end a line so (prom-client writes no timestamps).
    return { contentType: this.registry.contentType, body: body.replace(/^([^#].*) Nan$/gm, '$1 NaN') };
  }
}
