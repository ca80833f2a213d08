// The gateway: routes, middleware and lifecycle around one model backend and one store.
//
//   GET    /healthz                  alive (no auth)
//   GET    /readyz                   model loaded and store open (no auth)
//   GET    /v1/models                served model ids (no auth: OpenClaw calls it without a key)
//   GET    /v1/models/:id*           one of them; the id may contain slashes (Qwen/Qwen3-0.6B)
//   POST   /v1/chat/completions      API key; the recorded route (chat.ts)
//   POST   /v1/feedback              API key; an outcome for a session or a reward for a turn (feedback.ts)
//   GET    /admin/status             admin key; serving version, training steps, queues (GatewayOptions.status)
//   DELETE /admin/sessions/:id       admin key; deletes a session and all its data (admin-sessions.ts)
//   GET    /admin/sessions/:id/export admin key; everything recorded about a session, as one JSON document
//   GET    /metrics                  admin or metrics key; Prometheus text format (metrics-route.ts, src/metrics/)
//   GET    /admin/versions, POST /admin/versions/rollback   admin key; see admin-versions.ts
//   GET    /dashboard, /admin/steps, /admin/sessions[/:id]   the dashboard and its data (dashboard/routes.ts)

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { TurnRecorder } from '../sessions/recorder.js';
import type { Store } from '../store/store.js';
import type { ChatBackend } from './backend.js';
import { chatCompletions } from './chat.js';
import { CheckQueue } from './check-queue.js';
import type { GatewayConfig } from './config.js';
import { deleteSession, exportSession } from './admin-sessions.js';
import { listVersions, rollbackVersion, type VersionsAdmin } from './admin-versions.js';
import { GatewayError } from './errors.js';
import { replyWithError } from './error-reply.js';
import { feedbackHandler } from './feedback.js';
import { dashboardRoutes } from './dashboard/routes.js';
import { compose, Router, sendJson, type Context, type Handler, type Middleware } from './http.js';
import { silentLogger, type Logger } from './log.js';
import { metricsRoute, type GatewayMetrics } from './metrics-route.js';
import { bearerAuth } from './middleware/auth.js';
import { BufferedBodyBytes, jsonBody } from './middleware/json-body.js';
import { requestId } from './middleware/request-id.js';

export interface GatewayOptions {
  backend: ChatBackend;
  store: Store;
  config: GatewayConfig;
  logger?: Logger;
  now?: () => number;
  /** Tool-call id factory (tests make ids deterministic). */
  newToolCallId?: () => string;
  /** What GET /admin/status answers (serve: the serving version, the learning loop's summary). */
  status?: () => object;
  /** Prometheus metrics, fed with each request and recorder event and served at GET /metrics. */
  metrics?: GatewayMetrics;
  /** The versions list and rollback (serve with learning on). */
  versions?: VersionsAdmin;
}

export class Gateway {
  readonly recorder: TurnRecorder;
  readonly server: Server;
  private readonly router = new Router();
  private readonly handle: Handler;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly checks: CheckQueue;
  private readonly sweeper: NodeJS.Timeout;
  private inflight = 0;
  private lastRequestAt = 0;
  private closing = false;
  /** Open connections and how many requests each has in progress (for a prompt shutdown). */
  private readonly sockets = new Map<Socket, number>();
  private readonly bufferedBodies: BufferedBodyBytes;

  /** Bytes of request bodies being read right now, over all connections (bounded by maxBufferedBodyBytes). */
  bufferedBodyBytes(): number {
    return this.bufferedBodies.used;
  }

