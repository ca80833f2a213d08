// The little HTTP framework the gateway needs on top of node:http: a per-request context,
// middleware composed as an onion (hono's compose), a path router, and JSON replies.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { GatewayError } from './errors.js';

export interface Context {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  /** Path without the query string. */
  path: string;
  params: Record<string, string>;
  /** The matched route's pattern (`/admin/sessions/:id`), set once routed: a label without ids or text. */
  route?: string;
  requestId: string;
  startedAt: number;
  /** Parsed JSON body (set by the jsonBody middleware). */
  json?: unknown;
  /** Aborted when the client goes away before the response is complete. */
  signal: AbortSignal;
  /** Fields for the access log line, added to by handlers. Never conversation text. */
  log: Record<string, unknown>;
}

export type Handler = (ctx: Context) => Promise<void> | void;
export type Middleware = (ctx: Context, next: () => Promise<void>) => Promise<void>;

/** Runs middleware in order around the handler; calling next() twice is a bug and throws. */
export function compose(middleware: readonly Middleware[], handler: Handler): Handler {
  return (ctx) => {
    let last = -1;
    const dispatch = async (i: number): Promise<void> => {
      if (i <= last) throw new Error('next() called more than once in one middleware');
      last = i;
      if (i === middleware.length) return handler(ctx);
      return middleware[i]!(ctx, () => dispatch(i + 1));
    };
    return dispatch(0);
  };
}

export function sendJson(ctx: Context, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  ctx.res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  ctx.res.end(text);
}

interface Route {
  method: string;
  pattern: string;
  segments: string[];
  handler: Handler;
}

/**
 * Exact paths plus `:name` segments, and a last `:name*` segment that takes the rest of the path
 * (model ids like Qwen/Qwen3-0.6B contain a slash); a known path with the wrong method is a 405.
 */
export class Router {
  private readonly routes: Route[] = [];

  on(method: string, pattern: string, handler: Handler): this {
    this.routes.push({ method, pattern, segments: pattern.split('/').filter(Boolean), handler });
    return this;
  }

  match(method: string, path: string): { handler: Handler; params: Record<string, string>; pattern: string } {
    const parts = path.split('/').filter(Boolean);
    let pathKnown = false;
    for (const route of this.routes) {
      const params = matchSegments(route.segments, parts);
      if (!params) continue;
      pathKnown = true;
      if (route.method === method) return { handler: route.handler, params, pattern: route.pattern };
    }
    if (pathKnown) throw new GatewayError(405, `${method} is not allowed on ${path}`, { code: 'method_not_allowed' });
    throw new GatewayError(
      404,
      `no route ${method} ${path}: the API is under /v1 (POST /v1/chat/completions, GET /v1/models)`,
      { code: 'unknown_route' },
    );
  }
}

function matchSegments(pattern: string[], parts: string[]): Record<string, string> | undefined {
  const rest =
    pattern.length > 0 && pattern[pattern.length - 1]!.startsWith(':') && pattern[pattern.length - 1]!.endsWith('*');
  if (rest ? parts.length < pattern.length : pattern.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    if (p.startsWith(':')) {
      const last = rest && i === pattern.length - 1;
      try {
        params[p.slice(1, last ? -1 : undefined)] = (last ? parts.slice(i) : [parts[i]!])
          .map(decodeURIComponent)
          .join('/');
      } catch {
        return undefined;
      }
    } else if (p !== parts[i]) return undefined;
  }
  return params;
}
