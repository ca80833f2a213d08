// serve's --sampler / --gpu / --gguf-type flags (src/cli/serve-llama-cpp.ts).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CliError } from '../src/cli/args.js';
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
  rejects({ sampler: 'llama' }, /--sampler must be embedded or llama-cpp, got "llama"/);
  rejects({ sampler: 'llama-cpp', gpu: 'cuda' }, /--gpu must be auto or off/);
  rejects({ sampler: 'llama-cpp', 'gguf-type': 'q4_k' }, /--gguf-type must be f16 or q8_0/);
});
