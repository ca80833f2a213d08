// The llama-cpp sampler beyond the contract suite: the trainer receives both sides of the
// sampler/learner mismatch (llama.cpp's Q8_0 log-probs as rollout log-probs, its own fp32 ones as
// the anchor) and truncated importance sampling sees exactly their difference; the versions the
// learner writes to a folder are served; full versions load in the background while the old one
// serves; and a missing node-llama-cpp is a clear error.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { importNodeLlamaCpp, NodeLlamaCppMissingError } from '../src/engine/llama-cpp/node-llama-cpp.js';
import type { LlamaCppSampler } from '../src/engine/llama-cpp/sampler.js';
import { LocalEngine } from '../src/engine/local/engine.js';
import { LocalLearner } from '../src/engine/local/learner.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import { policyVersionAt } from '../src/engine/local/policy-versions.js';
import { collect } from './contracts/sampler.js';
import { openTestLlamaCpp } from './helpers/llama-cpp.js';
import { makeTinyModel, scratchDir } from './helpers/models.js';
import { perturbedWeightsUpdate } from './helpers/policy-updates.js';

const model = makeTinyModel({ family: 'qwen3', seed: 71 });
const prompt = Array.from({ length: 12 }, (_, i) => (i * 41 + 7) % 512);

describe('llama-cpp sampler with the embedded learner', () => {
  let engine: LocalEngine;
  let llama: LlamaCppSampler;
  before(async () => {
    engine = await LocalEngine.open(model, { precision: 'fp32' });
    llama = await openTestLlamaCpp(model, { ggufType: 'Q8_0' });
  });
  after(async () => {
    await llama?.close();
    await engine?.close();
  });

  test('the trainer receives llama.cpp log-probs and its own; TIS weighs their difference', async () => {
    const versionsDir = join(scratchDir('ocrl-llama-tis-'), 'versions');
    const learner = await LocalLearner.open(engine, {
      config: { mode: { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'v'] } } },
      versionsDir,
    });
    try {
      const g = await collect(llama, prompt, { maxTokens: 24, seed: 5, stopTokenIds: [] });
      const fp32 = (await engine.logprobs(prompt, g.ids)).logprobs;
      const deltas = fp32.map((x, i) => x - g.logprobs[i]!);
      assert.ok(
        deltas.some((d) => Math.abs(d) > 1e-3),
        'Q8_0 and fp32 agree to 1e-3 everywhere: no mismatch to see',
      );
      const [m] = await learner.trainBatch([
        {
          promptIds: prompt,
          completionIds: g.ids,
          advantages: g.ids.map(() => 1),
          rolloutLogprobs: g.logprobs,
        },
      ]);
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      const absDiff = mean(deltas.map(Math.abs));
      const tis = mean(deltas.map((d) => Math.min(Math.exp(d), 2)));
      assert.ok(Math.abs(m!.rolloutAbsDiff - absDiff) < 1e-4, `rolloutAbsDiff ${m!.rolloutAbsDiff} vs ${absDiff}`);
      assert.ok(Math.abs(m!.tisMean - tis) < 1e-4, `tisMean ${m!.tisMean} vs ${tis}`);

      // The version the learner wrote to its folder is what new requests run on.
      const published = await learner.publish();
      assert.ok(published.path && existsSync(published.path));
      await llama.use(policyVersionAt(published.path!));
      const next = await collect(llama, prompt, { maxTokens: 3, seed: 1, stopTokenIds: [] });
      assert.equal(next.finish.version, published.version);
    } finally {
      await learner.close();
    }
  });

  test('a full version loads in the background: requests meanwhile run on the old one', async () => {
    const cfg = readModelFolder(model).config;
    const base = (await engine.logprobs(prompt, [1, 2, 3])).logprobs;
    const before = llama.version;
    const params = new Float32Array(loadWeights(model, cfg).data);
    const update = perturbedWeightsUpdate(params, before + 1, 3);
    const switching = llama.use({ version: update.version, kind: 'full', path: null, update });
    // Started before the switch completes: finishes on the version it started on.
    const during = await collect(llama, prompt, { maxTokens: 2, seed: 2, stopTokenIds: [] });
    assert.equal(during.finish.version, before);
    await switching;
    const after = await collect(llama, prompt, { maxTokens: 2, seed: 2, stopTokenIds: [] });
    assert.equal(after.finish.version, update.version);
    const underNew = await llama.logprobs(prompt, [1, 2, 3], { version: update.version });
    const underBase = await llama.logprobs(prompt, [1, 2, 3], { version: 0 });
    assert.ok(Math.max(...underNew.logprobs.map((x, i) => Math.abs(x - underBase.logprobs[i]!))) > 1e-2);
    assert.ok(Math.max(...underBase.logprobs.map((x, i) => Math.abs(x - base[i]!))) < 0.1, 'version 0 stays the base');
  });
});

test('without node-llama-cpp the sampler says what to install', async () => {
  await assert.rejects(
    importNodeLlamaCpp(undefined, 'node-llama-cpp-not-installed'),
    (e: Error) => e instanceof NodeLlamaCppMissingError && /npm install node-llama-cpp@3\.22\.1/.test(e.message),
  );
});
