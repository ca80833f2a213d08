// A test double of the Hugging Face Hub: a node:http server on 127.0.0.1 that implements the
// endpoints resolveModel uses, the way huggingface.co answers them, over model folders on disk.
//
//   GET /api/models/{id}/revision/{rev}?blobs=true   {sha, siblings: [{rfilename, size, blobId, lfs?}]}
//   GET /{id}/resolve/{rev}/{path}                   small files: 200 with ETag "<git blob id>";
//                                                    LFS files: 302 to the "CDN" (a second server,
//                                                    so another origin) with X-Linked-Etag/-Size
//   GET {cdn}/blobs/{sha256}                         the bytes, with Range support
//
// Errors carry X-Error-Code like the Hub (RepoNotFound, GatedRepo, RevisionNotFound, EntryNotFound),
// and knobs make it misbehave: drop a connection mid-file, flip a byte, ignore Range, answer 503,
// stall, send slowly. Every request is logged, with its Range and Authorization headers.

import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join, relative } from 'node:path';

export interface DoubleFile {
  data: Buffer;
  /** git blob id of the content (small files) or of the LFS pointer (LFS files). */
  blobId: string;
  sha256: string;
  lfs: boolean;
}

export interface DoubleRepoOptions {
  id: string;
  /** Folder whose files (recursively) are the repo's content. */
  dir?: string;
  /** More files, or replacements. */
  files?: Record<string, Buffer | string>;
  /** Private repo: only this token sees it; others get 401 RepoNotFound, as on the Hub. */
  token?: string;
  /** Gated repo: like private, but the Hub says GatedRepo (401 without a token, 403 with another). */
  gated?: boolean;
}

export interface Knobs {
  /** Cut the connection after `afterBytes` body bytes of `path`, the next `times` times it is served. */
  drop?: { path: string; afterBytes: number; times: number };
  /** Flip a byte in the middle of `path` the next `times` times it is served. */
  corrupt?: { path: string; times: number };
  /** Answer Range requests with 200 and the whole file, like some proxies. */
  ignoreRange?: boolean;
  /** Answer the revision endpoint with this status the next `times` times. */
  failInfo?: { status: number; times: number };
  /** Wait this long before answering a file request at all. */
  stallMs?: number;
  /** Send bodies in pieces of this size with this pause between them. */
  chunkSize?: number;
  chunkDelayMs?: number;
}

export interface LoggedRequest {
  server: 'hub' | 'cdn';
  method: string;
  path: string;
  range?: string;
  authorization?: string;
}

interface Repo {
  opts: DoubleRepoOptions;
  refs: Map<string, string>;
  commits: Map<string, Map<string, DoubleFile>>;
}

const LFS_PATTERN = /\.(safetensors|bin|gguf)$|^tokenizer\.json$/;

