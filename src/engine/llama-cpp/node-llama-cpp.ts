// node-llama-cpp (an optional dependency: prebuilt llama.cpp binaries for CPU, CUDA, Vulkan and
// Metal) loaded at run time, with the few calls we use typed here so the package is not needed to
// compile. `openLlama` never downloads or builds llama.cpp: it uses the prebuilt binaries npm
// installed, or fails with a message that says what to do.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export type Token = number;

export interface ControlledEvaluateOutput {
  next: { logits?: Map<Token, number> };
}

export type ControlledEvaluateInput = Token | [Token, { generateNext?: { logits?: boolean } }];

export interface LlamaContextSequence {
  controlledEvaluate(input: ControlledEvaluateInput[]): Promise<(ControlledEvaluateOutput | undefined)[]>;
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

/** The pinned version (package.json's optionalDependencies), for messages. */
export const NODE_LLAMA_CPP_VERSION = '3.22.1';

/** node-llama-cpp is missing or does not load here; the message says what to do. */
export class NodeLlamaCppMissingError extends Error {
  constructor(detail: string) {
    super(
      `the llama-cpp sampler needs node-llama-cpp ${NODE_LLAMA_CPP_VERSION} (an optional dependency ` +
        `with prebuilt llama.cpp binaries): ${detail}. Install it with \`npm install node-llama-cpp@${NODE_LLAMA_CPP_VERSION}\` ` +
        'or reinstall without --omit=optional, or serve with --sampler embedded',
    );
    this.name = 'NodeLlamaCppMissingError';
  }
}

/**
 * Imports node-llama-cpp: the installed package first; else, when `fallbackPrefix` is given (tests
 * and benches), the copy npm installed under <fallbackPrefix>/node_modules. `name` is for tests.
 */
export async function importNodeLlamaCpp(fallbackPrefix?: string, name = 'node-llama-cpp'): Promise<NodeLlamaCpp> {
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
