// Checks off the event loop that piecewise prompt encoding equals encoding the whole text (see
// prompt-encoder.ts): a worker thread with its own copy of the tokenizer does the full encodes.

import { Worker } from 'node:worker_threads';

export interface EncodeCheck {
  id: number;
  text: string;
  ids: number[];
}

export interface EncodeCheckResult {
  id: number;
  same: boolean;
  wholeLength: number;
  error?: string;
}

/** Resolves whether the whole text encodes to `ids`, with the whole encoding's length. */
export type WholeEncodeCheck = (text: string, ids: number[]) => Promise<{ same: boolean; wholeLength: number }>;

export class EncodeChecker {
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve: (r: { same: boolean; wholeLength: number }) => void; reject: (e: Error) => void }>();
  private failure: Error | null = null;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (m: EncodeCheckResult | 'ready') => {
      if (m === 'ready') return;
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (this.waiting.size === 0) worker.unref(); // an idle checker never keeps the process alive
      if (m.error) w?.reject(new Error(m.error));
      else w?.resolve({ same: m.same, wholeLength: m.wholeLength });
    });
    const fail = (e: Error) => {
      this.failure = e;
      for (const w of this.waiting.values()) w.reject(e);
      this.waiting.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the encode checker thread exited (code ${code})`)));
    worker.unref();
  }

  /** A checker over the tokenizer of a model folder. */
  static start(modelDir: string): EncodeChecker {
    return new EncodeChecker(new Worker(new URL('./encode-check-worker.js', import.meta.url), { workerData: { modelDir } }));
  }

  readonly check: WholeEncodeCheck = (text, ids) => {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.waiting.size === 0) this.worker.ref();
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ id, text, ids } satisfies EncodeCheck);
    });
  };

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
