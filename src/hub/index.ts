// resolveModel: `--model` as a local folder or a Hugging Face model id.
//
//   resolveModel('models/tiny')             -> 'models/tiny' (checked to exist)
//   resolveModel('Qwen/Qwen3-0.6B')         -> <cache>/models--Qwen--Qwen3-0.6B/snapshots/<commit>
//   resolveModel('Qwen/Qwen3-0.6B@v1.0')    -> the same for a branch, tag or commit
//
// A Hub id is resolved from the cache alone when refs/<revision> names a snapshot that has every
// file the engine needs: no network, so a machine that downloaded once keeps working offline, and
// the base model does not change under recorded sessions and trained adapters when the branch
// moves upstream (ask for `refresh` to follow it). Otherwise the Hub is asked for the revision's
// commit and file list (one request), and the needed files are downloaded into the cache.

import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir, readFile, readdir, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { RepoCache, defaultCacheDir, hfHome, isCommitHash } from './cache.js';
import { ensureBlob, type BlobContext } from './download.js';
import {
  HubError,
  httpError,
  isTransient,
  isUnreachable,
  networkCode,
  networkDetail,
  offlineError,
  type HttpErrorContext,
} from './errors.js';
import {
  WEIGHTS_INDEX,
  blobKey,
  isSafeRelativePath,
  parseRevisionInfo,
  planDownload,
  shardsOf,
  type RemoteFile,
  type RevisionInfo,
} from './files.js';
import { hubFetch, revisionInfoUrl, sleep, type HttpOptions } from './http.js';
import { ProgressTracker, type Progress } from './progress.js';

export { HubError, type HubErrorCode } from './errors.js';
export { defaultCacheDir } from './cache.js';
export type { FileProgress, FileState, Progress } from './progress.js';

export interface ResolveOptions {
  /** Default: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. */
  cacheDir?: string;
  /** Default: $HF_ENDPOINT, else https://huggingface.co. */
  endpoint?: string;
  /** Default: $HF_TOKEN, else the token file huggingface_hub's login writes ($HF_HOME/token). '' sends none. */
  token?: string;
  /** Branch, tag or commit; default main. An `@revision` in the spec takes precedence. */
  revision?: string;
  onProgress?: (p: Progress) => void;
  signal?: AbortSignal;
  /** Ask the Hub even when the revision is cached (a branch may have moved). Falls back to the cache when offline. */
  refresh?: boolean;
  /** Use the cache only. Default: on when $HF_HUB_OFFLINE is 1/true/yes/on. */
  offline?: boolean;
  /** Files downloaded at once (default 4). */
  concurrency?: number;
  /** Retries of a broken transfer, each resuming (default 5). */
  retries?: number;
  /** First retry delay, doubled each time (default 1000 ms). */
  retryDelayMs?: number;
  /** Longest wait for an answer, and for each piece of a body (default 30000 ms). */
  timeoutMs?: number;
  /** Re-hash blobs already in the cache against the Hub's listing (default false: they were checked when written). */
  verifyCached?: boolean;
}

export type ModelSpec = { kind: 'path'; path: string } | { kind: 'hub'; repoId: string; revision?: string };

const ID_PART = /^[A-Za-z0-9_](?:[\w.-]*[A-Za-z0-9_])?$/;

/** An existing path, a path-looking string, or owner/name[@revision]. */
export function parseModelSpec(spec: string): ModelSpec {
  if (existsSync(spec)) return { kind: 'path', path: spec };
  if (/^[.~/\\]/.test(spec) || spec.includes('\\')) return { kind: 'path', path: spec };
  const at = spec.indexOf('@');
  const id = at < 0 ? spec : spec.slice(0, at);
  const revision = at < 0 ? undefined : spec.slice(at + 1);
  const parts = id.split('/');
  const validId =
    parts.length === 2 &&
    parts.every((p) => ID_PART.test(p)) &&
    !id.includes('--') &&
    !id.includes('..') &&
    id.length <= 96;
  if (!validId || (revision !== undefined && !isValidRevision(revision))) {
    throw new HubError(
      'bad-spec',
      `"${spec}" is neither an existing model folder nor a Hugging Face model id (owner/name, optionally @revision)`,
    );
  }
  return revision === undefined ? { kind: 'hub', repoId: id } : { kind: 'hub', repoId: id, revision };
}

function isValidRevision(rev: string): boolean {
  return isSafeRelativePath(rev) && !/\s/.test(rev);
}

