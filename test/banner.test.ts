// serve's startup banner: where to point OpenClaw, with the model's real context and a reachable URL.
import assert from 'node:assert/strict';
import type { NetworkInterfaceInfo } from 'node:os';
import { test } from 'node:test';
import { advertisedUrl, startupBanner } from '../src/cli/banner.js';

const iface = (address: string, family: 'IPv4' | 'IPv6', internal: boolean) =>
  ({ address, family, internal, netmask: '', mac: '', cidr: null }) as NetworkInterfaceInfo;

test("the pasted provider config carries the model ids, the URL and the model's context", () => {
  const text = startupBanner({
    url: 'http://127.0.0.1:30000/v1',
    contextLength: 40960,
    mainModel: 'qwen3',
    sideModel: 'side-model',
    apiKeyRequired: false,
    learning: 'combine',
    store: '/data/x.sqlite',
    memory: 'prefix cache 64 MB',
  });
  const json = JSON.parse(text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1).replace(/^ {2}/gm, '')) as {
    models: {
      providers: Record<
        string,
        { baseUrl: string; apiKey: string; models: { id: string; contextWindow: number; maxTokens: number }[] }
      >;
    };
    agents: { defaults: { model: { primary: string }; heartbeat: { model: string } } };
  };
  const provider = json.models.providers['openclaw-rl']!;
  assert.equal(provider.baseUrl, 'http://127.0.0.1:30000/v1');
  assert.equal(provider.apiKey, 'local');
  assert.deepEqual(
    provider.models.map((m) => [m.id, m.contextWindow, m.maxTokens]),
    [
      ['qwen3', 40960, 1024],
      ['side-model', 40960, 1024],
    ],
  );
  assert.equal(json.agents.defaults.model.primary, 'openclaw-rl/qwen3');
  assert.equal(json.agents.defaults.heartbeat.model, 'openclaw-rl/side-model');
  assert.doesNotMatch(text, /start serve with --side-model/);
  assert.match(text, /\n {2}memory: {3}prefix cache 64 MB\n/);
});

test('without a side model the banner says how to add one; a small context caps maxTokens', () => {
  const text = startupBanner({
    url: 'http://127.0.0.1:1/v1',
    contextLength: 2048,
    mainModel: 'm',
    sideModel: null,
    apiKeyRequired: true,
    learning: 'off',
    store: 's',
    memory: 'm',
  });
  assert.match(text, /start serve with --side-model side-model/);
  assert.match(text, /"contextWindow": 2048,\n\s+"maxTokens": 512/);
  assert.match(text, /"apiKey": "<one of your OPENCLAW_RL_API_KEYS>"/);
});

test('a wildcard bind is advertised at an external IPv4 address, loopback when there is none', () => {
  const interfaces = {
    lo: [iface('127.0.0.1', 'IPv4', true)],
    eth0: [iface('fe80::1', 'IPv6', false), iface('10.1.2.3', 'IPv4', false)],
  };
  assert.equal(advertisedUrl('0.0.0.0', 30000, interfaces), 'http://10.1.2.3:30000/v1');
  assert.equal(advertisedUrl('::', 30000, interfaces), 'http://10.1.2.3:30000/v1');
  assert.equal(advertisedUrl('0.0.0.0', 30000, { lo: interfaces.lo }), 'http://127.0.0.1:30000/v1');
  assert.equal(advertisedUrl('127.0.0.1', 8, interfaces), 'http://127.0.0.1:8/v1');
  assert.equal(advertisedUrl('::1', 8, interfaces), 'http://[::1]:8/v1');
});
