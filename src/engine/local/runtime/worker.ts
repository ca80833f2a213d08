// The compute worker: loads the weights, owns the KV caches and runs the scheduler, so matrix
// work never blocks the event loop of the thread that serves HTTP.

import { parentPort, workerData } from 'node:worker_threads';
import { loadKernels } from '../kernels/index.js';
import { readModelFolder } from '../model/folder.js';
import { Transformer } from '../model/transformer.js';
import { loadWeights } from '../model/weights.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import type { FromWorker, ToWorker, WorkerOptions } from './protocol.js';
import { Scheduler } from './scheduler.js';

const port = parentPort!;
const options = workerData as WorkerOptions;
const send = (m: FromWorker) => port.postMessage(m);

async function start(): Promise<void> {
  const t0 = performance.now();
  const kernels = loadKernels();
  if (options.threads > 0) kernels.setThreads(options.threads);
  const folder = readModelFolder(options.modelDir);
  const tokenizer = await TextTokenizer.fromModelDir(options.modelDir);
  const params = loadWeights(options.modelDir, folder.config);
  const model = new Transformer(folder.config, params, kernels);
  const scheduler = new Scheduler(model, folder.config, folder.eosTokenIds, () => tokenizer.createStreamDecoder(), options.maxStepTokens, () => 0);

  let wake: (() => void) | null = null;
  let running = true;
  port.on('message', (m: ToWorker) => {
    try {
      if (m.type === 'generate') scheduler.addGeneration(m.id, m.promptIds, m.sampling);
      else if (m.type === 'score') scheduler.addScore(m.id, m.promptIds, m.completionIds, m.topK);
      else if (m.type === 'cancel') scheduler.cancel(m.id);
      else if (m.type === 'shutdown') running = false;
    } catch (e) {
      if (m.type === 'generate' || m.type === 'score') send({ type: 'failed', id: m.id, message: (e as Error).message });
    }
    wake?.();
  });
  send({ type: 'ready', info: { kernels: kernels.name, parameters: params.data.length, loadMs: performance.now() - t0 } });

  while (running) {
    if (scheduler.idle) {
      await new Promise<void>((resolve) => { wake = resolve; });
      wake = null;
      continue;
    }
    try {
      const out = scheduler.step();
      if (out.events.length > 0) send({ type: 'events', items: out.events });
      for (const s of out.scored) send({ type: 'scored', id: s.id, result: s.result });
    } catch (e) {
      const message = `engine step failed: ${(e as Error).message}`;
      for (const id of scheduler.failAll()) send({ type: 'failed', id, message });
    }
    // Let new requests and cancellations in between steps.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  port.close();
}

start().catch((e: Error) => send({ type: 'fatal', message: e.message }));
