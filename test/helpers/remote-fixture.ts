// The contract suite's fixture for an HTTP sampler over a protocol test double (vllm-double.ts,
// sglang-double.ts): versions written as folders the double loads by path, as a server would.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadWeights } from '../../src/engine/local/model/weights.js';
import { policyVersionAt, writePolicyVersion } from '../../src/engine/local/policy-versions.js';
import type { HttpSampler } from '../../src/engine/remote/http-sampler.js';
import type { GenerationEvent } from '../../src/engine/types.js';
import { collect, type Generated, maxAbsDiff, SCORE_TOLERANCE, type SamplerFixture } from '../contracts/sampler.js';
import type { InferenceDouble } from './inference-double.js';
import { scratchDir } from './models.js';
import { perturbedWeightsUpdate, randomLoraUpdate } from './policy-updates.js';

export function remoteFixture(
  double: InferenceDouble,
  sampler: HttpSampler,
  modelDir: string,
): SamplerFixture & { double: InferenceDouble } {
  const config = double.engine.folder.config;
  const versionsDir = join(scratchDir('ocrl-remote-versions-'), 'versions');
  let last = 0;
  return {
    double,
    sampler,
    scorer: sampler,
    vocab: config.vocabSize,
    servingVersion: 0,
    async nextVersion() {
      const update = randomLoraUpdate(config, ++last, 100 + last);
      return policyVersionAt(writePolicyVersion(versionsDir, update, { modelDir, config }).path!);
    },
    // No inFlight: a broken-out request's cancel reaches the double when its socket closes,
    // which may come after a later request on another connection, so no count read at once is
    // exact (the contract lets a backend that cannot tell omit it).
    close: () => double.close(),
  };
}

/**
 * Generations one after another share one kept-alive connection: a stream left unread at its end
 * closes its connection, and every request would then wait for a new one (and a TLS handshake
 * where the server is remote).
 */
export function remoteConnectionTest(name: string, open: () => Promise<ReturnType<typeof remoteFixture>>): void {
  test(`${name}: generations one after another reuse one connection`, async () => {
    const f = await open();
    try {
      for (let i = 0; i < 5; i++) {
        const g = await collect(f.sampler, [5, 17, 29], { maxTokens: 4, seed: i, stopTokenIds: [] });
        assert.equal(g.finish.reason, 'length');
      }
      assert.equal(f.double.connections(), 1, 'each generation opened a connection of its own');
    } finally {
      await f.close();
    }
  });
}

/** The double serves the engine's own tokens and log-probs: the HTTP backend must hand them over exactly. */
export function remoteExactnessTest(name: string, open: () => Promise<ReturnType<typeof remoteFixture>>): void {
  test(`${name}: the tokens and log-probs are the engine's, exactly, top-k included`, async () => {
    const f = await open();
    try {
      const prompt = [5, 17, 29, 3, 41];
      const params = { maxTokens: 12, seed: 9, topLogprobs: 3, stopTokenIds: [] };
      const remote = await collect(f.sampler, prompt, params);
      const local = await collect(f.double.engine, prompt, params);
      assert.deepEqual(remote.ids, local.ids);
      assert.deepEqual(remote.logprobs, local.logprobs);
      const tops = (g: Generated) => g.events.flatMap((e) => (e.type === 'token' ? [e.token.top] : []));
      assert.deepEqual(tops(remote), tops(local));
      const sampled = remote.events.flatMap((e) => (e.type === 'token' ? [e.token.sampledLogprob] : []));
      assert.deepEqual(sampled, remote.logprobs, "at temperature 1 the sampled distribution is the model's");
    } finally {
      await f.close();
    }
  });
}

/**
 * What the contract suite leaves to each backend's version handling: stale adapters unloaded,
 * and a full version that waits for the requests in flight and then serves every new one.
 */
export function remoteVersionTests(
  name: string,
  modelDir: string,
  open: () => Promise<ReturnType<typeof remoteFixture>>,
  unloadRoute: string,
): void {
  test(`${name}: an adapter no request uses is unloaded once a newer one serves`, async () => {
    const f = await open();
    try {
      const first = await f.nextVersion();
      await f.sampler.use(first);
      assert.ok(!f.double.routes.includes(unloadRoute));
      const second = await f.nextVersion();
      await f.sampler.use(second);
      assert.equal(f.double.routes.filter((r) => r === unloadRoute).length, 1);
      const g = await collect(f.sampler, [1, 2, 3], { maxTokens: 2, seed: 1 });
      assert.equal(g.finish.version, second.version);
    } finally {
      await f.close();
    }
  });

  test(`${name}: a full version waits for the request in flight, then serves new ones; the base is gone`, async () => {
    const f = await open();
    try {
      const config = f.double.engine.folder.config;
      const dir = join(scratchDir('ocrl-remote-full-'), 'versions');
      const update = perturbedWeightsUpdate(loadWeights(modelDir, config).data, 1, 5);
      const full = policyVersionAt(writePolicyVersion(dir, update, { modelDir, config }).path!);
      const prompt = [7, 3, 9, 4];
      let publishing: Promise<number> | null = null;
      let fresh: Promise<Generated> | null = null;
      const events: GenerationEvent[] = [];
      for await (const e of f.sampler.generate(prompt, { maxTokens: 40, seed: 2, stopTokenIds: [] })) {
        events.push(e);
        if (events.length === 1) {
          publishing = f.sampler.use(full);
          fresh = collect(f.sampler, prompt, { maxTokens: 5, seed: 2, stopTokenIds: [] });
        }
      }
      const finish = events.at(-1)!;
      assert.ok(finish.type === 'finish' && finish.version === 0, 'the request in flight finished on the base');
      assert.ok(finish.reason === 'length' || finish.reason === 'stop_token', `in flight: ${finish.reason}`);
      await publishing;
      const after = await fresh!;
      assert.equal(after.finish.version, 1, 'the request sent during use() waited for the new weights');
      const scored = await f.scorer.logprobs(prompt, after.ids, { version: 1 });
      assert.ok(maxAbsDiff(scored.logprobs, after.logprobs) <= SCORE_TOLERANCE);
      await assert.rejects(f.scorer.logprobs(prompt, after.ids, { version: 0 }), /version 0 is not loaded/);
    } finally {
      await f.close();
    }
  });
}