  constructor(private readonly opts: GatewayOptions) {
    const { config, store, backend } = opts;
    this.bufferedBodies = new BufferedBodyBytes(config.maxBufferedBodyBytes);
    this.logger = opts.logger ?? silentLogger;
    this.now = opts.now ?? Date.now;
    this.recorder = new TurnRecorder(
      store,
      {
        kind: { sideModels: config.sideModels, mainModels: config.mainModels, defaultKind: config.defaultTurnKind },
        idleMs: config.sessionIdleSeconds * 1000,
        maxSessions: config.maxSessions,
      },
      (e) => {
        this.logger.event(e.event, { ...e });
        opts.metrics?.recorderEvent(e);
      },
    );
    const api = bearerAuth({ keys: config.apiKeys });
    const admin = bearerAuth({ keys: config.adminKeys, what: 'admin key' });
    this.checks = new CheckQueue(
      (results) => {
        if (store.isOpen) store.setRetemplates(results);
      },
      (e) =>
        this.logger.event('error', {
          message: 'token-exactness check failed',
          cause: (e as Error)?.stack ?? String(e),
        }),
      () => this.inflight > 0 || performance.now() - this.lastRequestAt < 20,
    );
    const chat = chatCompletions({
      backend,
      recorder: this.recorder,
      logger: this.logger,
      now: this.now,
      streamIntervalMs: config.streamIntervalMs,
      checkLater: (id, compute) => this.checks.push(id, compute),
      ...(opts.newToolCallId ? { newToolCallId: opts.newToolCallId } : {}),
    });
    const sessions = { store, recorder: this.recorder, logger: this.logger };
    const feedback = feedbackHandler({ store, recorder: this.recorder, logger: this.logger, now: this.now });
    const body = () =>
      jsonBody({ maxBytes: config.maxBodyBytes, timeoutMs: config.bodyTimeoutMs, buffered: this.bufferedBodies });
    const route = (middleware: Middleware[], handler: Handler) => compose(middleware, handler);
    this.router
      .on(
        'GET',
        '/healthz',
        route([], (ctx) => sendJson(ctx, 200, { status: 'ok' })),
      )
      .on(
        'GET',
        '/readyz',
        route([], (ctx) => this.ready(ctx)),
      )
      .on(
        'GET',
        '/v1/models',
        route([], (ctx) => sendJson(ctx, 200, { object: 'list', data: this.models() })),
      )
      .on(
        'GET',
        '/v1/models/:id*',
        route([], (ctx) => this.model(ctx)),
      )
      // A request slot is taken once the body has arrived: a client that sends headers and stalls
      // holds a connection until bodyTimeoutMs, never a slot. admit() refuses early, without reading.
      .on('POST', '/v1/chat/completions', route([api, this.admit(), body(), this.limit()], chat))
      .on('POST', '/v1/feedback', route([api, this.admit(), body(), this.limit()], feedback))
      .on(
        'GET',
        '/admin/status',
        route([this.adminEnabled(), admin], (ctx) => sendJson(ctx, 200, this.status())),
      )
      .on(
        'DELETE',
        '/admin/sessions/:id',
        route([this.adminEnabled(), admin], (ctx) => deleteSession(ctx, sessions)),
      )
      .on(
        'GET',
        '/admin/sessions/:id/export',
        route([this.adminEnabled(), admin], (ctx) => exportSession(ctx, sessions)),
      )
      .on(
        'GET',
        '/metrics',
        metricsRoute(config, opts.metrics, () => ({
          inflightRequests: this.inflight,
          sessions: this.recorder.sessionCount,
        })),
      )
      .on(
        'GET',
        '/admin/versions',
        route([this.adminEnabled(), admin], (ctx) => listVersions(ctx, opts.versions)),
      )
      .on(
        'POST',
        '/admin/versions/rollback',
        route(
          [
            this.adminEnabled(),
            admin,
            jsonBody({ maxBytes: 4096, timeoutMs: config.bodyTimeoutMs, buffered: this.bufferedBodies }),
          ],
          (ctx) => rollbackVersion(ctx, opts.versions),
        ),
      );
    dashboardRoutes(this.router, {
      store,
      showText: config.dashboardContent,
      adminEnabled: this.adminEnabled(),
      admin,
    });
    this.handle = compose([requestId()], async (ctx) => {
      const { handler, params, pattern } = this.router.match(ctx.method, ctx.path);
      ctx.params = params;
      ctx.route = pattern;
      await handler(ctx);
    });
    this.server = createServer(
      {
        keepAliveTimeout: 65_000,
        // Headers get bodyTimeoutMs, the body bodyTimeoutMs more (jsonBody answers 408 first); Node
        // checks these every connectionsCheckingInterval (30 s by default, far longer than the limit).
        headersTimeout: config.bodyTimeoutMs,
        requestTimeout: 2 * config.bodyTimeoutMs + 1000,
        connectionsCheckingInterval: Math.min(1000, config.bodyTimeoutMs),
      },
      (req, res) => void this.dispatch(req, res),
    );
    this.server.maxConnections = config.maxConnections;
    this.server.on('connection', (socket: Socket) => {
      this.sockets.set(socket, 0);
      socket.once('close', () => this.sockets.delete(socket));
    });
    const sweepEvery = Math.min(config.sessionIdleSeconds * 500, 30_000);
    this.sweeper = setInterval(() => this.recorder.sweep(this.now()), sweepEvery).unref();
  }

  /** Restores live turns from the store, then listens. Resolves to the bound address. */
  async listen(): Promise<{ host: string; port: number }> {
    const restored = this.recorder.restore(this.now());
    if (restored > 0)
      this.logger.event('sessions_restored', { liveTurns: restored, sessions: this.recorder.sessionCount });
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.opts.config.port, this.opts.config.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const address = this.server.address() as AddressInfo;
    return { host: address.address, port: address.port };
  }

