// node-llama-cpp (prebuilt llama.cpp binaries for CPU, CUDA, Vulkan and Metal) loaded at run time,
// with the few calls we use typed here so the package is not needed to compile. It is installed on
// request (`npm run setup:llama-cpp`, scripts/install-llama-cpp.mjs) into <package>/.cache/llama-cpp,
// or by the user as a package. `openLlama` never downloads or builds llama.cpp: it uses the prebuilt
// binaries installed, or fails with a message that says what to do.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export type Token = number;

export interface ControlledEvaluateOutput {
  next: { token?: Token | null; logits?: Map<Token, number>; totalLogitWeight?: number };
}

/** llama.cpp's sampler chain for one position: top-k, top-p, min-p, then temperature (0: argmax), then a seeded draw. */
export interface SamplerChainOptions {
  temperature: number;
  /** 0: the whole vocabulary (kept sorted by logit). */
  topK?: number;
  topP?: number;
  minP?: number;
  seed?: number;
}

/**
 * What to return for the next token: the sampled `token`; `logits` of every id (true; a Map of the
 * whole vocabulary) or of a few (the `filter`: given ids, the sampled one, the `includeTop` largest);
 * `totalLogitWeight`: sum(exp(logit - max logit)) over the candidates the chain left. Logits are
 * the chain's (after temperature).
 */
export interface GenerateNext {
  token?: boolean;
  logits?: true | { filter: { tokens: Token[]; includeSelected?: boolean; includeTop?: number } };
  totalLogitWeight?: boolean;
  options?: SamplerChainOptions;
}

export type ControlledEvaluateInput = Token | [Token, { generateNext?: GenerateNext }];

export interface LlamaContextSequence {
  controlledEvaluate(input: ControlledEvaluateInput[]): Promise<(ControlledEvaluateOutput | undefined)[]>;
  /** Drops the tokens at [start, end) from the sequence (and the KV cache). */
  eraseContextTokenRanges(ranges: { start: number; end: number }[]): Promise<void>;
  /** Tokens the sequence holds. */
  readonly nextTokenIndex: number;
  clearHistory(): Promise<void>;
  dispose(): void;
  readonly contextSize: number;
}

export interface LlamaContext {
  getSequence(): LlamaContextSequence;
  readonly sequencesLeft: number;
  dispose(): Promise<void>;
}

export interface LlamaContextOptions {
  contextSize: number;
  sequences: number;
  batchSize?: number;
  threads?: number;
  flashAttention?: boolean;
  lora?: { adapters: { filePath: string; scale?: number }[] };
  /** When a context's queued evaluations go to llama.cpp as one batch (default "nextCycle": setImmediate). */
  batching?: { dispatchSchedule?: 'nextCycle' | ((dispatch: () => void) => void) };
}

export interface LlamaModel {
  createContext(options: LlamaContextOptions): Promise<LlamaContext>;
  dispose(): Promise<void>;
}

export interface Llama {
  loadModel(options: { modelPath: string; gpuLayers?: number | 'auto' }): Promise<LlamaModel>;
  /** The GPU backend in use ("cuda", "vulkan", "metal"), or false on the CPU. */
  readonly gpu: string | false;
  dispose(): Promise<void>;
}

export interface NodeLlamaCpp {
  getLlama(options: Record<string, unknown>): Promise<Llama>;
  LlamaLogLevel: Record<string, unknown>;
}

/** The pinned version (scripts/install-llama-cpp.mjs installs it), for messages. */
export const NODE_LLAMA_CPP_VERSION = '3.22.1';

/** Where `npm run setup:llama-cpp` installs it: <package root>/.cache/llama-cpp (from dist/src/engine/llama-cpp/). */
export const LLAMA_CPP_PREFIX = fileURLToPath(new URL('../../../../.cache/llama-cpp/', import.meta.url));

/** node-llama-cpp is missing or does not load here; the message says what to do. */
export class NodeLlamaCppMissingError extends Error {
  constructor(detail: string) {
    super(
      `the llama-cpp sampler needs node-llama-cpp ${NODE_LLAMA_CPP_VERSION} (prebuilt llama.cpp binaries): ` +
        `${detail}. Install it with \`npm run setup:llama-cpp\` in the openclaw-rl folder (add \`-- --gpu cuda\` ` +
        'or `-- --gpu vulkan` for a GPU build), or serve with --sampler embedded',
    );
    this.name = 'NodeLlamaCppMissingError';
  }
}

/**
 * Imports node-llama-cpp: an installed package first; else the copy `npm run setup:llama-cpp`
 * installed under <fallbackPrefix>/node_modules. `name` is for tests.
 */
export async function importNodeLlamaCpp(
  fallbackPrefix: string = LLAMA_CPP_PREFIX,
  name = 'node-llama-cpp',
): Promise<NodeLlamaCpp> {
  let first: Error;
  try {
    return (await import(name)) as NodeLlamaCpp;
  } catch (e) {
    first = e as Error;
  }
  const entry = fallbackPrefix && join(fallbackPrefix, 'node_modules', name, 'dist', 'index.js');
  if (entry && existsSync(entry)) {
    try {
      return (await import(pathToFileURL(entry).href)) as NodeLlamaCpp;
    } catch (e) {
      throw new NodeLlamaCppMissingError(`${entry} did not load (${(e as Error).message})`);
    }
  }
  const code = (first as NodeJS.ErrnoException).code;
  throw new NodeLlamaCppMissingError(
    code === 'ERR_MODULE_NOT_FOUND' ? 'it is not installed' : `it did not load (${first.message})`,
  );
}

export type GpuChoice = 'auto' | 'off';

/** llama.cpp with its prebuilt binaries: the best GPU backend installed (auto) or the CPU (off). */
export async function openLlama(mod: NodeLlamaCpp, gpu: GpuChoice, threads?: number): Promise<Llama> {
  try {
    return await mod.getLlama({
      gpu: gpu === 'off' ? false : 'auto',
      build: 'never',
      usePrebuiltBinaries: true,
      skipDownload: true,
      progressLogs: false,
      logLevel: mod.LlamaLogLevel.error,
      ...(threads === undefined ? {} : { maxThreads: threads }),
    });
  } catch (e) {
    throw new NodeLlamaCppMissingError(
      `no prebuilt llama.cpp binary for ${process.platform}-${process.arch} loaded (${(e as Error).message})`,
    );
  }
}
