// Errors of the Hub download, each with a code for callers (the CLI) and a message that says what
// to do. Network failures are classified here so that "this machine is offline" reads as such
// instead of as a stack of undici internals.

export type HubErrorCode =
  | 'bad-spec' // neither an existing folder nor an owner/name id
  | 'offline' // DNS, refused connection, timeout before any answer
  | 'network' // a download broke off or stalled, and its retries did too
  | 'auth' // 401 or 403: private or gated, token missing or without access
  | 'not-found' // no such repo, revision or file
  | 'unsupported' // the repo has no weights or tokenizer the engine can load
  | 'checksum' // the bytes did not match the listed size or hash, twice
  | 'not-cached' // offline mode and the snapshot is not in the cache
  | 'no-space' // the cache's disk cannot hold the download
  | 'http'; // any other HTTP or protocol failure

export class HubError extends Error {
  /** The HTTP status behind the error, when there was one. */
  readonly status: number | undefined;
  constructor(
    readonly code: HubErrorCode,
    message: string,
    options: { cause?: unknown; status?: number } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'HubError';
    this.status = options.status;
  }
}

/** Raised for a timeout of ours, so it classifies like the socket-level ETIMEDOUT. */
export class TimeoutError extends Error {
  readonly code = 'ETIMEDOUT';
  constructor(message: string) {
    super(message);
    this.name = 'TimeoutError';
  }
}

/** The first errno-style code in an error's cause chain (fetch wraps socket errors in TypeError). */
export function networkCode(e: unknown): string | undefined {
  for (let cur: unknown = e, depth = 0; cur && depth < 5; depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

/** Innermost message, e.g. "getaddrinfo ENOTFOUND huggingface.co" rather than "fetch failed". */
export function networkDetail(e: unknown): string {
  let msg = e instanceof Error ? e.message : String(e);
  for (let cur: unknown = (e as { cause?: unknown })?.cause, depth = 0; cur && depth < 5; depth++) {
    if (cur instanceof Error && cur.message) msg = cur.message;
    cur = (cur as { cause?: unknown }).cause;
  }
  return msg;
}

// Failures to get any answer at all from the server: the machine is offline, the name does not
// resolve, a firewall drops or refuses the connection. Retrying these in a loop only delays the
// message the user needs.
const UNREACHABLE = new Set([
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'ECONNREFUSED',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'ENETDOWN',
  'EHOSTDOWN',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
]);

export function isUnreachable(e: unknown): boolean {
  const code = networkCode(e);
  return code !== undefined && UNREACHABLE.has(code);
}

/** Errors worth retrying during a transfer: the connection broke or stalled after it worked. */
export function isTransient(e: unknown): boolean {
  if (e instanceof HubError) return e.status === 429 || (e.status !== undefined && e.status >= 500);
  const code = networkCode(e);
  if (code !== undefined) return UNREACHABLE.has(code) || code.startsWith('UND_ERR');
  // undici reports a body cut short as a bare TypeError('terminated').
  return e instanceof TypeError && /terminated|other side closed/i.test(e.message);
}

export function offlineError(endpoint: string, repoId: string, cause: unknown): HubError {
  return new HubError(
    'offline',
    `cannot reach ${endpoint} to download ${repoId} (${networkDetail(cause)}). This machine may be offline: ` +
      'download the model folder elsewhere and pass its path to --model, or set HF_ENDPOINT to a mirror.',
    { cause },
  );
}

export interface HttpErrorContext {
  endpoint: string;
  repoId: string;
  revision: string;
  /** Whether a token was sent: the advice differs. */
  hadToken: boolean;
  /** What was being fetched, e.g. "the file list" or "config.json". */
  what: string;
  /** The spec could also have been a local folder that does not exist. */
  couldBeLocalPath: boolean;
}

/**
 * Maps an HTTP failure to advice. The Hub answers 401 for private, gated and missing repos alike
 * when no token is sent, and says which in its X-Error-Code header (RepoNotFound, GatedRepo,
 * RevisionNotFound, EntryNotFound), so that header wins over the status.
 */
export function httpError(status: number, headers: Headers, ctx: HttpErrorContext): HubError {
  const err = (kind: HubErrorCode, message: string) => new HubError(kind, message, { status });
  const code = headers.get('x-error-code') ?? '';
  const serverSays = headers.get('x-error-message');
  const detail = `HTTP ${status}${code ? ` ${code}` : ''}${serverSays ? `: ${serverSays}` : ''}`;
  const page = `${ctx.endpoint}/${ctx.repoId}`;
  const tokenAdvice = ctx.hadToken
    ? 'the token in HF_TOKEN does not have access to it'
    : 'set HF_TOKEN to an access token of an account that has access (https://huggingface.co/settings/tokens)';
  if (code === 'GatedRepo') {
    return err(
      'auth',
      `${ctx.repoId} is a gated model (${detail}): accept its conditions on ${page} and ${ctx.hadToken ? 'make sure the token in HF_TOKEN belongs to that account' : 'set HF_TOKEN to an access token of that account'}.`,
    );
  }
  if (code === 'RevisionNotFound') {
    return err(
      'not-found',
      `${ctx.repoId} has no revision "${ctx.revision}" (${detail}); use a branch, tag or commit of ${page}.`,
    );
  }
  if (code === 'EntryNotFound') {
    return err('not-found', `${ctx.repoId}@${ctx.revision} has no ${ctx.what} (${detail}).`);
  }
  const localHint = ctx.couldBeLocalPath ? `, and there is no local folder "${ctx.repoId}"` : '';
  if (code === 'RepoNotFound' || status === 401 || (status === 404 && ctx.what === 'the file list')) {
    return err(
      code === 'RepoNotFound' || status === 404 ? 'not-found' : 'auth',
      `${ctx.repoId} was not found on ${ctx.endpoint} (${detail})${localHint}. Check the model id; if it is a private or gated model, ${tokenAdvice}.`,
    );
  }
  if (status === 403) {
    return err(
      'auth',
      `access to ${ctx.repoId} was refused (${detail}): it may be gated or private, and ${tokenAdvice}.`,
    );
  }
  if (status === 404) {
    return err('not-found', `${ctx.repoId}@${ctx.revision}: ${ctx.what} was not found (${detail}).`);
  }
  return err('http', `${ctx.endpoint} answered ${detail} for ${ctx.what} of ${ctx.repoId}@${ctx.revision}.`);
}
