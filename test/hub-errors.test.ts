// What resolveModel says when it cannot deliver: offline, private and gated repos, missing
// repos, repos the engine cannot load, offline mode, a stalled or failing server. Each message is
// checked for the advice it must carry, and tokens for where they go.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, test } from 'node:test';
import { HubError, resolveModel, type ResolveOptions } from '../src/hub/index.js';
import { closedPort, HubDouble } from './helpers/hub-double.js';
import { makeTinyModel, scratchDir } from './helpers/models.js';

delete process.env.HF_HUB_OFFLINE;

const model = makeTinyModel({ family: 'qwen3' });
const read = (f: string) => readFileSync(join(model, f));
const folderFiles = {
  'config.json': read('config.json'),
  'tokenizer.json': read('tokenizer.json'),
  'tokenizer_config.json': read('tokenizer_config.json'),
};
let hub: HubDouble;

before(async () => {
  hub = await HubDouble.start([
    { id: 'test/tiny', dir: model },
    { id: 'acme/private', dir: model, token: 'hf_right' },
    { id: 'acme/gated', dir: model, token: 'hf_right', gated: true },
    { id: 'old/bin-only', files: { ...folderFiles, 'pytorch_model.bin': 'pickle' } },
    { id: 'old/gguf-only', files: { 'config.json': '{}', 'model-Q4_K_M.gguf': 'GGUF' } },
    {
      id: 'old/slow-tokenizer',
      files: {
        'config.json': read('config.json'),
        'tokenizer_config.json': '{}',
        'vocab.json': '{}',
        'merges.txt': '',
        'model.safetensors': read('model.safetensors'),
      },
    },
  ]);
});
afterEach(() => {
  hub.knobs = {};
});
after(() => hub.close());

const opts = (extra: ResolveOptions = {}): ResolveOptions => ({
  cacheDir: scratchDir('ocrl-hub-'),
  endpoint: hub.endpoint,
  token: '',
  retryDelayMs: 5,
  ...extra,
});
const fails = (code: HubError['code'], pattern: RegExp) => (e: unknown) => {
  assert.ok(e instanceof HubError, `a HubError, got ${String(e)}`);
  assert.equal(e.code, code, e.message);
  assert.match(e.message, pattern);
  return true;
};

test('no server: the offline message, naming the endpoint, the model and the cause', async () => {
  const port = await closedPort();
  await assert.rejects(
    resolveModel('Qwen/Qwen3-0.6B', opts({ endpoint: `http://127.0.0.1:${port}` })),
    fails(
      'offline',
      new RegExp(
        `^cannot reach http://127\\.0\\.0\\.1:${port} to download Qwen/Qwen3-0\\.6B \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\)\\. ` +
          'This machine may be offline: download the model folder elsewhere and pass its path to --model, or set HF_ENDPOINT to a mirror\\.$',
      ),
    ),
  );
});

test('HF_ENDPOINT is the default endpoint', async () => {
  const saved = process.env.HF_ENDPOINT;
  process.env.HF_ENDPOINT = `${hub.endpoint}/`;
  try {
    const o = opts();
    delete o.endpoint;
    assert.ok(existsSync(join(await resolveModel('test/tiny', o), 'model.safetensors')));
  } finally {
    if (saved === undefined) delete process.env.HF_ENDPOINT;
    else process.env.HF_ENDPOINT = saved;
  }
});

