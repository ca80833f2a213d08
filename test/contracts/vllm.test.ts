// The Sampler and Scorer contracts against VllmSampler over the vLLM protocol test double
// (test/helpers/vllm-double.ts), which serves the embedded engine's tokens and log-probs.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RemoteServerError, ServerUnavailableError } from '../../src/engine/remote/http.js';
import { VllmSampler } from '../../src/engine/remote/vllm.js';
import { makeTinyModel } from '../helpers/models.js';
import {
  remoteConnectionTest,
  remoteExactnessTest,
  remoteFixture,
  remoteVersionTests,
} from '../helpers/remote-fixture.js';
import { startVllmDouble, VLLM_DOUBLE_MODEL } from '../helpers/vllm-double.js';
import { collect, samplerContract, scorerContract } from './sampler.js';

const model = makeTinyModel({ family: 'qwen3', seed: 61 });
const KEY = 'double-key';

async function openVllm() {
  const double = await startVllmDouble(model, { apiKey: KEY });
  const contextLength = double.engine.folder.config.maxPositionEmbeddings;
  const sampler = new VllmSampler({ url: double.url, model: VLLM_DOUBLE_MODEL, contextLength, apiKey: KEY });
  return remoteFixture(double, sampler, model);
}

samplerContract('vLLM over HTTP (protocol test double)', openVllm);
scorerContract('vLLM over HTTP (protocol test double)', openVllm);
remoteVersionTests('vLLM', model, openVllm, '/v1/unload_lora_adapter');

remoteExactnessTest('vLLM', openVllm);
remoteConnectionTest('vLLM', openVllm);

test('vLLM: a wrong key and a server answering outside the protocol are clear errors', async () => {
  const double = await startVllmDouble(model, { apiKey: KEY });
  try {
    const contextLength = double.engine.folder.config.maxPositionEmbeddings;
    const wrongKey = new VllmSampler({ url: double.url, model: VLLM_DOUBLE_MODEL, contextLength, apiKey: 'nope' });
    await assert.rejects(collect(wrongKey, [1, 2, 3], { maxTokens: 2 }), /answered 401/);
    const wrongModel = new VllmSampler({ url: double.url, model: 'other', contextLength, apiKey: KEY });
    await assert.rejects(collect(wrongModel, [1, 2, 3], { maxTokens: 2 }), (e: Error) => {
      assert.ok(e instanceof RemoteServerError);
      assert.match(e.message, /answered 404: .*'other' does not exist/);
      return true;
    });
  } finally {
    await double.close();
  }
});

test('vLLM: a stream that breaks the protocol, or no answer in time, is a clear error', async (t) => {
  const server = createServer((req, res) => {
    if (req.url === '/silent/v1/completions') return; // accepts, never answers
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`data: ${JSON.stringify({ choices: [{ index: 0, text: 'x', token_ids: [5, 6] }] })}\n\ndata: [DONE]\n\n`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const broken = new VllmSampler({ url: base, model: 'm', contextLength: 64 });
  await assert.rejects(collect(broken, [1, 2], { maxTokens: 2 }), (e: Error) => {
    assert.ok(e instanceof RemoteServerError && !(e instanceof ServerUnavailableError));
    assert.match(e.message, /vLLM at .* answered outside its protocol: 2 token ids but 0 log-probs/);
    return true;
  });
  const silent = new VllmSampler({ url: `${base}/silent`, model: 'm', contextLength: 64, timeoutMs: 200 });
  await assert.rejects(collect(silent, [1, 2], { maxTokens: 2 }), (e: Error) => {
    assert.ok(e instanceof ServerUnavailableError);
    assert.match(e.message, /no answer within 200 ms/);
    return true;
  });
});
