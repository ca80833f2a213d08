// The error answer of a request that failed: a GatewayError's status and body, or a 500 whose
// cause is logged (never sent). A response already under way is ended as it stands; a body not
// yet read is read and dropped first, so that the client sees the answer, not a reset.

import type { IncomingMessage } from 'node:http';
import { asGatewayError, GatewayError } from './errors.js';
import { sendJson, type Context } from './http.js';
import type { Logger } from './log.js';

/** Answers `ctx` with the error `e` stands for, and records its status in the access log's fields. */
export async function replyWithError(ctx: Context, e: unknown, logger: Logger, bodyTimeoutMs: number): Promise<void> {
  const error = asGatewayError(e, ctx.requestId || 'unknown');
  if (error.status >= 500 && !(e instanceof GatewayError))
    logger.event('error', { requestId: ctx.requestId, cause: (e as Error)?.stack ?? String(e) });
  ctx.log.status = error.status;
  ctx.log.error = error.code ?? error.type;
  const { req, res } = ctx;
  if (res.headersSent || res.destroyed) {
    if (!res.writableEnded && !res.destroyed) res.end();
    return;
  }
  // A body we did not read (refused early, too large) is read to its end and dropped before the
  // reply: closing a socket with unread bytes resets the connection, and a client that sent the
  // whole body at once (as SDKs do) would see the reset, not this reply. A client still sending
  // after bodyTimeoutMs (or one that stalled: 408) gets the reply and its connection closed.
  const unread = !req.complete;
  if (unread && error.code !== 'request_timeout') await drain(req, bodyTimeoutMs);
  if (res.destroyed) return;
  const stillUnread = !req.complete;
  sendJson(ctx, error.status, error.toBody(), { ...error.headers, ...(unread ? { connection: 'close' } : {}) });
  if (stillUnread) res.once('finish', () => req.socket.destroy());
}

/** Reads and drops the rest of a request body; resolves at its end, when the socket closes, or after ms. */
function drain(req: IncomingMessage, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      req.off('end', done).off('error', done).off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    req.on('end', done).on('error', done).on('close', done).resume();
  });
}
