// node-llama-cpp for the llama-cpp tests: where `npm run setup:llama-cpp` installs it (the test
// command in the README runs it), <repo>/.cache/llama-cpp.

import { LlamaCppSampler, type LlamaCppSamplerOptions } from '../../src/engine/llama-cpp/sampler.js';

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
    ...opts,
  });
}
