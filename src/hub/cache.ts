// The download cache, laid out like huggingface_hub's so a cache can be shared with Python tools:
//
//   <cache>/models--Qwen--Qwen3-0.6B/
//     blobs/<sha256 or git blob id>           the bytes, one file per distinct content
//     refs/main                               the commit the branch/tag pointed to when fetched
//     snapshots/<commit>/config.json          -> ../../blobs/<git blob id>
//     snapshots/<commit>/model.safetensors    -> ../../blobs/<sha256>
//     .no_exist/<commit>/chat_template.jinja  empty: the repo has no such file at that commit
//
// Snapshot entries are relative symlinks like huggingface_hub's: the blob is stored once however
// many commits share it, Python tools see the same layout, and a moved cache keeps working. Where
// the file system refuses symlinks (FAT/exFAT disks, some network shares), a hard link is used, and
// where that fails too a copy: the snapshot folder is then still a plain, complete model folder.

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { copyFile, link, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { OPTIONAL_FILES, REQUIRED_FILES, SINGLE_WEIGHTS, WEIGHTS_INDEX, isSafeRelativePath } from './files.js';

/** `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`. */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE) return expandHome(env.HF_HUB_CACHE);
  return join(hfHome(env), 'hub');
}

export function hfHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HOME) return expandHome(env.HF_HOME);
  return join(env.XDG_CACHE_HOME ? expandHome(env.XDG_CACHE_HOME) : join(homedir(), '.cache'), 'huggingface');
}

function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? join(homedir(), p.slice(1)) : p;
}

export const isCommitHash = (rev: string) => /^[0-9a-f]{40}$/.test(rev);

/** 'complete': every file the engine needs is there and every optional file is known present or absent. */
export type SnapshotState = 'complete' | 'usable' | 'missing';

export class RepoCache {
  readonly root: string;

  constructor(
    readonly cacheDir: string,
    readonly repoId: string,
  ) {
    this.root = join(cacheDir, `models--${repoId.replace(/\//g, '--')}`);
  }

  blobPath(key: string): string {
    return join(this.root, 'blobs', key);
  }

  snapshotDir(commit: string): string {
    return join(this.root, 'snapshots', commit);
  }

  /** The commit a branch or tag pointed to when last fetched, if recorded. */
  readRef(revision: string): string | undefined {
    if (!isSafeRelativePath(revision)) return undefined;
    try {
      const commit = readFileSync(join(this.root, 'refs', revision), 'utf8').trim();
      return isCommitHash(commit) ? commit : undefined;
    } catch {
      return undefined;
    }
  }

  async writeRef(revision: string, commit: string): Promise<void> {
    if (revision === commit || !isSafeRelativePath(revision) || this.readRef(revision) === commit) return;
    await atomicWrite(join(this.root, 'refs', revision), commit);
  }

  /** Records that the repo has no `path` at `commit`, as huggingface_hub does, so an offline resolve knows. */
  async markAbsent(commit: string, path: string): Promise<void> {
    const p = join(this.root, '.no_exist', commit, path);
    if (existsSync(p)) return;
    await mkdir(dirname(p), { recursive: true });
    await writeFile(p, '');
  }

  /**
   * Whether the snapshot can be served without asking the Hub. Python tools may have fetched only
   * part of a repo into the same snapshot, so every needed file is checked, through its link.
   */
  snapshotState(commit: string): SnapshotState {
    const dir = this.snapshotDir(commit);
    const present = (p: string) => isFile(join(dir, p));
    if (!REQUIRED_FILES.every(present)) return 'missing';
    if (present(WEIGHTS_INDEX)) {
      let shards: string[];
      try {
        const map =
          (JSON.parse(readFileSync(join(dir, WEIGHTS_INDEX), 'utf8')) as { weight_map?: Record<string, string> })
            .weight_map ?? {};
        shards = [...new Set(Object.values(map))];
      } catch {
        return 'missing';
      }
      if (shards.length === 0 || !shards.every((s) => typeof s === 'string' && isSafeRelativePath(s) && present(s)))
        return 'missing';
    } else if (!present(SINGLE_WEIGHTS)) {
      return 'missing';
    }
    const known = (p: string) => present(p) || existsSync(join(this.root, '.no_exist', commit, p));
    return OPTIONAL_FILES.every(known) ? 'complete' : 'usable';
  }

  /** Makes snapshots/<commit>/<path> point at the blob, replacing whatever was there, atomically. */
  async linkIntoSnapshot(commit: string, path: string, key: string): Promise<void> {
    const dest = join(this.snapshotDir(commit), path);
    const blob = this.blobPath(key);
    await mkdir(dirname(dest), { recursive: true });
    // Built under a temporary name and renamed over dest, so a reader never sees a missing or
    // half-copied file, and two processes linking the same file both succeed.
    const tmp = `${dest}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      try {
        await symlink(relative(dirname(dest), blob), tmp);
      } catch (e) {
        if (!linkUnsupported(e)) throw e;
        try {
          await link(blob, tmp);
        } catch (e2) {
          if (!linkUnsupported(e2)) throw e2;
          await copyFile(blob, tmp);
        }
      }
      await rename(tmp, dest);
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** Marks the cache folder for backup tools to skip (https://bford.info/cachedir/), as huggingface_hub does. */
  async tagCacheDir(): Promise<void> {
    const tag = join(this.cacheDir, 'CACHEDIR.TAG');
    if (existsSync(tag)) return;
    await mkdir(this.cacheDir, { recursive: true });
    await writeFile(
      tag,
      'Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by openclaw-rl.\n',
      { flag: 'wx' },
    ).catch(() => {});
  }
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile(); // follows the link: a dangling one does not count
  } catch {
    return false;
  }
}

function linkUnsupported(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException).code;
  return (
    code === 'EPERM' ||
    code === 'ENOTSUP' ||
    code === 'EOPNOTSUPP' ||
    code === 'ENOSYS' ||
    code === 'EINVAL' ||
    code === 'EMLINK' ||
    code === 'EXDEV'
  );
}

async function atomicWrite(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, text);
    await rename(tmp, path);
  } finally {
    await rm(tmp, { force: true });
  }
}
