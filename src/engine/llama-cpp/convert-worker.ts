// Writes a full policy version's GGUF off the main thread (converting a model to F16 or Q8_0
// takes seconds to minutes), so requests keep being served meanwhile. The weights arrive as the
// version's SharedArrayBuffer, not copied.

import { parentPort, Worker, workerData } from 'node:worker_threads';
import type { ModelConfig } from '../local/model/config.js';
import { paramStoreOver, tensorSpecs } from '../local/model/weights.js';
import { type GgufWeightType, writeModelGguf } from './gguf.js';

interface ConvertJob {
  params: SharedArrayBuffer;
  /** The base folder, whose tokenizer files go into the file. */
  modelDir: string;
  config: ModelConfig;
  out: string;
  type: GgufWeightType;
  name: string;
}

/** Writes the GGUF of `job` in a worker thread; resolves when the file is in place. */
export function convertInWorker(job: ConvertJob): Promise<void> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: job });
    worker.once('message', (m: { error?: string }) => (m.error ? reject(new Error(m.error)) : resolve()));
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (code !== 0) reject(new Error(`the GGUF conversion worker exited with code ${code}`));
    });
  });
}

if (parentPort && workerData) {
  const job = workerData as ConvertJob;
  try {
    const store = paramStoreOver(tensorSpecs(job.config), new Float32Array(job.params));
    const source = { tokenizerDir: job.modelDir, config: job.config, tensor: (n: string) => store.get(n).slice() };
    writeModelGguf(source, job.out, job.type, job.name);
    parentPort.postMessage({});
  } catch (e) {
    parentPort.postMessage({ error: (e as Error).message });
  }
}
