// HTTP to one inference server: JSON requests, server-sent event streams, the API key from the
// environment, and errors that say which server answered what. A server that refuses the
// connection or does not answer in time is a ServerUnavailableError, which the router fails over
// on; any other failure (an error status, a body that breaks the protocol) is a RemoteServerError.

import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/** The environment variable holding the inference servers' bearer key (never a flag: `ps` shows flags). */
export const SAMPLER_KEY_ENV = 'OPENCLAW_RL_SAMPLER_API_KEY';

export function samplerKeyFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env[SAMPLER_KEY_ENV] || undefined;
}

export class RemoteServerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RemoteServerError';
  }
}

/** Nothing reached the server, or it did not answer: another server may take the request. */
export class ServerUnavailableError extends RemoteServerError {
  constructor(message: string) {
    super(message);
    this.name = 'ServerUnavailableError';
  }
}

export interface ServerClientOptions {
  apiKey?: string;
  /** Longest wait for the response's status line, in ms (default 30 s); a stream may then run longer. */
  timeoutMs?: number;
}

export class ServerClient {
  readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  // node:http with kept-alive sockets rather than fetch: undici's web streams and Response objects
  // cost serve more CPU per streamed request than the protocol work itself (bench:samplers overhead).
  private readonly agent: HttpAgent;
  private readonly request: typeof httpRequest;

  constructor(baseUrl: string, opts: ServerClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.headers = { 'content-type': 'application/json' };
    if (opts.apiKey) this.headers.authorization = `Bearer ${opts.apiKey}`;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    const secure = new URL(this.baseUrl).protocol === 'https:';
    this.agent = secure ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
    this.request = secure ? httpsRequest : httpRequest;
  }

  /** POSTs `body` and returns the answer's text (some admin routes answer plain text). */
  async postText(path: string, body: unknown, timeoutMs = this.timeoutMs): Promise<string> {
    return textOf(await this.send(path, body, undefined, timeoutMs));
  }

  /** POSTs `body` and returns the parsed JSON answer (null for an empty 200). */
  async postJson(path: string, body: unknown, signal?: AbortSignal, timeoutMs = this.timeoutMs): Promise<unknown> {
    const text = await textOf(await this.send(path, body, signal, timeoutMs));
    if (text === '') return null;
    try {
      return JSON.parse(text);
    } catch {
      throw new RemoteServerError(`${this.baseUrl}${path} answered with a body that is not JSON: ${clip(text)}`);
    }
  }

  /**
   * POSTs `body` and yields each `data:` event's JSON until `[DONE]`; returns at the end of the
   * body, read whole so that the connection goes back to the pool.
   */
  async *postStream(path: string, body: unknown, signal: AbortSignal): AsyncGenerator<unknown> {
    const res = await this.send(path, body, signal, this.timeoutMs);
    const onAbort = () => res.destroy(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    let done = false;
    try {
      res.setEncoding('utf8');
      let buffered = '';
      for await (const chunk of res as AsyncIterable<string>) {
        buffered += chunk;
        let end = buffered.indexOf('\n');
        while (end >= 0) {
          const line = buffered.slice(0, end).replace(/\r$/, '');
          buffered = buffered.slice(end + 1);
          end = buffered.indexOf('\n');
          if (done || !line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          if (data === '[DONE]') {
            done = true;
            continue;
          }
          try {
            yield JSON.parse(data);
          } catch {
            throw new RemoteServerError(`${this.baseUrl}${path} streamed an event that is not JSON: ${clip(data)}`);
          }
        }
      }
    } catch (e) {
      if (signal.aborted) throw signal.reason;
      if (e instanceof RemoteServerError) throw e;
      throw new RemoteServerError(`${this.baseUrl}${path}: the stream broke off: ${(e as Error).message}`);
    } finally {
      signal.removeEventListener('abort', onAbort);
      // A caller that stopped early or a broken stream: the connection is closed, not reused.
      if (!res.complete) res.destroy();
    }
  }

  /**
   * The answer once its status line came (its body still to be read); an error status is thrown
   * with the server's message.
   */
  private async send(
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
    timeoutMs: number,
  ): Promise<IncomingMessage> {
    const url = `${this.baseUrl}${path}`;
    if (signal?.aborted) throw signal.reason;
    const payload = JSON.stringify(body);
    let res: IncomingMessage;
    try {
      res = await this.exchange(url, payload, signal, timeoutMs);
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      if (e instanceof ServerUnavailableError) throw e;
      const code = (e as NodeJS.ErrnoException).code;
      throw new ServerUnavailableError(`${url}: ${code ?? (e as Error).message}`);
    }
    const status = res.statusCode ?? 0;
    if (status < 200 || status > 299) {
      const text = await textOf(res).catch(() => '');
      const message = `${url} answered ${status}: ${clip(errorMessage(text))}`;
      throw status === 503 ? new ServerUnavailableError(message) : new RemoteServerError(message);
    }
    return res;
  }

  /**
   * One request, once more if a kept-alive socket turned out closed by the server (it may close an
   * idle connection just as a request goes out on it; nothing of the request was read then).
   */
  private exchange(url: string, payload: string, signal: AbortSignal | undefined, timeoutMs: number, retry = true) {
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = this.request(url, {
        method: 'POST',
        agent: this.agent,
        headers: { ...this.headers, 'content-length': Buffer.byteLength(payload) },
        ...(signal ? { signal } : {}),
      });
      const timer = setTimeout(
        () => req.destroy(new ServerUnavailableError(`${url}: no answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      let answered = false;
      req.on('response', (res) => {
        answered = true;
        clearTimeout(timer);
        resolve(res);
      });
      req.on('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        // After the status line, the answer's body reports the failure to its reader.
        if (answered) return;
        if (retry && req.reusedSocket && e.code === 'ECONNRESET' && !signal?.aborted) {
          resolve(this.exchange(url, payload, signal, timeoutMs, false));
        } else reject(e);
      });
      req.end(payload);
    });
  }
}

async function textOf(res: IncomingMessage): Promise<string> {
  res.setEncoding('utf8');
  let text = '';
  for await (const chunk of res as AsyncIterable<string>) text += chunk;
  return text;
}

/** The message of an OpenAI-style or FastAPI error body, else the body. */
function errorMessage(text: string): string {
  try {
    const v = JSON.parse(text) as {
      error?: { message?: string } | string;
      error_message?: string;
      message?: string;
      detail?: unknown;
    };
    if (typeof v.error === 'object' && v.error?.message) return v.error.message;
    if (typeof v.error_message === 'string' && v.error_message) return v.error_message;
    if (typeof v.error === 'string') return v.error;
    if (typeof v.message === 'string') return v.message;
    if (v.detail !== undefined) return typeof v.detail === 'string' ? v.detail : JSON.stringify(v.detail);
  } catch {}
  return text;
}

function clip(s: string): string {
  return s.length > 300 ? `${s.slice(0, 300)}...` : s;
}

/** Throws a RemoteServerError naming `what` unless `ok`. */
export function expectShape(ok: boolean, server: string, what: string): asserts ok {
  if (!ok) throw new RemoteServerError(`${server} answered outside its protocol: ${what}`);
}

/** `e` with `context` before its message, of the same kind (so the router still fails over). */
export function wrapped(e: unknown, context: string): Error {
  const message = `${context}: ${(e as Error).message}`;
  return e instanceof ServerUnavailableError ? new ServerUnavailableError(message) : new RemoteServerError(message);
}
