// Tokenizing off the event loop: a worker thread with its own copy of the tokenizer encodes what
// is too long to encode between two stream writes (a new 100 kB message takes 130 ms), and checks
// that piecewise prompt encoding equals encoding the whole text (see prompt-encoder.ts). Before it
// runs the model on a prompt it counts a lower bound of its tokens (TextTokenizer.minTokens), so a
// prompt that cannot fit is refused without the BPE that took 36 s and gigabytes for 15 MB. A job
// over RECYCLE_CHARS ends the thread afterwards: its heap goes back to the system, and the next
// job starts a fresh one.

import { Worker } from 'node:worker_threads';

export type ThreadJob =
  | { type: 'check'; id: number; text: string; ids: number[] }
  | { type: 'encode'; id: number; pieces: string[]; limit: number; whole?: string };

export type ThreadResult =
  | { id: number; same: boolean; wholeLength: number }
  | { id: number; ids: Int32Array[] }
  | { id: number; atLeast: number }
  | { id: number; error: string };

/** Resolves whether the whole text encodes to `ids`, with the whole encoding's length. */
export type WholeEncodeCheck = (text: string, ids: number[]) => Promise<{ same: boolean; wholeLength: number }>;

/**
 * Each piece's ids (or, given `whole`, the ids of that text, whose text pieces `pieces` are), or
 * `atLeast` tokens when the pieces together certainly reach `limit`.
 */
export type PiecesEncode = (
  pieces: string[],
  limit: number,
  whole?: string,
) => Promise<{ ids: number[][] } | { atLeast: number }>;

/** Jobs larger than this (in characters) end the thread when done, so its heap is returned. */
export const RECYCLE_CHARS = 1_000_000;

interface Waiter {
  resolve: (r: ThreadResult) => void;
  reject: (e: Error) => void;
}

export class TokenizerThread {
  private nextId = 0;
  private worker: Worker | null = null;
  private readonly waiting = new Map<number, Waiter>();
  private recycleWhenIdle = false;
  private closed = false;

  private constructor(private readonly modelDir: string) {}

  /** A thread over the tokenizer of a model folder, started by its first job. */
  static start(modelDir: string): TokenizerThread {
    return new TokenizerThread(modelDir);
  }

  readonly check: WholeEncodeCheck = async (text, ids) => {
    const r = await this.run({ type: 'check', id: this.nextId++, text, ids }, text.length);
    if ('same' in r) return { same: r.same, wholeLength: r.wholeLength };
    throw new Error('the tokenizer thread answered a check with something else');
  };

  readonly encode: PiecesEncode = async (pieces, limit, whole) => {
    const chars = whole?.length ?? pieces.reduce((n, p) => n + p.length, 0);
    const job: ThreadJob = {
      type: 'encode',
      id: this.nextId++,
      pieces,
      limit,
      ...(whole === undefined ? {} : { whole }),
    };
    const r = await this.run(job, chars);
    if ('atLeast' in r) return { atLeast: r.atLeast };
    if ('ids' in r) return { ids: r.ids.map((a) => Array.from(a)) };
    throw new Error('the tokenizer thread answered an encode with something else');
  };

  /** Whether a thread is running now (tests: a large job ends it). */
  get running(): boolean {
    return this.worker !== null;
  }

  async close(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    this.worker = null;
    await worker?.terminate();
  }

  private run(job: ThreadJob, chars: number): Promise<ThreadResult> {
    if (this.closed) return Promise.reject(new Error('the tokenizer thread is closed'));
    const worker = (this.worker ??= this.spawn());
    if (chars > RECYCLE_CHARS) this.recycleWhenIdle = true;
    return new Promise<ThreadResult>((resolve, reject) => {
      if (this.waiting.size === 0) worker.ref();
      this.waiting.set(job.id, { resolve, reject });
      worker.postMessage(job);
    }).then((r) => {
      if ('error' in r) throw new Error(r.error);
      return r;
    });
  }

  private spawn(): Worker {
    const url = new URL('./tokenizer-thread-worker.js', import.meta.url);
    const worker = new Worker(url, { workerData: { modelDir: this.modelDir } });
    worker.on('message', (m: ThreadResult) => {
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (this.waiting.size === 0) {
        worker.unref(); // an idle thread never keeps the process alive
        if (this.recycleWhenIdle) {
          this.recycleWhenIdle = false;
          if (this.worker === worker) this.worker = null;
          worker.removeAllListeners(); // its exit is no failure, and the waiters now belong to the next thread
          void worker.terminate();
        }
      }
      w?.resolve(m);
    });
    const fail = (e: Error) => {
      if (this.worker === worker) this.worker = null; // the next job starts a new thread
      for (const w of this.waiting.values()) w.reject(e);
      this.waiting.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the tokenizer thread exited (code ${code})`)));
    worker.unref();
    return worker;
  }
}
