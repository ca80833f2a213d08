// Bearer API keys. Each presented key is compared with every configured key in constant time
// (SHA-256 digests of both, so neither length nor content leaks through timing), and the loop
// never stops early. With no keys configured the middleware lets everything through; the server
// refuses to bind off loopback in that case (config.ts).

import { createHash, timingSafeEqual } from 'node:crypto';
import { GatewayError } from '../errors.js';
import type { Middleware } from '../http.js';

export interface BearerAuthOptions {
  keys: readonly string[];
  /** Names the credential in error messages (`API key`, `admin key`). */
  what?: string;
}

const digest = (key: string) => createHash('sha256').update(key, 'utf8').digest();

/** Constant-time membership test of `presented` in `keys`. */
export function keyMatches(presented: string, keys: readonly Buffer[]): boolean {
  const p = digest(presented);
  let ok = false;
  for (const k of keys) ok = timingSafeEqual(p, k) || ok;
  return ok;
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
  return match ? match[1] : undefined;
}

export function bearerAuth({ keys, what = 'API key' }: BearerAuthOptions): Middleware {
  const digests = keys.map(digest);
  return async function bearerAuthMiddleware(ctx, next) {
    if (digests.length > 0) {
      const token = bearerToken(ctx.req.headers.authorization);
      const challenge = { 'www-authenticate': 'Bearer' };
      if (token === undefined) {
        throw new GatewayError(401, `missing ${what}: send the header "Authorization: Bearer <${what}>"`, {
          code: 'missing_api_key',
          headers: challenge,
        });
      }
      if (!keyMatches(token, digests)) {
        throw new GatewayError(
          401,
          `invalid ${what}: check the key configured in your client against the server's config`,
          { code: 'invalid_api_key', headers: challenge },
        );
      }
    }
    await next();
  };
}