/** A local model folder for `spec`, downloading a Hub model into the cache first when needed. */
export async function resolveModel(spec: string, opts: ResolveOptions = {}): Promise<string> {
  const parsed = parseModelSpec(spec);
  if (parsed.kind === 'path') {
    const st = statSync(parsed.path, { throwIfNoEntry: false });
    if (!st) throw new HubError('bad-spec', `model folder ${parsed.path} does not exist`);
    if (!st.isDirectory())
      throw new HubError(
        'bad-spec',
        `${parsed.path} is a file; --model takes a model folder or a Hugging Face model id`,
      );
    return parsed.path;
  }
  const revision = parsed.revision ?? opts.revision ?? 'main';
  if (!isValidRevision(revision)) throw new HubError('bad-spec', `"${revision}" is not a valid revision`);
  return resolveHubModel(parsed.repoId, revision, opts, parsed.revision === undefined);
}

async function resolveHubModel(
  repoId: string,
  revision: string,
  opts: ResolveOptions,
  couldBeLocalPath: boolean,
): Promise<string> {
  const env = process.env;
  const cacheDir = opts.cacheDir ?? defaultCacheDir(env);
  const endpoint = (opts.endpoint ?? env.HF_ENDPOINT ?? 'https://huggingface.co').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]/.test(endpoint))
    throw new HubError('bad-spec', `the Hub endpoint "${endpoint}" is not an http(s) URL (HF_ENDPOINT?)`);
  const cache = new RepoCache(cacheDir, repoId);
  const known = isCommitHash(revision) ? revision : cache.readRef(revision);
  if (known && !opts.refresh && !opts.verifyCached && cache.snapshotState(known) === 'complete')
    return cache.snapshotDir(known);
  // A snapshot Python tools half-filled, or one we cannot re-check: better than nothing when offline.
  const fallback = () => (known && cache.snapshotState(known) !== 'missing' ? cache.snapshotDir(known) : undefined);

  const offline = opts.offline ?? /^(1|true|yes|on)$/i.test(env.HF_HUB_OFFLINE ?? '');
  if (offline) {
    const dir = fallback();
    if (dir) return dir;
    throw new HubError(
      'not-cached',
      `${repoId}@${revision} is not in the cache ${cacheDir}, and offline mode is on (HF_HUB_OFFLINE): ` +
        'unset it to download, or pass a local model folder to --model.',
    );
  }

  const token = opts.token !== undefined ? opts.token || undefined : defaultToken(env);
  // One controller for the whole resolve: the first failing file stops the others.
  const stop = new AbortController();
  const onAbort = () => stop.abort(opts.signal!.reason);
  if (opts.signal?.aborted) throw opts.signal.reason;
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const http: HttpOptions = {
    timeoutMs: opts.timeoutMs ?? 30_000,
    signal: stop.signal,
    userAgent: `openclaw-rl (node ${process.version})`,
    ...(token ? { token } : {}),
  };
  const errors: Omit<HttpErrorContext, 'what'> = {
    endpoint,
    repoId,
    revision,
    hadToken: token !== undefined,
    couldBeLocalPath,
  };
  try {
    let info: RevisionInfo;
    try {
      info = await fetchRevisionInfo(endpoint, repoId, revision, http, errors, opts.retryDelayMs ?? 1000);
    } catch (e) {
      if (opts.signal?.aborted || e instanceof HubError) throw e;
      if (!isUnreachable(e)) {
        const tls = /CERT|SSL|TLS/i.test(networkCode(e) ?? '')
          ? ' (behind a proxy that re-signs TLS, point NODE_EXTRA_CA_CERTS at its certificate)'
          : '';
        throw new HubError(
          'http',
          `cannot get the file list of ${repoId} from ${endpoint}: ${networkDetail(e)}${tls}`,
          { cause: e },
        );
      }
      const dir = fallback();
      if (dir) return dir;
      throw offlineError(endpoint, repoId, e);
    }
    const commit = info.commit;
    if (!opts.verifyCached && cache.snapshotState(commit) === 'complete') {
      await cache.writeRef(revision, commit);
      return cache.snapshotDir(commit);
    }
    const plan = planDownload(info, repoId);
    const progress = new ProgressTracker(repoId, commit, opts.onProgress);
    const ctx: BlobContext = {
      cache,
      commit,
      endpoint,
      http,
      errors,
      progress,
      retries: opts.retries ?? 5,
      retryDelayMs: opts.retryDelayMs ?? 1000,
      verifyCached: opts.verifyCached ?? false,
    };
    const fetchOne = async (f: RemoteFile, c: BlobContext = ctx) => {
      if ((await ensureBlob(f, c)) === 'cached') c.progress.setState(f.path, 'cached');
      await cache.linkIntoSnapshot(commit, f.path, blobKey(f));
    };
    await cache.tagCacheDir();
    await mkdir(join(cache.root, 'blobs'), { recursive: true });

    // The shard index comes first, unreported: it names the shards, and with them known the
    // progress total is right from the first report instead of jumping when they join.
    let weights: RemoteFile[];
    if (plan.index) {
      const quiet = new ProgressTracker(repoId, commit, undefined);
      quiet.add(plan.index.path, plan.index.size);
      await fetchOne(plan.index, { ...ctx, progress: quiet });
      weights = shardsOf(await readFile(join(cache.snapshotDir(commit), WEIGHTS_INDEX), 'utf8'), info, repoId);
    } else {
      weights = plan.files.filter((f) => f.path.endsWith('.safetensors'));
    }
    const small = plan.files.filter((f) => !weights.includes(f));
    for (const f of [...(plan.index ? [plan.index] : []), ...small, ...weights]) progress.add(f.path, f.size);
    if (plan.index) progress.setState(plan.index.path, 'done');
    await checkDiskSpace(cache, weights, repoId);
    const concurrency = Math.max(1, opts.concurrency ?? 4);
    await pool([...small, ...weights], concurrency, (f) => fetchOne(f), stop);

    for (const p of plan.absent) await cache.markAbsent(commit, p);
    await cache.writeRef(revision, commit);
    return cache.snapshotDir(commit);
  } catch (e) {
    // Report the caller's abort as such, not as whatever it interrupted.
    if (opts.signal?.aborted) throw opts.signal.reason;
    throw e;
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
  }
}

