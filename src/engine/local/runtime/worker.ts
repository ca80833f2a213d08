// The compute worker: loads the weights, owns the KV caches and runs the scheduler, so matrix
// work never blocks the event loop of the thread that serves HTTP.

import { parentPort, workerData } from 'node:worker_threads';
import { loadKernels } from '../kernels/index.js';
import { readModelFolder } from '../model/folder.js';
import { Transformer } from '../model/transformer.js';
import { loadWeights, paramStoreOver } from '../model/weights.js';
import { Lora } from '../train/lora.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import type { FromWorker, ToWorker, WorkerOptions } from './protocol.js';
import { PrefixCache } from './prefix-cache.js';
import { PrefixCacheCounters } from './prefix-cache-stats.js';
import { type PolicyWeights, Scheduler } from './scheduler.js';
import type { PolicyUpdate } from './protocol.js';

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
  const base: PolicyWeights = { version: 0, model: new Transformer(folder.config, params, kernels), lora: null };
  const prefix = new PrefixCache(options.kvCacheBytes, new PrefixCacheCounters(options.prefixStats));
  const scheduler = new Scheduler(
    base, folder.config, folder.eosTokenIds, () => tokenizer.createStreamDecoder(), options.maxStepTokens,
    new Int32Array(options.activity), prefix,
  );
  const policyOf = (u: PolicyUpdate): PolicyWeights => u.kind === 'lora'
    ? { version: u.version, model: base.model, lora: new Lora(folder.config, u.spec, u.data) }
    : { version: u.version, model: new Transformer(folder.config, paramStoreOver(params.specs, new Float32Array(u.params)), kernels), lora: null };

  let wake: (() => void) | null = null;
  let running = true;
  port.on('message', (m: ToWorker) => {
    try {
      if (m.type === 'generate') scheduler.addGeneration(m.id, Array.from(m.promptIds), m.sampling);
      else if (m.type === 'score') scheduler.addScore(m.id, Array.from(m.promptIds), Array.from(m.completionIds), m.topK, m.version);
      else if (m.type === 'publish') publish(m.update);
      else if (m.type === 'cancel') scheduler.cancel(m.id);
      else if (m.type === 'shutdown') running = false;
    } catch (e) {
      if (m.type === 'generate' || m.type === 'score') send({ type: 'failed', id: m.id, message: (e as Error).message });
    }
    wake?.();
  });
  const publish = (update: PolicyUpdate) => {
    const t = performance.now();
    try {
      scheduler.publish(policyOf(update));
      send({ type: 'published', version: update.version, swapMs: performance.now() - t });
    } catch (e) {
      send({ type: 'publishFailed', version: update.version, message: (e as Error).message });
    }
  };
  send({ type: 'ready', info: { kernels: kernels.name, parameters: params.data.length, loadMs: performance.now() - t0, baseParams: params.data.buffer as SharedArrayBuffer } });

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