test('a private repo needs HF_TOKEN; the token goes to the Hub and never to the CDN', async () => {
  await assert.rejects(
    resolveModel('acme/private', opts()),
    fails(
      'not-found',
      /acme\/private was not found on http:\/\/127\.0\.0\.1:\d+ \(HTTP 401 RepoNotFound.*if it is a private or gated model, set HF_TOKEN/,
    ),
  );
  await assert.rejects(
    resolveModel('acme/private', opts({ token: 'hf_wrong' })),
    fails('not-found', /HTTP 404 RepoNotFound.*the token in HF_TOKEN does not have access/),
  );
  const seen = hub.requests.length;
  const saved = process.env.HF_TOKEN;
  process.env.HF_TOKEN = 'hf_right';
  try {
    const o = opts();
    delete o.token; // from the environment, as a user would set it
    assert.ok(existsSync(join(await resolveModel('acme/private', o), 'model.safetensors')));
  } finally {
    if (saved === undefined) delete process.env.HF_TOKEN;
    else process.env.HF_TOKEN = saved;
  }
  const sent = hub.requests.slice(seen);
  assert.ok(
    sent.some((r) => r.server === 'cdn'),
    'weights came from the CDN',
  );
  for (const r of sent)
    assert.equal(r.authorization, r.server === 'hub' ? 'Bearer hf_right' : undefined, `${r.server} ${r.path}`);
});

test('a gated repo: accept the conditions, and use a token of that account', async () => {
  await assert.rejects(
    resolveModel('acme/gated', opts()),
    fails(
      'auth',
      /acme\/gated is a gated model \(HTTP 401 GatedRepo.*accept its conditions on http:\/\/127\.0\.0\.1:\d+\/acme\/gated and set HF_TOKEN/,
    ),
  );
  await assert.rejects(
    resolveModel('acme/gated', opts({ token: 'hf_other' })),
    fails('auth', /HTTP 403 GatedRepo.*make sure the token in HF_TOKEN belongs to that account/),
  );
  assert.ok(existsSync(join(await resolveModel('acme/gated', opts({ token: 'hf_right' })), 'config.json')));
});

test('a missing repo says so, and mentions that no local folder of that name exists', async () => {
  await assert.rejects(
    resolveModel('nobody/nothing', opts({ token: 'hf_any' })),
    fails(
      'not-found',
      /^nobody\/nothing was not found on http:\/\/127\.0\.0\.1:\d+ \(HTTP 404 RepoNotFound: Repository not found\), and there is no local folder "nobody\/nothing"\. Check the model id/,
    ),
  );
});

test('repos the engine cannot load are refused before any download', async () => {
  const seen = hub.requests.length;
  await assert.rejects(
    resolveModel('old/bin-only', opts()),
    fails(
      'unsupported',
      /old\/bin-only has no model\.safetensors or model\.safetensors\.index\.json \(it has PyTorch \.bin files\)\. The engine loads safetensors weights only/,
    ),
  );
  await assert.rejects(resolveModel('old/gguf-only', opts()), fails('unsupported', /\(it has GGUF files\)/));
  await assert.rejects(
    resolveModel('old/slow-tokenizer', opts()),
    fails('unsupported', /old\/slow-tokenizer has no tokenizer\.json: the engine needs the fast tokenizer file/),
  );
  assert.ok(
    hub.requests.slice(seen).every((r) => r.path.startsWith('/api/')),
    'only the file lists were asked for',
  );
});

test('offline mode serves the cache and refuses the rest; refresh falls back to the cache when offline', async () => {
  const o = opts();
  await assert.rejects(
    resolveModel('test/tiny', { ...o, offline: true }),
    fails('not-cached', /test\/tiny@main is not in the cache .*offline mode is on \(HF_HUB_OFFLINE\)/),
  );
  const dir = await resolveModel('test/tiny', o);
  const offline = `http://127.0.0.1:${await closedPort()}`;
  assert.equal(await resolveModel('test/tiny', { ...o, offline: true }), dir);
  assert.equal(await resolveModel('test/tiny', { ...o, endpoint: offline, refresh: true }), dir);
  process.env.HF_HUB_OFFLINE = '1';
  try {
    await assert.rejects(resolveModel('test/other', o), fails('not-cached', /HF_HUB_OFFLINE/));
  } finally {
    delete process.env.HF_HUB_OFFLINE;
  }
});

test('server errors on the file list are retried, then reported', async () => {
  hub.knobs.failInfo = { status: 503, times: 2 };
  assert.ok(existsSync(await resolveModel('test/tiny', opts())));
  hub.knobs.failInfo = { status: 503, times: 3 };
  await assert.rejects(
    resolveModel('test/tiny', opts()),
    fails('http', /answered HTTP 503: Service Unavailable for the file list of test\/tiny@main/),
  );
});

test('a stalled server times out, is retried, and then reported', async () => {
  hub.knobs = { stallMs: 400 };
  await assert.rejects(
    resolveModel('test/tiny', opts({ timeoutMs: 150, retries: 1 })),
    fails(
      'network',
      /^downloading \S+ of test\/tiny from 127\.0\.0\.1:\d+ failed after 1 retry \(no answer from 127\.0\.0\.1:\d+ for 0\.15 s while waiting for the response\); run again to retry\.$/,
    ),
  );
});
