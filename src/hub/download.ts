// One blob into the cache: resumable, checked, published by an atomic rename.
//
// Concurrency without locks: every download writes its own partial file,
//   blobs/<key>.<host>-<pid>-<random>.incomplete
// so two processes fetching the same blob never write to the same file; both check what they
// wrote and rename it to blobs/<key>, and the second rename replaces identical bytes. A partial is
// resumed only once its writer is gone: a failed or aborted download "parks" it under
// blobs/<key>.resume.incomplete, and the partial of a process that died (Ctrl-C, kill -9) is
// adopted when its pid no longer runs on this host, or, from another host sharing the cache, when
// it has not changed for ORPHAN_MS (a live writer here writes or gives up within its timeout).
// Adoption is a rename, which only one process can win. The cost of this design is that two
// processes starting the same download at once both download it; the cache is never corrupted.

import { createHash, randomBytes, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import { HubError, httpError, isTransient, networkDetail, type HttpErrorContext } from './errors.js';
import { blobKey, type RemoteFile } from './files.js';
import { hubFetch, resolveUrl, sleep, type HttpOptions } from './http.js';
import type { RepoCache } from './cache.js';
import type { ProgressTracker } from './progress.js';

export interface BlobContext {
  cache: RepoCache;
  commit: string;
  endpoint: string;
  http: HttpOptions;
  /** Retries of a transfer that broke or stalled, each resuming where it stopped. */
  retries: number;
  retryDelayMs: number;
  /** Re-hash blobs already in the cache instead of trusting them (they were checked when written). */
  verifyCached: boolean;
  progress: ProgressTracker;
  errors: Omit<HttpErrorContext, 'what'>;
}

const HOST_TAG = createHash('sha256').update(hostname()).digest('hex').slice(0, 8);
const PARKED = 'resume';
const ORPHAN_MS = 10 * 60_000;

/** The bytes did not match the listing; the file is deleted and downloaded once more. */
class Mismatch extends Error {}

/** Makes blobs/<key> hold `f`'s checked bytes. */
export async function ensureBlob(f: RemoteFile, ctx: BlobContext): Promise<'cached' | 'downloaded'> {
  const blob = ctx.cache.blobPath(blobKey(f));
  if (await blobIsGood(blob, f, ctx.verifyCached)) return 'cached';
  await mkdir(dirname(blob), { recursive: true });
  try {
    await download(f, blob, ctx);
  } catch (e) {
    if (!(e instanceof Mismatch)) throw e;
    // Once more from scratch: a byte flipped on the way (a proxy, bad RAM) should not recur.
    try {
      await download(f, blob, ctx);
    } catch (e2) {
      if (!(e2 instanceof Mismatch)) throw e2;
      throw new HubError(
        'checksum',
        `${f.path} of ${ctx.errors.repoId}@${ctx.commit} failed its check twice (${e2.message}); ` +
          'the download was deleted. Something between the Hub and this machine alters the bytes, or the Hub lists the wrong hash.',
      );
    }
  }
  return 'downloaded';
}

async function blobIsGood(blob: string, f: RemoteFile, rehash: boolean): Promise<boolean> {
  const st = await stat(blob).catch(() => undefined);
  if (!st) return false;
  if (st.size === f.size && (!rehash || digest(await hashFile(blob, f)) === expected(f))) return true;
  await rm(blob, { force: true }); // wrong bytes under a content name: never serve them
  return false;
}

async function download(f: RemoteFile, blob: string, ctx: BlobContext): Promise<void> {
  const key = blobKey(f);
  const dir = dirname(blob);
  const mine = join(dir, `${key}.${HOST_TAG}-${process.pid}-${randomBytes(3).toString('hex')}.incomplete`);
  await adoptPartial(dir, key, mine);
  const fh = await open(mine, 'a'); // append: every write lands after what is there
  let keep = false;
  try {
    let written = (await fh.stat()).size;
    if (written > f.size) {
      await fh.truncate(0);
      written = 0;
    }
    const hash = written > 0 ? await hashFile(mine, f) : newHash(f);
    const state: TransferState = { fh, hash, written };
    ctx.progress.resumed(f.path, written);
    ctx.progress.setState(f.path, 'downloading');
    let retried = 0;
    for (let attempt = 0; ; attempt++) {
      if (state.written === f.size) break;
      const before = state.written;
      try {
        await transfer(f, state, ctx, true);
        break;
      } catch (e) {
        // Keep what arrived for the next attempt or run, unless the bytes themselves are wrong.
        keep = state.written > 0 && !(e instanceof Mismatch);
        // A transfer that made progress earns its retries back: only stalls in place give up.
        if (state.written > before) attempt = 0;
        if (ctx.http.signal?.aborted || !isTransient(e) || attempt >= ctx.retries) {
          if (ctx.http.signal?.aborted || e instanceof HubError || e instanceof Mismatch) throw e;
          throw new HubError(
            'network',
            `downloading ${f.path} of ${ctx.errors.repoId} from ${new URL(ctx.endpoint).host} failed` +
              `${retried > 0 ? ` after ${retried} ${retried === 1 ? 'retry' : 'retries'}` : ''} (${networkDetail(e)}); ` +
              `${keep ? `the ${state.written} of ${f.size} bytes received are kept, and the next run resumes from there` : 'run again to retry'}.`,
            { cause: e },
          );
        }
        await sleep(ctx.retryDelayMs * 2 ** attempt, ctx.http.signal);
        retried++;
      }
    }
    ctx.progress.setState(f.path, 'verifying');
    const got = digest(state.hash);
    keep = false;
    if (got !== expected(f)) throw new Mismatch(`${f.sha256 ? 'sha256' : 'git blob id'} ${got}, listed ${expected(f)}`);
    await fh.sync(); // the rename below must not publish bytes still only in memory
    await fh.close();
    await rename(mine, blob);
    ctx.progress.setState(f.path, 'done');
  } finally {
    await fh.close().catch(() => {});
    if (keep) await park(dir, key, mine);
    else await rm(mine, { force: true });
  }
}

interface TransferState {
  fh: FileHandle;
  hash: Hash;
  written: number;
}

/** One request from state.written to the end. */
async function transfer(f: RemoteFile, state: TransferState, ctx: BlobContext, mayRestart: boolean): Promise<void> {
  const restart = async () => {
    ctx.progress.bytes(f.path, -state.written);
    await state.fh.truncate(0);
    state.hash = newHash(f);
    state.written = 0;
  };
  const url = resolveUrl(ctx.endpoint, ctx.errors.repoId, ctx.commit, f.path);
  const ranged = state.written > 0;
  const res = await hubFetch(url, ctx.http, ranged ? { range: `bytes=${state.written}-` } : {});
  if (res.status === 416 && ranged && mayRestart) {
    // The partial is not a prefix of this file: start over.
    res.close();
    await restart();
    return transfer(f, state, ctx, false);
  }
  if (res.status !== 200 && res.status !== 206) {
    res.close();
    throw httpError(res.status, errorHeaders(res), { ...ctx.errors, what: f.path });
  }
  if (res.status === 206) {
    const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get('content-range') ?? '');
    if (!range || Number(range[1]) !== state.written) {
      res.close();
      if (!mayRestart)
        throw new HubError(
          'http',
          `${f.path}: the server answered a Range request with ${res.headers.get('content-range') ?? 'no Content-Range'}`,
        );
      await restart();
      return transfer(f, state, ctx, false);
    }
    if (range[3] !== '*' && Number(range[3]) !== f.size) {
      res.close();
      throw new Mismatch(`the server has ${range[3]} bytes, the file list says ${f.size}`);
    }
  } else if (ranged) {
    // 200 to a Range request: the server (or a proxy) ignored it and sends the whole file.
    await restart();
  }
  const length = res.headers.get('content-length');
  if (res.status === 200 && length !== null && Number(length) !== f.size) {
    res.close();
    throw new Mismatch(`the server sends ${length} bytes, the file list says ${f.size}`);
  }
  for await (const chunk of res.chunks()) {
    if (state.written + chunk.length > f.size) {
      res.close();
      throw new Mismatch(`the server sent more than the listed ${f.size} bytes`);
    }
    await state.fh.write(chunk);
    state.hash.update(chunk);
    state.written += chunk.length;
    ctx.progress.bytes(f.path, chunk.length);
  }
  if (state.written < f.size) {
    throw Object.assign(new Error(`the connection ended after ${state.written} of ${f.size} bytes of ${f.path}`), {
      code: 'ECONNRESET',
    });
  }
}

