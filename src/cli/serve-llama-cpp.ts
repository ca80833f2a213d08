// serve's `--sampler llama-cpp`: llama.cpp in-process (node-llama-cpp) serves the requests, the
// self-judge and the teacher's scoring, while the embedded learner keeps training on the local
// engine and publishes each version to a folder that llama.cpp loads (LoRA: a GGUF adapter;
// full: a GGUF model loaded in the background). Kept apart from serve.ts and serve-learning.ts,
// which only spread these in.

import { join } from 'node:path';
import { LlamaCppSampler } from '../engine/llama-cpp/sampler.js';
import type { GpuChoice } from '../engine/llama-cpp/node-llama-cpp.js';
import type { PolicyVersion } from '../engine/policy-version.js';
import type { Publication } from '../engine/local/learner.js';
import type { Learner, Sampler, Scorer } from '../engine/types.js';
import type { ChatBackend } from '../gateway/backend.js';
import { CliError } from './args.js';

export const LLAMA_CPP_FLAGS = {
  sampler: { type: 'string' },
  gpu: { type: 'string' },
  'gguf-type': { type: 'string' },
} as const;

export const LLAMA_CPP_USAGE = `
  --sampler llama-cpp     llama.cpp in-process through node-llama-cpp; the model is converted to GGUF
                          once, into MODEL/gguf/
  --gpu auto|off          llama-cpp: offload to the best GPU backend installed (CUDA, Vulkan, Metal;
                          default auto) or stay on the CPU
  --gguf-type T           llama-cpp: f16 (default) or q8_0 weights`;

export interface LlamaCppChoice {
  gpu: GpuChoice;
  ggufType: 'F16' | 'Q8_0';
}

/** The llama-cpp settings for `--sampler llama-cpp`, or null for the embedded sampler. */
export function llamaCppChoiceOf(v: Record<string, unknown>): LlamaCppChoice | null {
  const sampler = v.sampler ?? 'embedded';
  if (sampler !== 'llama-cpp') {
    for (const flag of ['gpu', 'gguf-type'])
      if (v[flag] !== undefined) throw new CliError(`--${flag} needs --sampler llama-cpp`);
    return null;
  }
  const gpu = (v.gpu ?? 'auto') as string;
  if (gpu !== 'auto' && gpu !== 'off') throw new CliError(`--gpu must be auto or off, got "${gpu}"`);
  const type = ((v['gguf-type'] ?? 'f16') as string).toLowerCase();
  if (type !== 'f16' && type !== 'q8_0') throw new CliError(`--gguf-type must be f16 or q8_0, got "${type}"`);
  return { gpu, ggufType: type === 'f16' ? 'F16' : 'Q8_0' };
}

/** What learning needs of a sampler other than the local engine. */
export interface ServingSampler {
  sampler: Sampler & Scorer;
  /** The version new requests run on. */
  version(): number;
  /** Where the learner writes each version for the sampler to load. */
  versionsDir: string;
  /** Loads a published version; resolves with the switch's ms. */
  use(version: PolicyVersion): Promise<number>;
}

/**
 * Opens llama.cpp on `modelDir` and returns the gateway's backend serving through it (the chat
 * codec stays `backend`'s) plus what the learning loop publishes to.
 */
export async function openLlamaCppServing(a: {
  choice: LlamaCppChoice;
  modelDir: string;
  dataDir: string;
  backend: ChatBackend;
  threads?: number;
  log: (event: string, fields: Record<string, unknown>) => void;
}): Promise<{ backend: ChatBackend; serving: ServingSampler }> {
  let sampler: LlamaCppSampler;
  try {
    sampler = await LlamaCppSampler.open({
      modelDir: a.modelDir,
      ggufType: a.choice.ggufType,
      gpu: a.choice.gpu,
      ...(a.threads === undefined ? {} : { threads: a.threads }),
      log: a.log,
    });
  } catch (e) {
    throw new CliError(`--sampler llama-cpp: ${(e as Error).message}`);
  }
  const embedded = a.backend;
  return {
    backend: {
      ...embedded,
      sampler,
      contextLength: sampler.contextSize,
      async close() {
        await sampler.close();
        await embedded.close();
      },
    },
    serving: {
      sampler,
      version: () => sampler.version,
      versionsDir: join(a.dataDir, 'versions'),
      use: (v) => sampler.use(v),
    },
  };
}

/** Publishes the learner's next version and loads it into the serving sampler, timing both. */
export async function publishToServing(
  learner: Pick<Learner, 'publish'>,
  serving: ServingSampler,
): Promise<Publication> {
  const t0 = performance.now();
  const version = await learner.publish();
  const snapshotMs = performance.now() - t0;
  return { version: version.version, snapshotMs, swapMs: await serving.use(version), weightsPath: version.path };
}
