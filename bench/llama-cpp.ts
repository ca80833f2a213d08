// llama.cpp through node-llama-cpp for the benchmarks, run directly (not through our sampler):
// installed on demand by scripts/install-llama-cpp.mjs into .cache/llama-cpp/ at the pinned
// version, with this platform's prebuilt CPU binaries only (for linux-x64, ggml CPU backends for
// each x86 level, picked at load time), without node-llama-cpp's postinstall.

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { folderGgufSource, type GgufWeightType, writeModelGguf } from '../src/engine/llama-cpp/gguf.js';
import { ROOT } from './models.js';

export const NODE_LLAMA_CPP_VERSION = '3.22.1';
export const LLAMA_PREFIX = join(ROOT, '.cache', 'llama-cpp');

// The few node-llama-cpp calls we use, typed here so the package is not needed to compile.
/** node-llama-cpp's sampling options (its defaults at temperature > 0: topK 40, topP 0.95; topK 0 is the whole vocabulary). */
export interface LlamaSampling {
  temperature: number;
  topK?: number;
  topP?: number;
  seed?: number;
  /** Go on past an end-of-text token (as our sampler does with no stop tokens). */
  yieldEogToken?: boolean;
}
interface LlamaSequence {
  evaluate(tokens: number[], options?: LlamaSampling): AsyncGenerator<number, void, unknown>;
  clearHistory(): Promise<void>;
}
interface LlamaContext {
  getSequence(): LlamaSequence;
  dispose(): Promise<void>;
}
interface LlamaModel {
  createContext(o: {
    contextSize: number;
    batchSize: number;
    threads: { ideal: number; min: number };
    sequences: number;
    flashAttention?: boolean;
  }): Promise<LlamaContext>;
  dispose(): Promise<void>;
}
interface Llama {
  loadModel(o: { modelPath: string; gpuLayers: number; useMmap?: boolean }): Promise<LlamaModel>;
  readonly systemInfo: string;
  readonly buildType: string;
  readonly gpu: unknown;
  dispose(): Promise<void>;
}
interface NodeLlamaCpp {
  getLlama(o: Record<string, unknown>): Promise<Llama>;
  LlamaLogLevel: Record<string, unknown>;
}

/** Imports node-llama-cpp, installing it first (scripts/install-llama-cpp.mjs) if missing; a reason string if that fails. */
export async function importNodeLlamaCpp(): Promise<NodeLlamaCpp | string> {
  const entry = join(LLAMA_PREFIX, 'node_modules', 'node-llama-cpp', 'dist', 'index.js');
  if (!existsSync(entry)) {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts', 'install-llama-cpp.mjs')], { stdio: 'inherit' });
    if (r.status !== 0 || !existsSync(entry)) return `scripts/install-llama-cpp.mjs failed (${r.status})`;
  }
  try {
    return (await import(pathToFileURL(entry).href)) as NodeLlamaCpp;
  } catch (e) {
    return `node-llama-cpp did not load: ${(e as Error).message}`;
  }
}

export async function openLlama(mod: NodeLlamaCpp, threads: number): Promise<Llama> {
  return mod.getLlama({
    gpu: false,
    build: 'never',
    usePrebuiltBinaries: true,
    skipDownload: true,
    progressLogs: false,
    maxThreads: threads,
    logLevel: mod.LlamaLogLevel.error,
  });
}

export interface DecodeRun {
  prefillTokPerS: number;
  decodeTokPerS: number;
  tokens: number[];
}

/** A loaded GGUF ready for greedy runs: prompt ids in, generated ids and timings out. */
export class LlamaRunner {
  private constructor(
    private readonly model: LlamaModel,
    private readonly ctx: LlamaContext,
    private readonly seq: LlamaSequence,
  ) {}

  /** `flashAttention` unset: node-llama-cpp's default (on where llama.cpp supports it, the CPU included). */
  static async open(
    llama: Llama,
    path: string,
    threads: number,
    contextSize: number,
    flashAttention?: boolean,
  ): Promise<LlamaRunner> {
    const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
    const ctx = await model.createContext({
      contextSize,
      batchSize: 512,
      threads: { ideal: threads, min: threads },
      sequences: 1,
      ...(flashAttention === undefined ? {} : { flashAttention }),
    });
    return new LlamaRunner(model, ctx, ctx.getSequence());
  }

  /**
   * `n` tokens after `prompt` (greedy unless `sampling` says otherwise), timed as our engine's runs
   * are: prefill to the first token, decode after it.
   */
  async run(prompt: number[], n: number, sampling: LlamaSampling = { temperature: 0 }): Promise<DecodeRun> {
    await this.seq.clearHistory();
    const tokens: number[] = [];
    const t0 = performance.now();
    let first = 0;
    for await (const t of this.seq.evaluate(prompt, sampling)) {
      if (tokens.length === 0) first = performance.now();
      tokens.push(t);
      if (tokens.length >= n) break;
    }
    const end = performance.now();
    return {
      prefillTokPerS: prompt.length / ((first - t0) / 1000),
      decodeTokPerS: (tokens.length - 1) / ((end - first) / 1000),
      tokens,
    };
  }

  async close(): Promise<void> {
    await this.ctx.dispose();
    await this.model.dispose();
  }
}

/** The model folder `dir` as a GGUF of `type` in .cache/bench-gguf/, converted when missing or older than the weights. */
export function cachedGguf(name: string, dir: string, type: GgufWeightType): string {
  const out = join(ROOT, '.cache', 'bench-gguf', `${name}-${type}.gguf`);
  mkdirSync(join(ROOT, '.cache', 'bench-gguf'), { recursive: true });
  if (!existsSync(out) || statSync(out).mtimeMs < statSync(join(dir, 'model.safetensors')).mtimeMs) {
    const t0 = performance.now();
    const bytes = writeModelGguf(folderGgufSource(dir), out, type, `openclaw-rl ${name}`);
    console.log(
      `wrote ${out} (${(bytes / 2 ** 20).toFixed(0)} MiB) in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
  }
  return out;
}