async function fetchRevisionInfo(
  endpoint: string,
  repoId: string,
  revision: string,
  http: HttpOptions,
  errors: Omit<HttpErrorContext, 'what'>,
  delayMs: number,
): Promise<RevisionInfo> {
  const url = revisionInfoUrl(endpoint, repoId, revision);
  for (let attempt = 0; ; attempt++) {
    const res = await hubFetch(url, http, { accept: 'application/json' });
    if (res.status === 200) {
      const body = await res.json().catch((e: unknown) => {
        if (e instanceof SyntaxError)
          throw new HubError('http', `${url} did not answer with JSON (is HF_ENDPOINT a Hub or a mirror of it?)`);
        throw e;
      });
      return parseRevisionInfo(body, url);
    }
    res.close();
    const err = httpError(res.status, res.headers, { ...errors, what: 'the file list' });
    // Only server trouble is retried here: a network failure means offline, reported at once.
    if (!isTransient(err) || attempt >= 2) throw err;
    await sleep(delayMs * 2 ** attempt, http.signal);
  }
}

/** Runs fn over items, `limit` at a time; the first failure aborts the rest and is thrown. */
async function pool<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<void>,
  stop: AbortController,
): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (!failure && !stop.signal.aborted && next < items.length) {
      const item = items[next++]!;
      try {
        await fn(item);
      } catch (e) {
        failure ??= { error: e };
        stop.abort(e);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.error;
  if (stop.signal.aborted) throw stop.signal.reason;
}

/** Refuses up front when the weights cannot fit, counting what is already cached or partly downloaded. */
async function checkDiskSpace(cache: RepoCache, files: readonly RemoteFile[], repoId: string): Promise<void> {
  const blobs = join(cache.root, 'blobs');
  const names = await readdir(blobs).catch(() => [] as string[]);
  let needed = 0;
  for (const f of files) {
    const key = blobKey(f);
    if (await stat(join(blobs, key)).catch(() => undefined)) continue;
    let partial = 0;
    for (const n of names)
      if (n.startsWith(`${key}.`) && n.endsWith('.incomplete'))
        partial = Math.max(partial, (await stat(join(blobs, n)).catch(() => ({ size: 0 }))).size);
    needed += Math.max(0, f.size - partial);
  }
  if (needed === 0) return;
  const fs = await statfs(blobs).catch(() => undefined);
  if (!fs) return;
  const free = fs.bavail * fs.bsize;
  if (free < needed) {
    throw new HubError(
      'no-space',
      `${repoId} needs ${gb(needed)} more in ${cache.cacheDir}, which has ${gb(free)} free: free some space, or set HF_HUB_CACHE to a folder on a larger disk.`,
    );
  }
}

const gb = (n: number) => `${(n / 1e9).toFixed(2)} GB`;

/** $HF_TOKEN (or the older $HUGGING_FACE_HUB_TOKEN), else the file `huggingface-cli login` / `hf auth login` writes. */
function defaultToken(env: NodeJS.ProcessEnv): string | undefined {
  const fromEnv = env.HF_TOKEN ?? env.HUGGING_FACE_HUB_TOKEN;
  if (fromEnv !== undefined) return fromEnv.trim() || undefined;
  const file = env.HF_TOKEN_PATH || join(hfHome(env), 'token');
  try {
    return readFileSync(file, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
