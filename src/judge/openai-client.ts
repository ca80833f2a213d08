// A judge behind any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, llama.cpp, Ollama...).
// Failures become JudgeClientErrors whose messages say what to check; they name the endpoint and
// the status, never the conversation, and the key only travels in the Authorization header.

import { contentToText, type ChatMessage, type MessageContent } from '../chat/messages.js';
import { JudgeClientError, transientStatus } from './errors.js';
import type { CompleteOptions, JudgeClient } from './types.js';

export interface OpenAIJudgeOptions {
  /** The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <key>`; omit for local servers without auth. */
  apiKey?: string;
  model: string;
  /** Per request; judgeTurn usually sets a tighter one through the signal. Default 120 s. */
  timeoutMs?: number;
  /** OpenAI's newest models want `max_completion_tokens`; most servers take `max_tokens` (default). */
  maxTokensField?: 'max_tokens' | 'max_completion_tokens';
  /** For tests; default the global fetch. */
  fetch?: typeof fetch;
}

/** The part of a chat completion response we read; servers differ, so everything is optional. */
interface CompletionBody {
  choices?: { message?: { content?: MessageContent; refusal?: string | null }; finish_reason?: string | null }[];
  error?: { message?: string } | string;
}

export class OpenAIJudgeClient implements JudgeClient {
  readonly name: string;
  private readonly endpoint: string;
  /** The endpoint without credentials or query, for messages. */
  private readonly where: string;
  private readonly fetch: typeof fetch;

  constructor(private readonly opts: OpenAIJudgeOptions) {
    let url: URL;
    try {
      url = new URL(opts.baseUrl);
      url.pathname = `${url.pathname.replace(/\/+$/, '')}/chat/completions`; // a query (e.g. api-version) stays
    } catch {
      throw new Error(
        `judge base URL "${opts.baseUrl}" is not a URL; give the API root, e.g. http://127.0.0.1:8000/v1`,
      );
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new Error(`judge base URL must be http(s), got ${url.protocol}`);
    if (url.username || url.password)
      throw new Error(
        'judge base URL must not contain credentials; give the key as the judge API key (sent as a Bearer token)',
      );
    if (opts.model.trim() === '')
      throw new Error('the judge model name is empty; give the model id the endpoint serves');
    this.endpoint = url.href;
    this.where = `${url.origin}${url.pathname}`; // no query: it may carry a token
    this.name = `openai:${opts.model}`;
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  async complete(messages: ChatMessage[], opts: CompleteOptions): Promise<string> {
    const timeoutMs = this.opts.timeoutMs ?? 120_000;
    const local = new AbortController();
    const timer = setTimeout(() => local.abort(), timeoutMs);
    const onAbort = () => local.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (opts.signal?.aborted) local.abort();
    try {
      const body: Record<string, unknown> = {
        model: this.opts.model,
        messages,
        temperature: opts.temperature,
        [this.opts.maxTokensField ?? 'max_tokens']: opts.maxTokens,
        stream: false,
      };
      if (opts.seed !== undefined) body.seed = opts.seed;
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
      // Reading the body is inside the try too: a server can stall or hang up halfway through it.
      const res = await this.fetch(this.endpoint, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: local.signal,
      });
      const text = await res.text();
      if (!res.ok) throw this.statusError(res.status, text);
      return this.answer(text);
    } catch (e) {
      if (e instanceof JudgeClientError) throw e;
      if (opts.signal?.aborted) throw opts.signal.reason ?? e; // the caller stopped waiting: not a judge failure
      if (local.signal.aborted)
        throw new JudgeClientError('timeout', `the judge at ${this.where} did not answer within ${timeoutMs} ms`, true);
      throw this.connectionError(e);
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  private answer(text: string): string {
    let body: CompletionBody;
    try {
      body = JSON.parse(text) as CompletionBody;
    } catch {
      throw new JudgeClientError(
        'http',
        `the judge at ${this.where} answered with something that is not JSON; check that the base URL is an OpenAI-compatible API root (it usually ends in /v1)`,
        false,
      );
    }
    const choice = Array.isArray(body?.choices) ? body.choices[0] : undefined;
    if (!choice || typeof choice !== 'object') {
      throw new JudgeClientError(
        'http',
        `the judge at ${this.where} answered without choices; is "${this.opts.model}" a chat model?`,
        false,
      );
    }
    const refusal = choice.message?.refusal;
    if (typeof refusal === 'string' && refusal.trim() !== '')
      throw new JudgeClientError('refused', `the judge model "${this.opts.model}" declined to answer`, false);
    if (choice.finish_reason === 'content_filter')
      throw new JudgeClientError('refused', `the judge at ${this.where} filtered the answer (content_filter)`, false);
    const content = choice.message?.content;
    return Array.isArray(content) ? contentToText(content) : typeof content === 'string' ? content : '';
  }

  private statusError(status: number, text: string): JudgeClientError {
    const said = serverMessage(text);
    const tail = said ? ` The server said: ${said}` : '';
    const what =
      status === 401 || status === 403
        ? `rejected the credentials (HTTP ${status}); check the judge API key.`
        : status === 404
          ? `was not found (HTTP 404); check the base URL (usually ending in /v1) and the model name "${this.opts.model}".`
          : status === 429
            ? 'is rate limiting (HTTP 429); lower the judge concurrency or the votes per turn.'
            : status >= 500
              ? `failed (HTTP ${status}).`
              : `rejected the request (HTTP ${status}).`;
    return new JudgeClientError('http', `the judge at ${this.where} ${what}${tail}`, transientStatus(status), status);
  }

  private connectionError(e: unknown): JudgeClientError {
    // fetch reports network failures as TypeError("fetch failed") with the socket error as cause.
    const cause = (e as { cause?: { code?: string; message?: string } })?.cause;
    const code =
      cause?.code ?? (e as { code?: string })?.code ?? (cause?.message || (e as Error)?.message || 'unknown error');
    return new JudgeClientError(
      'connection',
      `cannot get an answer from the judge at ${this.where} (${code}); is the server running and the URL right?`,
      true,
    );
  }
}

/** The `error.message` of an OpenAI-style error body, shortened; null when there is none. */
function serverMessage(text: string): string | null {
  try {
    const body = JSON.parse(text) as CompletionBody;
    const message = typeof body.error === 'string' ? body.error : body.error?.message;
    if (typeof message === 'string' && message.trim() !== '') return message.trim().slice(0, 300);
  } catch {
    // Not JSON: an HTML error page or a proxy's text; its first line is often the useful part.
  }
  const line = text.trim().split('\n')[0]?.trim() ?? '';
  return line === '' ? null : line.slice(0, 200);
}
