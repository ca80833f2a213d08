// Renders download Progress for a person. On a terminal: one line redrawn in place with \r,
// at most ten times a second. Otherwise (a log file, a pipe, CI): a plain line when a tenth of the
// bytes more is done or 15 s have passed, so logs stay short but show that something happens.

import type { Progress } from './progress.js';

export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface ProgressBar {
  update(p: Progress): void;
  /** Ends the line (terminal) or prints the final line. */
  done(): void;
}

const TTY_INTERVAL_MS = 100;
const PLAIN_INTERVAL_MS = 15_000;

export function progressBar(out: ProgressOutput = process.stderr, now: () => number = Date.now): ProgressBar {
  let last: Progress | undefined;
  let lastDraw = -Infinity;
  let lastPlainFraction = -1;
  let drawn = false;
  const tty = out.isTTY === true;

  const draw = (p: Progress, force: boolean) => {
    const t = now();
    if (tty) {
      if (!force && t - lastDraw < TTY_INTERVAL_MS) return;
      lastDraw = t;
      // \x1b[K clears what a longer previous line left behind.
      out.write(`\r${renderLine(p, Math.max(40, (out.columns ?? 80) - 1))}\x1b[K`);
      drawn = true;
      return;
    }
    const fraction = p.bytesTotal > 0 ? p.bytesDone / p.bytesTotal : 0;
    if (!force && fraction - lastPlainFraction < 0.1 && t - lastDraw < PLAIN_INTERVAL_MS) return;
    lastDraw = t;
    lastPlainFraction = fraction;
    out.write(`${renderPlain(p)}\n`);
    drawn = true;
  };

  return {
    update(p) {
      last = p;
      // Nothing to show until something is fetched: files found in the cache pass silently.
      if (!drawn && !p.files.some((f) => f.state === 'downloading' || f.state === 'verifying' || f.state === 'done'))
        return;
      draw(p, !drawn);
    },
    done() {
      if (!last || !drawn) return;
      draw(last, true);
      if (tty) out.write('\n');
    },
  };
}

/** `Qwen/Qwen3-0.6B [#######-------]  43%  512.3 MB/1.19 GB  24.1 MB/s  28s  model.safetensors` in `width` columns. */
export function renderLine(p: Progress, width: number): string {
  const pct = p.bytesTotal > 0 ? Math.min(1, p.bytesDone / p.bytesTotal) : 0;
  const stats = `${String(Math.floor(pct * 100)).padStart(3)}%  ${formatBytes(p.bytesDone)}/${formatBytes(p.bytesTotal)}  ${formatBytes(p.bytesPerSecond)}/s  ${eta(p)}`;
  const current = p.files.find((f) => f.state === 'downloading' || f.state === 'verifying');
  let tail = current ? `  ${current.state === 'verifying' ? 'checking ' : ''}${current.path}` : '';
  const room = width - p.repoId.length - stats.length - 4; // for the bar and the file name; 4 for ' [' and '] '
  // The bar gives way down to 10 columns, then the file name loses its start (its end tells the shards apart).
  const barWidth = Math.min(30, Math.max(10, room - tail.length));
  const tailRoom = room - barWidth;
  if (tail.length > tailRoom) tail = tailRoom >= 12 ? `  …${tail.slice(tail.length - (tailRoom - 3))}` : '';
  const filled = Math.round(pct * barWidth);
  const line = `${p.repoId} [${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}] ${stats}${tail}`;
  return line.length > width ? `${line.slice(0, width - 1)}…` : line;
}

export function renderPlain(p: Progress): string {
  const pct = p.bytesTotal > 0 ? Math.floor((100 * p.bytesDone) / p.bytesTotal) : 0;
  return `downloading ${p.repoId}: ${pct}% (${formatBytes(p.bytesDone)} of ${formatBytes(p.bytesTotal)}, ${p.filesDone}/${p.filesTotal} files, ${formatBytes(p.bytesPerSecond)}/s)`;
}

export function formatBytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return i === 0 ? `${Math.round(n)} B` : `${n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
}

function eta(p: Progress): string {
  const left = p.bytesTotal - p.bytesDone;
  if (left <= 0) return 'done';
  if (p.bytesPerSecond <= 0) return '--';
  const s = Math.ceil(left / p.bytesPerSecond);
  return s >= 3600
    ? `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`
    : s >= 60
      ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`
      : `${s}s`;
}
