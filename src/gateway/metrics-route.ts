// GET /metrics: what the gateway hands the Prometheus metrics (src/metrics/) and how it serves them.
// The gateway reports each finished request and each recorder event; the metrics object renders
// the text exposition. Readable with an admin key or a metrics key (a scraper need not hold the
// admin key); with neither configured, or without a metrics object, the route is disabled.

import type { RecorderEvent } from '../sessions/recorder-contract.js';
import type { GatewayConfig } from './config.js';
import { GatewayError } from './errors.js';
import { compose, type Context, type Handler } from './http.js';
import { bearerAuth } from './middleware/auth.js';

/** One finished request, as the gateway saw it. */
export interface RequestRecord {
  method: string;
  /** The matched route's pattern (`/v1/models/:id*`), never the path; null when no route matched. */
  route: string | null;
  status: number;
  seconds: number;
  /** The access-log fields (Context.log): kind, promptTokens, completionTokens, cachedTokens, firstTokenMs... */
  log: Readonly<Record<string, unknown>>;
}

/** What the gateway knows at scrape time and nobody else does. */
export interface GatewayLive {
  inflightRequests: number;
  sessions: number;
}

export interface GatewayMetrics {
  request(r: RequestRecord): void;
  recorderEvent(e: RecorderEvent): void;
  exposition(live: GatewayLive): Promise<{ contentType: string; body: string }>;
}

export function metricsRoute(
  config: GatewayConfig,
  metrics: GatewayMetrics | undefined,
  live: () => GatewayLive,
): Handler {
  const keys = [...config.adminKeys, ...config.metricsKeys];
  const enabled = async (_ctx: Context, next: () => Promise<void>) => {
    if (keys.length === 0)
      throw new GatewayError(
        403,
        'metrics are disabled: set metricsKeys (OPENCLAW_RL_METRICS_KEYS, --metrics-key) or adminKeys ' +
          'to enable GET /metrics',
        { code: 'metrics_disabled' },
      );
    if (!metrics)
      throw new GatewayError(403, 'metrics are disabled: this server was started without them', {
        code: 'metrics_disabled',
      });
    await next();
  };
  return compose([enabled, bearerAuth({ keys, what: 'metrics or admin key' })], async (ctx) => {
    const { contentType, body } = await metrics!.exposition(live());
    ctx.res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
    ctx.res.end(body);
  });
}
