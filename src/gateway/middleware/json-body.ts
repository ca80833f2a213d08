// Reads the request body up to a limit and parses it as JSON, whatever the content-type says
// (curl -d sends form encoding; what matters is that the body parses). A declared Content-Length over the
// limit is refused before reading; a chunked body is counted as it arrives (RFC 9112 lets a body
// come without a length), and reading stops at the limit. The body must be complete within
// `timeoutMs` of the request's arrival: a client that sends headers and then nothing gets a 408
// instead of holding its connection for Node's 300 s request timeout.

import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors.js';
import type { Middleware } from '../http.js';

export interface JsonBodyOptions {
  /** Largest accepted body in bytes. */
  maxBytes: number;
  /** Milliseconds from the request's arrival (Context.startedAt) to the body's last byte. */
  timeoutMs: number;
  /** The server's count of body bytes buffered at once, with its limit (config.maxBufferedBodyBytes). */
  buffered: BufferedBodyBytes;
}

/** Bytes of bodies being read right now, over every request of one server. */
export class BufferedBodyBytes {
  used = 0;
  constructor(readonly limit: number) {}
}

export function jsonBody({ maxBytes, timeoutMs, buffered }: JsonBodyOptions): Middleware {
  const tooLarge = () =>
    new GatewayError(
      413,
      `request body is larger than the limit of ${maxBytes} bytes: shorten the conversation or raise maxBodyBytes in the server config`,
      { code: 'request_too_large' },
    );
  return async function jsonBodyMiddleware(ctx, next) {
    const declared = Number(ctx.req.headers['content-length'] ?? NaN);
    if (declared > maxBytes) throw tooLarge();
    const tooSlow = () =>
      new GatewayError(
        408,
        `the request body did not arrive within ${timeoutMs / 1000} s: send it at once, right after the headers`,
        { code: 'request_timeout' },
      );
    const deadline = ctx.startedAt + timeoutMs - performance.now();
    const held = { bytes: 0 };
    try {
      const text = (await readBody(ctx.req, maxBytes, deadline, tooLarge, tooSlow, buffered, held)).toString('utf8');
      if (text.trim() === '')
        throw new GatewayError(400, 'request body is empty: send a JSON object', { code: 'invalid_json' });
      try {
        ctx.json = JSON.parse(text);
      } catch (e) {
        throw new GatewayError(400, `request body is not valid JSON: ${(e as Error).message}`, {
          code: 'invalid_json',
        });
      }
    } finally {
      // The raw body is garbage once parsed (or refused): it no longer counts against the budget.
      buffered.used -= held.bytes;
    }
    await next();
  };
}

/** Collects the body; stops listening (without destroying the socket) at the limit or the deadline. */
function readBody(
  req: IncomingMessage,
  maxBytes: number,
  deadlineMs: number,
  tooLarge: () => GatewayError,
  tooSlow: () => GatewayError,
  buffered: BufferedBodyBytes,
  held: { bytes: number },
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(
      () => {
        cleanup();
        reject(tooSlow());
      },
      Math.max(0, deadlineMs),
    );
    const cleanup = () => {
      clearTimeout(timer);
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        cleanup();
        return void reject(tooLarge());
      }
      if (buffered.used + chunk.length > buffered.limit) {
        cleanup();
        return void reject(
          new GatewayError(
            503,
            `the server is reading ${buffered.used} bytes of request bodies at once, ` +
              `its limit (maxBufferedBodyBytes ${buffered.limit}); retry shortly`,
            { code: 'server_busy' },
          ),
        );
      }
      buffered.used += chunk.length;
      held.bytes += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks));
    };
    const onError = (e: Error) => {
      cleanup();
      reject(new GatewayError(400, `the request body could not be read: ${e.message}`, { code: 'body_read_error' }));
    };
    const onClose = () => {
      if (req.complete) return;
      cleanup();
      reject(
        new GatewayError(400, 'the client closed the connection before the body was complete', {
          code: 'body_read_error',
        }),
      );
    };
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
  });
}
