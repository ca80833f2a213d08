// serve's --sampler / --gpu / --gguf-type flags (src/cli/serve-llama-cpp.ts, src/cli/sampler-choice.ts).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CliError } from '../src/cli/args.js';
import { remoteSamplerChoice } from '../src/cli/sampler-choice.js';
import { llamaCppChoiceOf } from '../src/cli/serve-llama-cpp.js';

test('--sampler llama-cpp takes --gpu and --gguf-type; the embedded sampler takes neither', () => {
  assert.equal(llamaCppChoiceOf({}), null);
  assert.equal(llamaCppChoiceOf({ sampler: 'embedded' }), null);
  assert.deepEqual(llamaCppChoiceOf({ sampler: 'llama-cpp' }), { gpu: 'auto', ggufType: 'F16' });
  assert.deepEqual(llamaCppChoiceOf({ sampler: 'llama-cpp', gpu: 'off', 'gguf-type': 'Q8_0' }), {
    gpu: 'off',
    ggufType: 'Q8_0',
  });
  const rejects = (v: Record<string, unknown>, message: RegExp) =>
    assert.throws(
      () => llamaCppChoiceOf(v),
      (e: Error) => e instanceof CliError && message.test(e.message),
    );
  rejects({ gpu: 'off' }, /--gpu needs --sampler llama-cpp/);
  rejects({ sampler: 'embedded', 'gguf-type': 'f16' }, /--gguf-type needs --sampler llama-cpp/);
  // Another sampler's value is the other choice's to check (src/cli/sampler-choice.ts).
  assert.equal(llamaCppChoiceOf({ sampler: 'vllm' }), null);
  rejects({ sampler: 'vllm', gpu: 'off' }, /--gpu needs --sampler llama-cpp/);
  assert.throws(
    () => remoteSamplerChoice({ sampler: 'llama' }),
    (e: Error) =>
      e instanceof CliError && /--sampler takes embedded, llama-cpp, vllm or sglang, got "llama"/.test(e.message),
  );
  assert.equal(remoteSamplerChoice({ sampler: 'llama-cpp' }), null);
  assert.throws(
    () => remoteSamplerChoice({ sampler: 'llama-cpp', 'sampler-url': 'http://127.0.0.1:1' }),
    (e: Error) => e instanceof CliError && /--sampler-url and --sampler-model need --sampler vllm/.test(e.message),
  );
  rejects({ sampler: 'llama-cpp', gpu: 'cuda' }, /--gpu must be auto or off/);
  rejects({ sampler: 'llama-cpp', 'gguf-type': 'q4_k' }, /--gguf-type must be f16 or q8_0/);
});
