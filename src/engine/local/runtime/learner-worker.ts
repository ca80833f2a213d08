// The learner worker: a LearnerCore over the sampler's shared base weights. Training steps are
// long synchronous computations; running them here keeps the serving thread responsive.

import { createHash } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import type { PolicyUpdate } from '../../types.js';
import { loadKernels } from '../kernels/index.js';
import { readModelFolder } from '../model/folder.js';
import { paramStoreOver, tensorSpecs } from '../model/weights.js';
import { policyVersionAt, readPolicyUpdate, writePolicyVersion } from '../policy-versions.js';
import { loadCheckpoint, saveCheckpoint } from '../train/checkpoint.js';
import { LearnerCore } from '../train/learner.js';
import { Lora } from '../train/lora.js';
import { servingYield } from './serving-yield.js';
import { bf16ParamsOver } from '../precision.js';
import type { FromLearner, LearnerReply, LearnerRequest, LearnerWorkerOptions } from './learner-protocol.js';

const port = parentPort!;
const options = workerData as LearnerWorkerOptions;
const send = (m: FromLearner) => port.postMessage(m);

function start(): void {
  const kernels = loadKernels();
  if (options.threads > 0) kernels.setThreads(options.threads);
  const { config: cfg } = readModelFolder(options.modelDir);
  const base = paramStoreOver(tensorSpecs(cfg), new Float32Array(options.baseParams));
  const modeOf = options.config.mode.kind === 'lora' ? options.config.mode.spec : 'full';
  // A checkpoint only resumes the run it belongs to: same model shape and training mode.
  const configHash = createHash('sha256')
    .update(JSON.stringify({ cfg, mode: options.config.mode }))
    .digest('hex')
    .slice(0, 16);
  const values = modeOf === 'full' ? base.data.length : new Lora(cfg, modeOf).data.length;
  const restored = options.checkpointDir ? loadCheckpoint(options.checkpointDir, { values, lora: modeOf }) : null;
  if (restored && restored.configHash !== configHash) {
    throw new Error(
      `the checkpoint in ${options.checkpointDir} belongs to another model or training mode; move it away or choose another data folder`,
    );
  }
  const pause = options.activity ? servingYield(new Int32Array(options.activity), options.maxYieldMs) : undefined;
  const baseBf16 = options.baseBf16 ? bf16ParamsOver(base.specs, new Uint16Array(options.baseBf16)) : undefined;
  const restore = restored ? { values: restored.trainable, optimizer: restored } : undefined;
  const learner = new LearnerCore(cfg, base, options.config, kernels, restore, pause, baseBf16);
  let version = Math.max(options.versionAfter, restored?.publishedVersion ?? 0);
  let consumed = restored?.consumedSampleIds ?? [];

  const handle = (r: LearnerRequest): LearnerReply => {
    switch (r.op) {
      case 'logprobs':
        return learner.logprobs(r.samples);
      case 'forwardBackward':
        return learner.forwardBackward(r.samples, r.loss, r.batchSize);
      case 'optimStep':
        return learner.optimStep();
      case 'publish': {
        const update = snapshot(++version);
        if (!options.versionsDir) return { version, kind: update.kind, path: null, update };
        return writePolicyVersion(options.versionsDir, update, {
          modelDir: options.modelDir,
          config: cfg,
          keep: options.keepVersions,
        });
      }
      case 'restore': {
        if (r.path === null) {
          learner.restore(null);
          return null;
        }
        const update = readPolicyUpdate(policyVersionAt(r.path), cfg);
        if (update.kind === 'lora') {
          const spec = learner.lora?.spec;
          const key = (x: { rank: number; alpha: number; targets: string[] }) =>
            JSON.stringify([x.rank, x.alpha, [...x.targets].sort()]);
          if (!spec || key(update.spec) !== key(spec))
            throw new Error(`${r.path} holds a LoRA adapter of another shape than this learner trains`);
          learner.restore(update.data);
        } else {
          if (learner.lora) throw new Error(`${r.path} holds full weights, this learner trains a LoRA adapter`);
          learner.restore(new Float32Array(update.params));
        }
        return null;
      }
      case 'save':
        consumed = r.consumedSampleIds;
        saveCheckpoint(options.checkpointDir ?? fail('no checkpoint folder was configured'), {
          step: learner.steps,
          consumedSampleIds: consumed,
          lora: modeOf,
          configHash,
          publishedVersion: version,
          trainable: learner.values,
          m: learner.optimizerState().m,
          v: learner.optimizerState().v,
          momentsFrom: learner.optimizerState().momentsFrom ?? 0,
        });
        return null;
    }
  };
  const snapshot = (v: number): PolicyUpdate => {
    if (learner.lora) return { version: v, kind: 'lora', spec: learner.lora.spec, data: learner.lora.data.slice() };
    const params = new SharedArrayBuffer(learner.params.data.byteLength);
    new Float32Array(params).set(learner.params.data);
    // A bf16 copy made here saves a bf16 engine the rounding; one the engine would not use is not sent.
    const ours = options.baseBf16 ? learner.bf16Values : null;
    if (!ours) return { version: v, kind: 'full', params };
    const bf16 = new SharedArrayBuffer(ours.byteLength);
    new Uint16Array(bf16).set(ours);
    return { version: v, kind: 'full', params, bf16 };
  };

  port.on('message', (m: { id: number; request: LearnerRequest }) => {
    try {
      send({ type: 'reply', id: m.id, result: handle(m.request) });
    } catch (e) {
      send({ type: 'failed', id: m.id, message: (e as Error).message });
    }
  });
  send({
    type: 'ready',
    status: {
      steps: learner.steps,
      version,
      consumedSampleIds: consumed,
      kernels: kernels.name,
      packedBytes: learner.packedBytes,
    },
  });
}

function fail(message: string): never {
  throw new Error(message);
}

try {
  start();
} catch (e) {
  send({ type: 'fatal', message: (e as Error).message });
}
