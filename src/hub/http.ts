// HTTP for the Hub: fetch with redirects followed by hand, a deadline for the response headers
// and an idle deadline for the body, and the caller's AbortSignal.
//
// Redirects are followed here rather than by fetch because resolve/ answers for weights are 302s
// to a CDN on another host: the Authorization header must go to the Hub and never to the CDN (its
// URL is already signed), and the Range header must survive every hop.

import { TimeoutError } from './errors.js';

export interface HttpOptions {
  token?: string;
  /** Most time to wait for response headers, and for each piece of the body after that. */
  timeoutMs: number;
  signal?: AbortSignal;
  userAgent: string;
}

export interface HubResponse {
  status: number;
  headers: Headers;
  /** Where the body came from, after redirects. */
  url: string;
  /** Headers of the first (Hub) response, before any redirect: X-Repo-Commit, X-Linked-Etag. */
  hubHeaders: Headers;
  /** The body in pieces; each piece restarts the idle deadline. Ends the request when done. */
  chunks(): AsyncIterable<Uint8Array>;
  json(): Promise<unknown>;
  /** Drops the connection without reading the body. */
  close(): void;
}

const MAX_REDIRECTS = 10;

/** GET (or HEAD) with the Hub's conventions. Throws network errors; HTTP errors are returned. */
export async function hubFetch(
  url: string,
  opts: HttpOptions,
  extraHeaders: Record<string, string> = {},
): Promise<HubResponse> {
  const controller = new AbortController();
  const onAbort = () => controller.abort(opts.signal!.reason);
  if (opts.signal?.aborted) throw opts.signal.reason;
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  let current = url;
  let timer: NodeJS.Timeout | undefined;
  const arm = (what: string) => {
    clearTimeout(timer);
    timer = setTimeout(
      () =>
        controller.abort(
          new TimeoutError(`no answer from ${new URL(current).host} for ${opts.timeoutMs / 1000} s while ${what}`),
        ),
      opts.timeoutMs,
    );
  };
  const finish = () => {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
  };
  // An aborted fetch rejects with a DOMException; report the reason we aborted with instead.
  const rethrow = (e: unknown): never => {
    finish();
    throw controller.signal.aborted ? controller.signal.reason : e;
  };

  // Every wait races this: undici (Node 20) can leave a body read pending forever when the request
  // is aborted after the whole body arrived, which would hang a stopped download for good.
  const aborted = new Promise<never>((_, reject) => {
    controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
  });
  aborted.catch(() => {});

  const origin = new URL(url).origin;
  let first: Headers | undefined;
  try {
    for (let hop = 0; ; hop++) {
      arm('waiting for the response');
      const sameOrigin = new URL(current).origin === origin;
      const headers: Record<string, string> = {
        'user-agent': opts.userAgent,
        // Sizes and ranges are of the stored bytes: no transparent compression.
        'accept-encoding': 'identity',
        ...extraHeaders,
      };
      if (opts.token && sameOrigin) headers.authorization = `Bearer ${opts.token}`;
      const res = await Promise.race([
        fetch(current, { headers, redirect: 'manual', signal: controller.signal }),
        aborted,
      ]);
      first ??= res.headers;
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        void res.body?.cancel().catch(() => {});
        if (hop >= MAX_REDIRECTS) throw new Error(`more than ${MAX_REDIRECTS} redirects from ${url}`);
        current = new URL(location, current).toString();
        continue;
      }
      const hubHeaders = first;
      return {
        status: res.status,
        headers: res.headers,
        url: current,
        hubHeaders,
        async *chunks() {
          if (!res.body) return finish();
          const reader = res.body.getReader();
          try {
            for (;;) {
              arm('downloading');
              const { done, value } = await Promise.race([reader.read(), aborted]);
              if (done) return;
              yield value;
            }
          } catch (e) {
            rethrow(e);
          } finally {
            finish();
            void reader.cancel().catch(() => {}); // a no-op after the end; frees the socket otherwise
          }
        },
        async json() {
          try {
            return JSON.parse(await Promise.race([res.text(), aborted])) as unknown;
          } catch (e) {
            return rethrow(e);
          } finally {
            finish();
          }
        },
        close() {
          finish();
          controller.abort(new Error('closed'));
        },
      };
    }
  } catch (e) {
    return rethrow(e);
  }
}

/** `{endpoint}/{repoId}/resolve/{revision}/{path}`, each segment escaped, the slashes kept. */
export function resolveUrl(endpoint: string, repoId: string, revision: string, path: string): string {
  const enc = (s: string) => s.split('/').map(encodeURIComponent).join('/');
  return `${endpoint}/${enc(repoId)}/resolve/${encodeURIComponent(revision)}/${enc(path)}`;
}

/** `{endpoint}/api/models/{repoId}/revision/{revision}?blobs=true`: the commit and every file with its size and hashes. */
export function revisionInfoUrl(endpoint: string, repoId: string, revision: string): string {
  const enc = (s: string) => s.split('/').map(encodeURIComponent).join('/');
  return `${endpoint}/api/models/${enc(repoId)}/revision/${encodeURIComponent(revision)}?blobs=true`;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
