// The compute worker: loads the weights, owns the KV caches and runs the scheduler, so matrix
// work never blocks the event loop of the thread that serves HTTP.
//
// At bf16 every version needs a bf16 copy of its weights before it serves. A full fine-tuned
// version that arrives without one (the learner sends it when it has it) is rounded here one
// chunk between two scheduler steps at a time, then swapped in: requests keep running meanwhile.
// At int8 the same, and every full version's int8 copies are quantized after it, in chunks too.

import { parentPort, workerData } from 'node:worker_threads';
import { loadKernels } from '../kernels/index.js';
import { defaultKvCacheBytes, kvDtypeOf } from '../kv-cache-budget.js';
import { readModelFolder } from '../model/folder.js';
import { int8Tensors, Transformer } from '../model/transformer.js';
import { loadWeights, paramStoreOver } from '../model/weights.js';
import { Lora } from '../train/lora.js';
import { TextTokenizer } from '../../../chat/tokenizer/tokenizer.js';
import type { FromWorker, ToWorker, WorkerOptions } from './protocol.js';
import { PrefixCache } from './prefix-cache.js';
import { PrefixCacheCounters } from './prefix-cache-stats.js';
import { type PolicyWeights, Scheduler } from './scheduler.js';
import type { PolicyUpdate } from './protocol.js';
import {
  bf16ParamsOf,
  bf16ParamsOver,
  int8ParamsFor,
  int8ParamsOf,
  refreshBf16InChunks,
  resolvePrecision,
} from '../precision.js';

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
  const precision = resolvePrecision(options.precision, kernels);
  const baseBf16 = precision !== 'fp32' ? bf16ParamsOf(kernels, params.specs, params.data) : undefined;
  const int8Of = int8Tensors(folder.config);
  const baseInt8 = precision === 'int8' ? int8ParamsOf(kernels, params.specs, params.data, int8Of) : undefined;
  const kvDtype = kvDtypeOf(precision, options.kvCacheDtype);
  const base: PolicyWeights = {
    version: 0,
    model: new Transformer(folder.config, params, kernels, baseBf16, baseInt8, kvDtype),
    lora: null,
  };
  const kvCacheBytes = options.kvCacheBytes ?? defaultKvCacheBytes(folder.config, kvDtype);
  const prefix = new PrefixCache(kvCacheBytes, new PrefixCacheCounters(options.prefixStats));
  const scheduler = new Scheduler(
    base,
    folder.config,
    folder.eosTokenIds,
    () => tokenizer.createStreamDecoder(),
    options.maxStepTokens,
    new Int32Array(options.activity),
    prefix,
  );
  /** Full versions at bf16 or int8 whose copies are being made, in arrival order, with when they arrived. */
  // Publications behind one wait for it (with no chunks left to do), so versions go live in order.
  const converting: { version: number; chunks: Generator<void> | null; t: number; ready(): PolicyWeights }[] = [];
  const policyOf = (u: PolicyUpdate): PolicyWeights | null => {
    if (u.kind === 'lora')
      return { version: u.version, model: base.model, lora: new Lora(folder.config, u.spec, u.data) };
    const store = paramStoreOver(params.specs, new Float32Array(u.params));
    if (store.data.length !== params.data.length) {
      throw new Error(`version ${u.version} holds ${store.data.length} values, the model ${params.data.length}`);
    }
    if (precision === 'fp32')
      return {
        version: u.version,
        model: new Transformer(folder.config, store, kernels, undefined, undefined, kvDtype),
        lora: null,
      };
    const given = u.bf16 ? new Uint16Array(u.bf16) : null;
    if (given && given.length !== store.data.length) {
      throw new Error(`version ${u.version}'s bf16 copy holds ${given.length} values, the model ${store.data.length}`);
    }
    const copy = bf16ParamsOver(params.specs, given ?? new Uint16Array(store.data.length));
    const int8 = precision === 'int8' ? int8ParamsFor(params.specs, int8Of) : undefined;
    const model = () => new Transformer(folder.config, store, kernels, copy, int8, kvDtype);
    const ready = () => ({ version: u.version, model: model(), lora: null });
    if (given && !int8) return ready();
    const chunks = (function* () {
      if (!given) yield* refreshBf16InChunks(kernels, copy, store.data);
      if (int8) yield* int8.refreshInChunks(kernels, store.data);
    })();
    converting.push({ version: u.version, chunks, t: performance.now(), ready });
    return null;
  };

  let wake: (() => void) | null = null;
  let running = true;
  port.on('message', (m: ToWorker) => {
    try {
      if (m.type === 'generate') scheduler.addGeneration(m.id, Array.from(m.promptIds), m.sampling);
      else if (m.type === 'score')
        scheduler.addScore(m.id, Array.from(m.promptIds), Array.from(m.completionIds), m.topK, m.version);
      else if (m.type === 'publish') publish(m.update);
      else if (m.type === 'cancel') scheduler.cancel(m.id);
      else if (m.type === 'shutdown') running = false;
    } catch (e) {
      if (m.type === 'generate' || m.type === 'score')
        send({ type: 'failed', id: m.id, message: (e as Error).message });
    }
    wake?.();
  });
  const swapIn = (version: number, t: number, policy: () => PolicyWeights | null) => {
    try {
      const p = policy();
      if (!p) return;
      scheduler.publish(p);
      send({ type: 'published', version, swapMs: performance.now() - t });
    } catch (e) {
      send({ type: 'publishFailed', version, message: (e as Error).message });
    }
  };
  const publish = (update: PolicyUpdate) => {
    const t = performance.now();
    if (converting.length === 0) return swapIn(update.version, t, () => policyOf(update));
    try {
      const p = policyOf(update);
      if (p) converting.push({ version: update.version, chunks: null, t, ready: () => p });
    } catch (e) {
      send({ type: 'publishFailed', version: update.version, message: (e as Error).message });
    }
  };
  /** One chunk of the oldest pending conversion; the version is swapped in after its last one. */
  const convertSome = () => {
    const job = converting[0]!;
    if (job.chunks && !job.chunks.next().done) return;
    converting.shift();
    swapIn(job.version, job.t, job.ready);
  };
  send({
    type: 'ready',
    info: {
      kernels: kernels.name,
      kernelInfo: kernels.info,
      precision,
      kvDtype,
      kvCacheBytes,
      parameters: params.data.length,
      loadMs: performance.now() - t0,
      baseParams: params.data.buffer as SharedArrayBuffer,
      baseBf16: (baseBf16?.data.buffer as SharedArrayBuffer | undefined) ?? null,
    },
  });

  while (running) {
    if (converting.length > 0) convertSome();
    if (scheduler.idle && converting.length === 0) {
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = null;
      continue;
    }
    if (scheduler.idle) {
      await new Promise<void>((resolve) => setImmediate(resolve));
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
