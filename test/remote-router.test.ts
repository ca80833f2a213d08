// SamplerRouter over two vLLM protocol test doubles (test/helpers/vllm-double.ts): session
// affinity, failover when one server is down, and a publication across both with requests in
// flight and none refused.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { policyVersionAt, writePolicyVersion } from '../src/engine/local/policy-versions.js';
import { SamplerRouter } from '../src/engine/remote/router.js';
import { VllmSampler } from '../src/engine/remote/vllm.js';
import { collect } from './contracts/sampler.js';
import type { InferenceDouble } from './helpers/inference-double.js';
import { makeTinyModel, scratchDir } from './helpers/models.js';
import { randomLoraUpdate } from './helpers/policy-updates.js';
import { startVllmDouble, VLLM_DOUBLE_MODEL } from './helpers/vllm-double.js';

const model = makeTinyModel({ family: 'qwen3', seed: 71 });
let doubles: InferenceDouble[] = [];

before(async () => {
  doubles = [await startVllmDouble(model), await startVllmDouble(model)];
});
after(async () => {
  for (const d of doubles) await d.close();
});

function routerOver(ds: InferenceDouble[], retryAfterMs = 60_000): SamplerRouter {
  const contextLength = ds[0]!.engine.folder.config.maxPositionEmbeddings;
  return new SamplerRouter(
    ds.map((d) => new VllmSampler({ url: d.url, model: VLLM_DOUBLE_MODEL, contextLength, timeoutMs: 5000 })),
    { retryAfterMs },
  );
}

const served = () => doubles.map((d) => d.generations());

test('requests with one routing key go to one server; the keys spread over both', async () => {
  const router = routerOver(doubles);
  const owners = new Map<string, number>();
  // Twenty sessions: the chance that all land on one server (ports change each run) is 2^-19.
  for (let s = 0; s < 20; s++) {
    for (let turn = 0; turn < 2; turn++) {
      const before = served();
      await collect(router, [3, 5, 7 + turn], { maxTokens: 2, seed: turn, routingKey: `session-${s}` });
      const owner = served().findIndex((n, i) => n > before[i]!);
      assert.equal(owners.get(`session-${s}`) ?? owner, owner, `session-${s} moved between servers`);
      owners.set(`session-${s}`, owner);
    }
  }
  assert.equal(new Set(owners.values()).size, 2, 'twenty sessions all went to one server');
});

test('only a router over several servers asks the gateway for the session first', async () => {
  // With one server there is nothing to choose: its request goes out before the turn is recorded.
  assert.equal(routerOver(doubles.slice(0, 1)).routesBySession, false);
  assert.equal(routerOver(doubles).routesBySession, true);
});

test('publication: all servers load it before new requests; those in flight finish; none refused', async () => {
  const router = routerOver(doubles);
  const config = doubles[0]!.engine.folder.config;
  const dir = join(scratchDir('ocrl-router-versions-'), 'versions');
  const next = policyVersionAt(
    writePolicyVersion(dir, randomLoraUpdate(config, 1, 7), { modelDir: model, config }).path!,
  );
  const long = (key: string) =>
    collect(router, [9, 8, 7], { maxTokens: 150, seed: 1, stopTokenIds: [], routingKey: key });
  const inFlight = [long('a'), long('b'), long('c'), long('d')];
  const publishing = router.use(next);
  const during = Array.from({ length: 6 }, (_, i) =>
    collect(router, [4, 4, i + 1], { maxTokens: 3, seed: i, stopTokenIds: [], routingKey: `k${i}` }),
  );
  await publishing;
  const old = await Promise.all(inFlight);
  for (const g of old) assert.equal(g.finish.version, 0, 'a request in flight finished on its version');
  for (const g of await Promise.all(during))
    assert.equal(g.finish.version, 1, 'a request sent during use() got the new version');
  for (const d of doubles) assert.ok(d.routes.includes('/v1/load_lora_adapter'), `${d.url} did not load the adapter`);
});

test('a server that is down: its sessions fail over to the other, and health says so', async () => {
  const spare = await startVllmDouble(model);
  const router = routerOver([doubles[0]!, spare]);
  await spare.stop();
  try {
    // The spare's port, and so the keys' placement, changes each run: take keys that it owns.
    const keys = Array.from({ length: 200 }, (_, i) => `down-${i}`);
    const owned = keys.filter((k) => router.orderOf(k)[0] === spare.url).slice(0, 3);
    assert.equal(owned.length, 3, 'the spare owns none of 200 keys');
    for (const [s, key] of [...owned, 'down-other'].entries()) {
      const g = await collect(router, [1, 2, 3], { maxTokens: 2, seed: s, routingKey: key });
      assert.equal(g.ids.length, 2);
    }
    const health = router.health();
    assert.equal(health[0]!.up, true);
    assert.equal(health[1]!.up, false);
    assert.match(health[1]!.lastError ?? '', /ECONNREFUSED/);
  } finally {
    await spare.close();
  }
});

test('a server answering 503 is failed over; back, it loads the version published meanwhile', async () => {
  const [a, b] = [await startVllmDouble(model), await startVllmDouble(model)];
  try {
    // retryAfterMs 0: a server marked down is tried again on the next request.
    const router = routerOver([a, b], 0);
    const key = Array.from({ length: 50 }, (_, i) => `s${i}`).find((k) => router.orderOf(k)[0] === b.url)!;
    b.unavailable = true;
    const config = a.engine.folder.config;
    const dir = join(scratchDir('ocrl-router-behind-'), 'versions');
    const next = policyVersionAt(
      writePolicyVersion(dir, randomLoraUpdate(config, 1, 9), { modelDir: model, config }).path!,
    );
    await router.use(next);
    assert.equal(router.health()[1]!.behind, 1);
    const during = await collect(router, [2, 3, 4], { maxTokens: 2, seed: 1, routingKey: key });
    assert.equal(during.finish.version, 1);
    assert.equal(b.generations(), 0, 'the unavailable server generated nothing');
    b.unavailable = false;
    const back = await collect(router, [2, 3, 4], { maxTokens: 2, seed: 1, routingKey: key });
    assert.equal(back.finish.version, 1, 'the server back loaded the version before serving');
    assert.equal(b.generations(), 1, 'the session went back to its own server');
    const health = router.health()[1]!;
    assert.equal(health.up && health.failures === 0 && health.behind === null, true, JSON.stringify(health));
    assert.match(health.lastError ?? '', /answered 503/);
  } finally {
    await a.close();
    await b.close();
  }
});
