// Gives every request an id: the client's `x-request-id` when it is a sane token, otherwise a new
// one. It is echoed in the response header and named in every log line and 500 message.

import { randomUUID } from 'node:crypto';
import type { Middleware } from '../http.js';

export interface RequestIdOptions {
  /** Header read and written (default `x-request-id`). */
  header?: string;
}

const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * 24 random hex digits: a UUID's, without its version and variant digits. randomUUID draws from a
 * pool, where randomBytes costs a system call per id.
 */
function randomHex24(): string {
  const hex = randomUUID().replaceAll('-', '');
  return hex.slice(0, 12) + hex.slice(20);
}

export function requestId({ header = 'x-request-id' }: RequestIdOptions = {}): Middleware {
  return async function requestIdMiddleware(ctx, next) {
    const given = ctx.req.headers[header];
    ctx.requestId = typeof given === 'string' && SANE.test(given) ? given : `req_${randomHex24()}`;
    ctx.res.setHeader(header, ctx.requestId);
    await next();
  };
}