  /** Stops accepting, lets requests in flight finish (up to graceMs), then waits for background work. */
  async close(graceMs = 30_000): Promise<void> {
    this.closing = true;
    clearInterval(this.sweeper);
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    // Connections without a request in progress (kept alive, or opened and never used) are closed
    // now and as they become so; the others get up to graceMs to finish.
    const closeIdle = () => {
      for (const [socket, active] of this.sockets) if (active === 0) socket.destroy();
    };
    closeIdle();
    const sweep = setInterval(closeIdle, 50);
    const timer = setTimeout(() => this.server.closeAllConnections(), graceMs).unref();
    await closed;
    clearInterval(sweep);
    clearTimeout(timer);
    await this.settled();
  }

  /** Resolves when background work (queued closures, token-exactness checks) has finished. */
  async settled(): Promise<void> {
    await this.recorder.flushed();
    await this.checks.settled();
  }

  private async dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.lastRequestAt = performance.now();
    const socket = req.socket;
    this.sockets.set(socket, (this.sockets.get(socket) ?? 0) + 1);
    res.once('close', () => {
      if (this.sockets.has(socket)) this.sockets.set(socket, this.sockets.get(socket)! - 1);
    });
    const controller = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) controller.abort();
    });
    if (this.closing) res.shouldKeepAlive = false;
    const path = (req.url ?? '/').split('?')[0]!;
    const ctx: Context = {
      req,
      res,
      method: req.method ?? 'GET',
      path,
      params: {},
      requestId: '',
      startedAt: performance.now(),
      signal: controller.signal,
      log: {},
    };
    try {
      await this.handle(ctx);
    } catch (e) {
      await this.reply(ctx, e);
    } finally {
      const ms = performance.now() - ctx.startedAt;
      const status = (ctx.log.status as number | undefined) ?? res.statusCode;
      this.logger.event('request', {
        requestId: ctx.requestId || undefined,
        method: ctx.method,
        path,
        ms: Math.round(ms * 100) / 100,
        ...ctx.log,
        status,
      });
      this.opts.metrics?.request({
        method: ctx.method,
        route: ctx.route ?? null,
        status,
        seconds: ms / 1000,
        log: ctx.log,
      });
      if (!res.writableEnded && !res.destroyed) {
        // A client that went away gets nothing more; its connection must not linger half-answered.
        if (controller.signal.aborted) res.destroy();
        else if (!res.headersSent) void this.reply(ctx, new Error('handler returned without answering'));
        else res.end();
      }
    }
  }

  private reply(ctx: Context, e: unknown): Promise<void> {
    return replyWithError(ctx, e, this.logger, this.opts.config.bodyTimeoutMs);
  }

  /** Refuses before the body is read when the server could not serve the request anyway. */
  private admit(): Middleware {
    return async (_ctx, next) => {
      this.refuseIfFull();
      await next();
    };
  }

  private refuseIfFull(): void {
    const max = this.opts.config.maxConcurrentRequests;
    const headers = { 'retry-after': '1' };
    if (this.closing)
      throw new GatewayError(503, 'the server is shutting down: retry shortly', { code: 'shutting_down', headers });
    if (this.inflight >= max) {
      throw new GatewayError(503, `the server is at its limit of ${max} concurrent requests: retry shortly`, {
        code: 'overloaded',
        headers,
      });
    }
  }

  private limit(): Middleware {
    return async (_ctx, next) => {
      this.refuseIfFull();
      this.inflight++;
      try {
        await next();
      } finally {
        this.inflight--;
      }
    };
  }

  private ready(ctx: Context): void {
    const store = this.opts.store.isOpen;
    const ok = store && !this.closing;
    sendJson(ctx, ok ? 200 : 503, {
      status: ok ? 'ready' : 'not_ready',
      model: this.opts.backend.modelId,
      store,
      sessions: this.recorder.sessionCount,
    });
  }

  private models(): { id: string; object: 'model'; created: number; owned_by: string }[] {
    const { config, backend } = this.opts;
    const ids = [...new Set([backend.modelId, ...config.mainModels, ...config.sideModels])];
    return ids.map((id) => ({ id, object: 'model', created: 0, owned_by: 'openclaw-rl' }));
  }

  private model(ctx: Context): void {
    const found = this.models().find((m) => m.id === ctx.params.id);
    if (!found)
      throw new GatewayError(
        404,
        `model "${ctx.params.id}" is not listed; any id is accepted for chat, the listed ones are ${this.models()
          .map((m) => m.id)
          .join(', ')}`,
        { code: 'model_not_found' },
      );
    sendJson(ctx, 200, found);
  }

  private status(): object {
    return { inflight: this.inflight, sessions: this.recorder.sessionCount, ...this.opts.status?.() };
  }

  private adminEnabled(): Middleware {
    return async (_ctx, next) => {
      if (this.opts.config.adminKeys.length === 0)
        throw new GatewayError(
          403,
          'admin routes are disabled: set adminKeys in the config (or OPENCLAW_RL_ADMIN_KEYS) to enable them',
          { code: 'admin_disabled' },
        );
      await next();
    };
  }
}