export class HubDouble {
  readonly requests: LoggedRequest[] = [];
  knobs: Knobs = {};
  private readonly repos = new Map<string, Repo>();
  private readonly servedBytes = new Map<string, number>();
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly hub: Server,
    private readonly cdnServer: Server,
  ) {}

  static async start(repos: DoubleRepoOptions[], knobs: Knobs = {}): Promise<HubDouble> {
    const double: HubDouble = new HubDouble(
      createServer((req, res) => void double.handleHub(req, res).catch((e) => fail(res, e))),
      createServer((req, res) => void double.handleCdn(req, res).catch((e) => fail(res, e))),
    );
    double.knobs = knobs;
    for (const r of repos) double.addRepo(r);
    for (const s of [double.hub, double.cdnServer]) {
      s.on('connection', (sock) => {
        double.sockets.add(sock);
        sock.on('close', () => double.sockets.delete(sock));
      });
      await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    }
    return double;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.hub.address() as AddressInfo).port}`;
  }

  get cdn(): string {
    return `http://127.0.0.1:${(this.cdnServer.address() as AddressInfo).port}`;
  }

  addRepo(opts: DoubleRepoOptions): void {
    const files = new Map<string, DoubleFile>();
    if (opts.dir)
      for (const p of walk(opts.dir))
        files.set(relative(opts.dir, p), makeFile(relative(opts.dir, p), readFileSync(p)));
    for (const [p, d] of Object.entries(opts.files ?? {})) files.set(p, makeFile(p, Buffer.from(d)));
    const commit = commitOf(opts.id, files);
    this.repos.set(opts.id, { opts, refs: new Map([['main', commit]]), commits: new Map([[commit, files]]) });
  }

  /** A new commit on main with `path` changed; the old commit stays reachable by its hash. */
  commitFile(id: string, path: string, data: Buffer | string): string {
    const repo = this.repos.get(id)!;
    const files = new Map(repo.commits.get(repo.refs.get('main')!)!);
    files.set(path, makeFile(path, Buffer.from(data)));
    const commit = commitOf(id, files);
    repo.commits.set(commit, files);
    repo.refs.set('main', commit);
    return commit;
  }

  commit(id: string, ref = 'main'): string {
    return this.repos.get(id)!.refs.get(ref)!;
  }

  file(id: string, path: string): DoubleFile {
    return this.repos.get(id)!.commits.get(this.commit(id))!.get(path)!;
  }

  /** Body bytes sent for a repo path so far, over every request. */
  served(path: string): number {
    return this.servedBytes.get(path) ?? 0;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await Promise.all([this.hub, this.cdnServer].map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  private log(server: 'hub' | 'cdn', req: IncomingMessage): void {
    this.requests.push({
      server,
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      ...(req.headers.range ? { range: req.headers.range } : {}),
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
    });
  }

  private async handleHub(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.log('hub', req);
    const url = new URL(req.url ?? '/', 'http://x');
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(url.pathname);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
    const m = api ?? resolve;
    if (!m) return error(res, 404, undefined, 'Not Found');
    const id = decodeURIComponent(m[1]!);
    const repo = this.access(id, req, res);
    if (!repo) return;
    const rev = decodeURIComponent(m[2]!);
    const commit = repo.refs.get(rev) ?? (repo.commits.has(rev) ? rev : undefined);
    if (!commit) return error(res, 404, 'RevisionNotFound', `Invalid rev id: ${rev}`);
    const files = repo.commits.get(commit)!;
    if (api) {
      const k = this.knobs.failInfo;
      if (k && k.times > 0) {
        k.times--;
        return error(res, k.status, undefined, 'Service Unavailable');
      }
      const siblings = [...files].map(([rfilename, f]) => ({
        rfilename,
        size: f.data.length,
        blobId: f.blobId,
        ...(f.lfs ? { lfs: { size: f.data.length, sha256: f.sha256, pointerSize: pointer(f).length } } : {}),
      }));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          _id: commit.slice(0, 24),
          id,
          private: !!repo.opts.token,
          gated: repo.opts.gated ? 'auto' : false,
          sha: commit,
          siblings,
        }),
      );
      return;
    }
    const path = decodeURIComponent(m[3]!);
    const f = files.get(path);
    if (!f) return error(res, 404, 'EntryNotFound', `${path} does not exist on "${rev}"`);
    const common = { 'x-repo-commit': commit, 'accept-ranges': 'bytes' };
    if (f.lfs) {
      res.writeHead(302, {
        ...common,
        location: `${this.cdn}/blobs/${f.sha256}?X-Amz-Signature=double`,
        etag: `"${f.blobId}"`,
        'x-linked-etag': `"${f.sha256}"`,
        'x-linked-size': String(f.data.length),
        'content-length': '0',
      });
      res.end();
      return;
    }
    await this.sendBytes(req, res, path, f, { ...common, etag: `"${f.blobId}"` });
  }

  private async handleCdn(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.log('cdn', req);
    const sha = /^\/blobs\/([0-9a-f]{64})$/.exec(new URL(req.url ?? '/', 'http://x').pathname)?.[1];
    for (const repo of this.repos.values()) {
      for (const files of repo.commits.values()) {
        for (const [path, f] of files)
          if (f.sha256 === sha && f.lfs) return this.sendBytes(req, res, path, f, { etag: `"${sha}"` });
      }
    }
    error(res, 404, undefined, 'NoSuchKey');
  }

  /** The repo, or an answer like the Hub's for private, gated and missing repos. */
  private access(id: string, req: IncomingMessage, res: ServerResponse): Repo | undefined {
    const repo = this.repos.get(id);
    const auth = req.headers.authorization;
    const token = auth?.startsWith('Bearer ') ? auth.slice(7) : undefined;
    if (!repo || (repo.opts.token && !repo.opts.gated && token !== repo.opts.token)) {
      error(res, token ? 404 : 401, 'RepoNotFound', 'Repository not found');
      return undefined;
    }
    if (repo.opts.gated && token !== repo.opts.token) {
      error(res, token ? 403 : 401, 'GatedRepo', `Access to model ${id} is restricted.`);
      return undefined;
    }
    return repo;
  }

  private async sendBytes(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    f: DoubleFile,
    headers: Record<string, string>,
  ): Promise<void> {
    if (this.knobs.stallMs) await new Promise((r) => setTimeout(r, this.knobs.stallMs));
    if (res.destroyed) return;
    let data = f.data;
    const corrupt = this.knobs.corrupt;
    if (corrupt && corrupt.path === path && corrupt.times > 0) {
      corrupt.times--;
      data = Buffer.from(data);
      data[data.length >> 1]! ^= 0xff;
    }
    let start = 0;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    if (range && !this.knobs.ignoreRange) {
      start = Number(range[1]);
      if (start >= data.length) {
        res.writeHead(416, { 'content-range': `bytes */${data.length}` });
        res.end();
        return;
      }
      res.writeHead(206, {
        ...headers,
        'content-range': `bytes ${start}-${data.length - 1}/${data.length}`,
        'content-length': String(data.length - start),
      });
    } else {
      res.writeHead(200, { ...headers, 'content-length': String(data.length) });
    }
    if (req.method === 'HEAD') return void res.end();
    const drop = this.knobs.drop;
    const dropping = drop !== undefined && drop.path === path && drop.times > 0;
    if (dropping) drop.times--;
    const dropAt = dropping ? drop.afterBytes : Infinity;
    const size = this.knobs.chunkSize ?? 65536;
    let sent = 0;
    for (let pos = start; pos < data.length; pos += size) {
      const piece = data.subarray(pos, Math.min(data.length, pos + size, start + dropAt));
      if (piece.length > 0) {
        this.servedBytes.set(path, this.served(path) + piece.length);
        sent += piece.length;
        await new Promise<void>((resolve) => res.write(piece, () => resolve()));
      }
      if (sent >= dropAt) {
        res.socket?.destroy(); // mid-body: the client sees the connection end early
        return;
      }
      if (this.knobs.chunkDelayMs) await new Promise((r) => setTimeout(r, this.knobs.chunkDelayMs));
      if (res.destroyed) return;
    }
    res.end();
  }
}