// A 4xx from the CDN after the Hub's redirect: the Hub's X-Error-Code, if any, is on the first response.
function errorHeaders(res: { headers: Headers; hubHeaders: Headers }): Headers {
  const h = new Headers(res.headers);
  for (const k of ['x-error-code', 'x-error-message']) {
    const v = res.hubHeaders.get(k);
    if (v !== null && !h.has(k)) h.set(k, v);
  }
  return h;
}

/** Takes over the largest partial whose writer is gone, by renaming it to `mine`. */
async function adoptPartial(dir: string, key: string, mine: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const candidates: Array<{ path: string; size: number }> = [];
  for (const name of names) {
    if (!name.startsWith(`${key}.`) || !name.endsWith('.incomplete')) continue;
    const owner = name.slice(key.length + 1, -'.incomplete'.length);
    const path = join(dir, name);
    const st = await stat(path).catch(() => undefined);
    if (!st) continue;
    if (owner !== PARKED && !writerIsGone(owner, st.mtimeMs)) continue;
    candidates.push({ path, size: st.size });
  }
  candidates.sort((a, b) => b.size - a.size);
  let adopted = false;
  for (const c of candidates) {
    if (!adopted) {
      try {
        await rename(c.path, mine);
        adopted = true;
        continue;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue; // another process took it
        throw e;
      }
    }
    await rm(c.path, { force: true }); // a smaller leftover of a writer that is gone
  }
}

