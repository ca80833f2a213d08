// Progress of one resolve: a record per file and the totals, handed to the caller's onProgress on
// every change. Rendering is elsewhere (progress-bar.ts); this only counts.

export type FileState = 'queued' | 'cached' | 'downloading' | 'verifying' | 'done';

export interface FileProgress {
  path: string;
  bytesDone: number;
  bytesTotal: number;
  state: FileState;
}

export interface Progress {
  repoId: string;
  commit: string;
  /** The file this update is about. */
  file: FileProgress;
  /** Every file of the snapshot, cached ones included. */
  files: readonly FileProgress[];
  bytesDone: number;
  bytesTotal: number;
  /** Bytes received from the network per second over the last few seconds (0 when idle or cached). */
  bytesPerSecond: number;
  filesDone: number;
  filesTotal: number;
}

const RATE_WINDOW_MS = 5000;

export class ProgressTracker {
  private readonly files = new Map<string, FileProgress>();
  // (time, total bytes received) samples over the rate window.
  private samples: Array<[number, number]> = [];
  private received = 0;

  constructor(
    private readonly repoId: string,
    private readonly commit: string,
    private readonly onProgress: ((p: Progress) => void) | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  add(path: string, size: number): void {
    if (!this.files.has(path)) this.files.set(path, { path, bytesDone: 0, bytesTotal: size, state: 'queued' });
  }

  setState(path: string, state: FileState): void {
    const f = this.files.get(path)!;
    f.state = state;
    if (state === 'cached' || state === 'done') f.bytesDone = f.bytesTotal;
    this.emit(f);
  }

  /** A resumed partial counts as done bytes without counting towards the rate. */
  resumed(path: string, bytes: number): void {
    const f = this.files.get(path)!;
    f.bytesDone = bytes;
    this.emit(f);
  }

  /** Bytes written (negative when a partial is discarded: the server ignored a Range, or a retry). */
  bytes(path: string, delta: number): void {
    const f = this.files.get(path)!;
    f.bytesDone = Math.max(0, f.bytesDone + delta);
    if (delta > 0) this.received += delta;
    this.emit(f);
  }

  private rate(): number {
    const t = this.now();
    this.samples.push([t, this.received]);
    while (this.samples.length > 2 && t - this.samples[0]![0] > RATE_WINDOW_MS) this.samples.shift();
    const [t0, b0] = this.samples[0]!;
    return t > t0 ? ((this.received - b0) * 1000) / (t - t0) : 0;
  }

  private emit(file: FileProgress): void {
    if (!this.onProgress) return;
    const files = [...this.files.values()];
    let bytesDone = 0;
    let bytesTotal = 0;
    let filesDone = 0;
    for (const f of files) {
      bytesDone += f.bytesDone;
      bytesTotal += f.bytesTotal;
      if (f.state === 'done' || f.state === 'cached') filesDone++;
    }
    this.onProgress({
      repoId: this.repoId,
      commit: this.commit,
      file: { ...file },
      files: files.map((f) => ({ ...f })),
      bytesDone,
      bytesTotal,
      bytesPerSecond: this.rate(),
      filesDone,
      filesTotal: files.length,
    });
  }
}
