// DATA/learning.pid: written by serve while its learning loop runs, so `openclaw-rl versions
// rollback --data DATA` knows a serve will pick its request up now (and waits for the answer)
// rather than at the next start. A marker left by a killed serve names a dead process.

import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const RUNNING_MARKER = 'learning.pid';

export function writeRunningMarker(dataDir: string): string {
  const path = join(dataDir, RUNNING_MARKER);
  writeFileSync(path, `${process.pid}\n`, { mode: 0o600 });
  return path;
}

export function removeRunningMarker(path: string): void {
  // Another serve may have taken the folder over since (the store refuses nothing there): keep its marker.
  if (runningPid(path) === process.pid) rmSync(path, { force: true });
}

/** The pid of the serve learning on `dataDir`, or null when none runs. */
export function servePid(dataDir: string): number | null {
  return runningPid(join(dataDir, RUNNING_MARKER));
}

function runningPid(path: string): number | null {
  let pid: number;
  try {
    pid = Number(readFileSync(path, 'utf8').trim());
  } catch {
    return null;
  }
  if (!(Number.isInteger(pid) && pid > 0)) return null;
  try {
    process.kill(pid, 0);
    return pid;
  } catch (e) {
    // EPERM: it exists but belongs to another user.
    return (e as NodeJS.ErrnoException).code === 'EPERM' ? pid : null;
  }
}
