// The dashboard's routes. The page and its files are a static shell, readable without a key (they
// hold no data); every figure comes from the admin JSON routes below, which the page calls with
// the admin key the operator typed (Authorization: Bearer, kept in the tab's sessionStorage).
// A bearer header is never sent by the browser on its own, so another site cannot make a
// logged-in browser act on these routes (no cookies, no CSRF).
//
//   GET /dashboard, /dashboard/:file   the page, app.js, app.css, uPlot (admin routes enabled)
//   GET /admin/steps?after=N&limit=M   training steps after step N, with the judge's figures between steps
//   GET /admin/sessions?limit=N&after=C the most recently active sessions, a page at a time: `next`
//                                      is the cursor of the page after (null on the last)
//   GET /admin/sessions/:id            one session's turns: verdicts, votes, hints, samples; text only
//                                      when the server runs with dashboardContent (--dashboard-content)

import { recentSessions, sessionView, type SessionCursor } from '../../store/dashboard-sessions.js';
import { stepHistory } from '../../store/dashboard-steps.js';
import type { Store } from '../../store/store.js';
import { GatewayError, invalid } from '../errors.js';
import { compose, sendJson, type Context, type Middleware, type Router } from '../http.js';
import { ASSET_HEADERS, dashboardAsset } from './assets.js';

export interface DashboardDeps {
  store: Store;
  /** Conversation text in the admin routes' answers (the operator's choice; off by default). */
  showText: boolean;
  /** Refuses while no admin key is configured. */
  adminEnabled: Middleware;
  /** Checks the admin key. */
  admin: Middleware;
}

const NO_STORE = { 'cache-control': 'no-store' };

export function dashboardRoutes(router: Router, deps: DashboardDeps): void {
  const { store, showText, adminEnabled, admin } = deps;
  const page = (name: string) => (ctx: Context) => sendAsset(ctx, name);
  router
    .on('GET', '/dashboard', compose([adminEnabled], page('index.html')))
    .on(
      'GET',
      '/dashboard/:file',
      compose([adminEnabled], (ctx) => sendAsset(ctx, ctx.params.file!)),
    )
    .on(
      'GET',
      '/admin/steps',
      compose([adminEnabled, admin], (ctx) => {
        const q = query(ctx);
        const after = intParam(q, 'after', 0, 0, Number.MAX_SAFE_INTEGER);
        const limit = intParam(q, 'limit', 500, 1, 5000);
        sendJson(ctx, 200, { steps: stepHistory(store.db, after, limit) }, NO_STORE);
      }),
    )
    .on(
      'GET',
      '/admin/sessions',
      compose([adminEnabled, admin], (ctx) => {
        const q = query(ctx);
        const limit = intParam(q, 'limit', 50, 1, 1000);
        const page = recentSessions(store.db, limit, cursorParam(q));
        const next = page.next && `${page.next.lastSeenAt}:${page.next.id}`;
        sendJson(ctx, 200, { text: showText, sessions: page.sessions, next }, NO_STORE);
      }),
    )
    .on(
      'GET',
      '/admin/sessions/:id',
      compose([adminEnabled, admin], (ctx) => {
        const id = ctx.params.id!;
        ctx.log.sessionId = id;
        const view = sessionView(store.db, id, showText);
        if (!view) throw new GatewayError(404, `no session "${id}" in the store`, { code: 'session_not_found' });
        sendJson(ctx, 200, view, NO_STORE);
      }),
    );
}

function sendAsset(ctx: Context, name: string): void {
  const asset = dashboardAsset(name);
  if (!asset)
    throw new GatewayError(404, `the dashboard has no file "${name}": open /dashboard`, { code: 'unknown_route' });
  ctx.res.writeHead(200, { 'content-type': asset.contentType, 'content-length': asset.body.length, ...ASSET_HEADERS });
  ctx.res.end(asset.body);
}

function query(ctx: Context): URLSearchParams {
  return new URL(ctx.req.url ?? '/', 'http://localhost').searchParams;
}

/** `after` as the routes write it: the last session's activity time (ms), a colon, its id. */
function cursorParam(q: URLSearchParams): SessionCursor | null {
  const raw = q.get('after');
  if (raw === null) return null;
  const m = /^(\d{1,16}):(.+)$/s.exec(raw);
  if (!m)
    throw invalid('after', `query parameter after must be the "next" of a previous page, got ${JSON.stringify(raw)}`);
  return { lastSeenAt: Number(m[1]), id: m[2]! };
}

function intParam(q: URLSearchParams, name: string, fallback: number, min: number, max: number): number {
  const raw = q.get(name);
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max)
    throw invalid(name, `query parameter ${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return n;
}
