// HTTP to one inference server: JSON requests, server-sent event streams, the API key from the
// environment, and errors that say which server answered what. A server that refuses the
// connection or does not answer in time is a ServerUnavailableError, which the router fails over
// on; any other failure (an error status, a body that breaks the protocol) is a RemoteServerError.

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

  constructor(baseUrl: string, opts: ServerClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.headers = { 'content-type': 'application/json' };
    if (opts.apiKey) this.headers.authorization = `Bearer ${opts.apiKey}`;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** POSTs `body` and returns the answer's text (some admin routes answer plain text). */
  async postText(path: string, body: unknown, timeoutMs = this.timeoutMs): Promise<string> {
    return (await this.send(path, body, undefined, timeoutMs)).text();
  }

  /** POSTs `body` and returns the parsed JSON answer (null for an empty 200). */
  async postJson(path: string, body: unknown, signal?: AbortSignal, timeoutMs = this.timeoutMs): Promise<unknown> {
    const res = await this.send(path, body, signal, timeoutMs);
    const text = await res.text();
    if (text === '') return null;
    try {
      return JSON.parse(text);
    } catch {
      throw new RemoteServerError(`${this.baseUrl}${path} answered with a body that is not JSON: ${clip(text)}`);
    }
  }

  /** POSTs `body` and yields each `data:` event's JSON until `[DONE]` or the end of the stream. */
  async *postStream(path: string, body: unknown, signal: AbortSignal): AsyncGenerator<unknown> {
    const res = await this.send(path, body, signal, this.timeoutMs);
    if (!res.body) throw new RemoteServerError(`${this.baseUrl}${path} answered without a body`);
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      let end = buffered.indexOf('\n');
      while (end >= 0) {
        const line = buffered.slice(0, end).replace(/\r$/, '');
        buffered = buffered.slice(end + 1);
        end = buffered.indexOf('\n');
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        try {
          yield JSON.parse(data);
        } catch {
          throw new RemoteServerError(`${this.baseUrl}${path} streamed an event that is not JSON: ${clip(data)}`);
        }
      }
    }
  }

  private async send(path: string, body: unknown, signal: AbortSignal | undefined, timeoutMs: number) {
    const url = `${this.baseUrl}${path}`;
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), timeoutMs);
    const onAbort = () => timeout.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: this.headers,
        body: JSON.stringify(body),
        signal: timeout.signal,
      });
    } catch (e) {
      if (signal?.aborted) throw e;
      if (timeout.signal.aborted) throw new ServerUnavailableError(`${url}: no answer within ${timeoutMs} ms`);
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      throw new ServerUnavailableError(`${url}: ${cause?.code ?? cause?.message ?? (e as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
    // The caller's signal keeps aborting the body after the headers came.
    if (!res.ok) {
      signal?.removeEventListener('abort', onAbort);
      const text = await res.text().catch(() => '');
      const error = new RemoteServerError(`${url} answered ${res.status}: ${clip(errorMessage(text))}`);
      if (res.status === 503) throw new ServerUnavailableError(error.message);
      throw error;
    }
    return res;
  }
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
