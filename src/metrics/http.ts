// The serving side, fed as events happen: each finished request (latency, time to first token,
// tokens, the recorded turn) and each closure the recorder wrote. Labels are bounded: a route's
// pattern (never its path), the turn kind, a status code, a closure or finish reason.

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { GatewayLive, RequestRecord } from '../gateway/metrics-route.js';
import type { RecorderEvent } from '../sessions/recorder-contract.js';
import { CLOSURE_REASONS } from '../types.js';

/** Request latencies: from milliseconds (health checks) to minutes (long generations). */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const FIRST_TOKEN_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const FINISH_REASONS = new Set(['stop_token', 'stop_sequence', 'length', 'context', 'cancelled']);

export class HttpMetrics {
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly duration: Histogram<'method' | 'route' | 'kind'>;
  private readonly firstToken: Histogram<'route' | 'kind'>;
  private readonly promptTokens: Counter<'kind'>;
  private readonly cachedTokens: Counter<'kind'>;
  private readonly completionTokens: Counter<'kind'>;
  private readonly turns: Counter<'kind' | 'finish'>;
  private readonly closed: Counter<'reason'>;
  private readonly inflight: Gauge;
  private readonly sessions: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'openclaw_rl_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status code',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'openclaw_rl_http_request_duration_seconds',
      help: 'Time from a request arriving to its last byte sent (a stream: its end), by route and turn kind',
      labelNames: ['method', 'route', 'kind'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.firstToken = new Histogram({
      name: 'openclaw_rl_time_to_first_token_seconds',
      help: 'Time from a chat request reaching the sampler (prompt rendered) to its first sampled token',
      labelNames: ['route', 'kind'],
      buckets: FIRST_TOKEN_BUCKETS,
      registers,
    });
    const tokens = (name: string, help: string) =>
      new Counter({ name, help, labelNames: ['kind'], registers }) as Counter<'kind'>;
    this.promptTokens = tokens('openclaw_rl_prompt_tokens_total', 'Prompt tokens of answered turns, by turn kind');
    this.cachedTokens = tokens(
      'openclaw_rl_cached_prompt_tokens_total',
      'Prompt tokens of answered turns served from the prefix cache (usage.prompt_tokens_details.cached_tokens)',
    );
    this.completionTokens = tokens(
      'openclaw_rl_completion_tokens_total',
      'Completion tokens of answered turns (usage.completion_tokens), by turn kind',
    );
    this.turns = new Counter({
      name: 'openclaw_rl_turns_total',
      help: 'Turns answered once committed (a session opted out of learning: answered, not stored), by kind and finish',
      labelNames: ['kind', 'finish'],
      registers,
    });
    this.closed = new Counter({
      name: 'openclaw_rl_turns_closed_total',
      help: 'Main turns closed (closure written to the store), by reason',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of CLOSURE_REASONS) this.closed.inc({ reason }, 0);
    this.inflight = new Gauge({
      name: 'openclaw_rl_inflight_requests',
      help: 'Chat requests being served now',
      registers,
    });
    this.sessions = new Gauge({
      name: 'openclaw_rl_sessions',
      help: 'Sessions tracked in memory now',
      registers,
    });
  }

  request(r: RequestRecord): void {
    // A path no route matched is the client's text: it never becomes a label, nor does its method.
    const route = r.route ?? 'unmatched';
    const method = r.route === null ? 'other' : r.method;
    const kind = r.log.kind === 'main' || r.log.kind === 'side' ? r.log.kind : 'none';
    this.requests.inc({ method, route, status: String(r.status) });
    this.duration.observe({ method, route, kind }, r.seconds);
    if (typeof r.log.firstTokenMs === 'number') this.firstToken.observe({ route, kind }, r.log.firstTokenMs / 1000);
    // completionTokens is logged once the turn is committed: the usage the response reported.
    if (typeof r.log.completionTokens !== 'number') return;
    const finish = typeof r.log.finish === 'string' && FINISH_REASONS.has(r.log.finish) ? r.log.finish : 'other';
    this.turns.inc({ kind, finish });
    this.completionTokens.inc({ kind }, r.log.completionTokens);
    if (typeof r.log.promptTokens === 'number') this.promptTokens.inc({ kind }, r.log.promptTokens);
    this.cachedTokens.inc({ kind }, typeof r.log.cachedTokens === 'number' ? r.log.cachedTokens : 0);
  }

  recorderEvent(e: RecorderEvent): void {
    if (e.event === 'turn_closed') this.closed.inc({ reason: e.reason });
  }

  live(l: GatewayLive): void {
    this.inflight.set(l.inflightRequests);
    this.sessions.set(l.sessions);
  }
}
