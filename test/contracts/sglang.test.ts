// The Sampler and Scorer contracts against SglangSampler over the SGLang protocol test double
// (test/helpers/sglang-double.ts), which serves the embedded engine's tokens and log-probs.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RemoteServerError } from '../../src/engine/remote/http.js';
import { SglangSampler } from '../../src/engine/remote/sglang.js';
import { makeTinyModel } from '../helpers/models.js';
import {
  remoteConnectionTest,
  remoteExactnessTest,
  remoteFixture,
  remoteVersionTests,
} from '../helpers/remote-fixture.js';
import { startSglangDouble } from '../helpers/sglang-double.js';
import { collect, samplerContract, scorerContract } from './sampler.js';

const model = makeTinyModel({ family: 'qwen3', seed: 61 });
const KEY = 'double-key';

async function openSglang() {
  const double = await startSglangDouble(model, { apiKey: KEY });
  const contextLength = double.engine.folder.config.maxPositionEmbeddings;
  const sampler = new SglangSampler({ url: double.url, model: 'base', contextLength, apiKey: KEY });
  return remoteFixture(double, sampler, model);
}

samplerContract('SGLang over HTTP (protocol test double)', openSglang);
scorerContract('SGLang over HTTP (protocol test double)', openSglang);
remoteVersionTests('SGLang', model, openSglang, '/unload_lora_adapter');

remoteExactnessTest('SGLang', openSglang);
remoteConnectionTest('SGLang', openSglang);

test('SGLang: a wrong key and a server answering outside the protocol are clear errors', async () => {
  const double = await startSglangDouble(model, { apiKey: KEY });
  try {
    const contextLength = double.engine.folder.config.maxPositionEmbeddings;
    const wrongKey = new SglangSampler({ url: double.url, model: 'base', contextLength, apiKey: 'nope' });
    await assert.rejects(collect(wrongKey, [1, 2, 3], { maxTokens: 2 }), /answered 401/);
    const sampler = new SglangSampler({ url: double.url, model: 'base', contextLength, apiKey: KEY });
    await assert.rejects(sampler.use({ version: 1, kind: 'lora', path: '/nowhere/v-1' }), (e: Error) => {
      assert.ok(e instanceof RemoteServerError);
      assert.match(e.message, /SGLang at .* could not load the LoRA adapter \/nowhere\/v-1: .*no such folder/);
      return true;
    });
  } finally {
    await double.close();
  }
});
