// node-llama-cpp for the llama-cpp tests: the installed package (an optional dependency), else
// the copy the benches install under <repo>/.cache/bench-llama (bench/llama-cpp.ts).

import { fileURLToPath } from 'node:url';
import { LlamaCppSampler, type LlamaCppSamplerOptions } from '../../src/engine/llama-cpp/sampler.js';

export const NODE_LLAMA_CPP_FALLBACK = fileURLToPath(new URL('../../../.cache/bench-llama/', import.meta.url));

/** A CPU llama.cpp sampler over `modelDir` for tests (one thread: the test machines are small). */
export function openTestLlamaCpp(
  modelDir: string,
  opts: Partial<LlamaCppSamplerOptions> = {},
): Promise<LlamaCppSampler> {
  return LlamaCppSampler.open({
    modelDir,
    gpu: 'off',
    threads: 1,
    contextSize: 512,
    nodeLlamaCppFallback: NODE_LLAMA_CPP_FALLBACK,
    ...opts,
  });
}
