// The llama-cpp sampler beyond the contract suite: the trainer receives both sides of the
// sampler/learner mismatch (llama.cpp's Q8_0 log-probs as rollout log-probs, its own fp32 ones as
// the anchor) and truncated importance sampling sees exactly their difference; the versions the
// learner writes to a folder are served; full versions load in the background while the old one
// serves; and a missing node-llama-cpp is a clear error.

import { DEFAULT_PPO, trainBatch } from '../src/learn/ppo.js';
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
import { policyVersionAt, writePolicyVersion } from '../src/engine/local/policy-versions.js';
import type { GenerationEvent } from '../src/engine/types.js';
import { collect } from './contracts/sampler.js';
import { openTestLlamaCpp } from './helpers/llama-cpp.js';
import { makeTinyModel, scratchDir } from './helpers/models.js';
import { perturbedWeightsUpdate, randomLoraUpdate } from './helpers/policy-updates.js';

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
      const [m] = await trainBatch(
        learner,
        [
          {
            promptIds: prompt,
            completionIds: g.ids,
            advantages: g.ids.map(() => 1),
            rolloutLogprobs: g.logprobs,
          },
        ],
        DEFAULT_PPO,
      );
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

test('LoRA adapters are freed by loading the base afresh; versions in flight and version 0 are unchanged', async () => {
  const cfg = readModelFolder(model).config;
  const events: string[] = [];
  const llama = await openTestLlamaCpp(model, { loraAdaptersPerModel: 2, log: (e) => events.push(e) });
  const versionsDir = join(scratchDir('ocrl-llama-reload-'), 'versions');
  const versionOf = (n: number) =>
    policyVersionAt(
      writePolicyVersion(versionsDir, randomLoraUpdate(cfg, n, 40 + n), { modelDir: model, config: cfg }).path!,
    );
  try {
    const completion = [3, 1, 4, 1, 5];
    const baseBefore = await llama.logprobs(prompt, completion, { version: 0 });
    await llama.use(versionOf(1));
    await llama.use(versionOf(2));
    const underTwo = await llama.logprobs(prompt, completion, { version: 2 });
    const onTwo = await collect(llama, prompt, { maxTokens: 6, seed: 8, stopTokenIds: [] });
    // A request on version 2 is in flight while version 3 loads on a fresh copy of the base.
    const events2: GenerationEvent[] = [];
    for await (const e of llama.generate(prompt, { maxTokens: 6, seed: 8, stopTokenIds: [] })) {
      events2.push(e);
      if (events2.length === 1) await llama.use(versionOf(3));
    }
    assert.deepEqual(
      events.filter((e) => e !== 'gguf_convert' && e !== 'llama_cpp_loaded'),
      ['llama_cpp_version', 'llama_cpp_version', 'llama_cpp_base_reloaded', 'llama_cpp_version'],
    );
    const finish = events2[events2.length - 1]!;
    assert.ok(finish.type === 'finish' && finish.version === 2);
    const ids = events2.flatMap((e) => (e.type === 'token' ? [e.token.id] : []));
    const reported = events2.flatMap((e) => (e.type === 'token' ? [e.token.logprob] : []));
    const again = await llama.logprobs(prompt, completion, { version: 0 });
    assert.deepEqual(again.logprobs, baseBefore.logprobs, 'version 0 on the fresh copy scores as before');
    const three = await collect(llama, prompt, { maxTokens: 3, seed: 1, stopTokenIds: [] });
    assert.equal(three.finish.version, 3);
    const underThree = await llama.logprobs(prompt, completion, { version: 3 });
    assert.ok(Math.max(...underThree.logprobs.map((x, i) => Math.abs(x - underTwo.logprobs[i]!))) > 1e-2);
    // The same seed on the same version, before and across the reload: the same tokens and log-probs.
    assert.deepEqual(ids, onTwo.ids);
    assert.deepEqual(reported, onTwo.logprobs);
  } finally {
    await llama.close();
  }
});

test('without node-llama-cpp the sampler says what to install', async () => {
  await assert.rejects(
    importNodeLlamaCpp(undefined, 'node-llama-cpp-not-installed'),
    (e: Error) =>
      e instanceof NodeLlamaCppMissingError &&
      /node-llama-cpp 3\.22\.1 .*not installed.*npm run setup:llama-cpp/.test(e.message),
  );
});
