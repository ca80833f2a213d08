// Files that must be whole or absent after a crash at any instant, and the error for a file that
// is not what it should be: shared by the adapter folders (peft-adapter.ts) and the training
// checkpoints (checkpoint.ts).

import { closeSync, fsyncSync, openSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { openPrivateFile } from '../../../private-files.js';

/** A file that is not what it should be; the message starts with its path. */
export class CheckpointError extends Error {
  constructor(path: string, message: string) {
    super(`${path}: ${message}`);
    this.name = 'CheckpointError';
  }
}

export function writeFileSynced(path: string, text: string): void {
  const fd = openPrivateFile(path, 'w');
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Replaces path's content all at once: temp file, fsync, rename, fsync of the folder. */
export function writeFileAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSynced(tmp, text);
  renameSync(tmp, path);
  fsyncDir(dirname(path));
}

/** Makes the folder's entries (new names, renames) durable. Windows cannot open a folder to fsync. */
export function fsyncDir(dir: string): void {
  if (process.platform === 'win32') return;
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
