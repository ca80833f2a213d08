// Files that hold conversations or weights trained on them: readable by their owner only,
// whatever the umask. mkdir's and open's modes are masked by the umask (so only ever narrower);
// an explicit chmod afterwards makes the mode exact, and tightens what older versions created.

import { chmodSync, existsSync, fchmodSync, mkdirSync, openSync } from 'node:fs';

export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** Creates dir (and missing parents) if needed, and makes dir itself 0700. */
export function makePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  chmodSync(dir, PRIVATE_DIR_MODE);
}

/** Opens (creating if the flags say so) a file that is 0600 from its first byte on. */
export function openPrivateFile(path: string, flags: string): number {
  const fd = openSync(path, flags, PRIVATE_FILE_MODE);
  try {
    fchmodSync(fd, PRIVATE_FILE_MODE);
  } catch (e) {
    // A file we cannot chmod (owned by another user) is not ours to write private data into.
    throw new Error(`cannot make ${path} private (mode 0600): ${(e as Error).message}`, { cause: e });
  }
  return fd;
}

/** Makes each existing path 0600 (files a previous version created with the umask's mode). */
export function makeFilesPrivate(paths: readonly string[]): void {
  for (const p of paths) if (existsSync(p)) chmodSync(p, PRIVATE_FILE_MODE);
}