/** A port nothing listens on: connecting to it is refused. */
export async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

export const gitBlobId = (data: Buffer) =>
  createHash('sha1').update(`blob ${data.length}\0`).update(data).digest('hex');
export const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

function makeFile(path: string, data: Buffer): DoubleFile {
  const lfs = LFS_PATTERN.test(path.split('/').pop()!);
  const f: DoubleFile = { data, sha256: sha256(data), lfs, blobId: '' };
  f.blobId = gitBlobId(lfs ? pointer(f) : data);
  return f;
}

/** The git-lfs pointer committed in place of an LFS file. */
function pointer(f: DoubleFile): Buffer {
  return Buffer.from(`version https://git-lfs.github.com/spec/v1\noid sha256:${f.sha256}\nsize ${f.data.length}\n`);
}

function commitOf(id: string, files: Map<string, DoubleFile>): string {
  const h = createHash('sha1').update(id);
  for (const [p, f] of [...files].sort(([a], [b]) => a.localeCompare(b))) h.update(`${p}\0${f.blobId}\0`);
  return h.digest('hex');
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

function error(res: ServerResponse, status: number, code: string | undefined, message: string): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    ...(code ? { 'x-error-code': code } : {}),
    'x-error-message': message,
  });
  res.end(JSON.stringify({ error: message }));
}

function fail(res: ServerResponse, e: unknown): void {
  if (!res.headersSent) error(res, 500, undefined, String(e));
  else res.destroy();
}