// Owners look like <host tag>-<pid>-<random>; anything else (e.g. huggingface_hub's
// <etag>.<uuid>.incomplete) belongs to another program and is left alone.
function writerIsGone(owner: string, mtimeMs: number): boolean {
  const m = /^([0-9a-f]{8})-(\d+)-[0-9a-f]+$/.exec(owner);
  if (!m) return false;
  if (m[1] !== HOST_TAG) return Date.now() - mtimeMs > ORPHAN_MS;
  const pid = Number(m[2]);
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0); // signal 0: only asks whether the process exists
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Leaves a partial for the next attempt, unless a larger one is already parked. */
async function park(dir: string, key: string, mine: string): Promise<void> {
  const parked = join(dir, `${key}.${PARKED}.incomplete`);
  const [a, b] = await Promise.all([stat(mine).catch(() => undefined), stat(parked).catch(() => undefined)]);
  if (!a || (b && b.size >= a.size)) await rm(mine, { force: true });
  else await rename(mine, parked).catch(() => rm(mine, { force: true }));
}

function newHash(f: RemoteFile): Hash {
  // A git blob id is the sha1 of a "blob <size>\0" header followed by the content.
  return f.sha256 ? createHash('sha256') : createHash('sha1').update(`blob ${f.size}\0`);
}

function expected(f: RemoteFile): string {
  return f.sha256 ?? f.gitOid!;
}

function digest(h: Hash): string {
  return h.copy().digest('hex');
}

async function hashFile(path: string, f: RemoteFile): Promise<Hash> {
  const h = newHash(f);
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h;
}
