// Publishing policy versions to the running engine: LoRA adapters and full weights, switched
// between steps while generations are in flight, and the sampler's log-probs under a version
// equal to the trainer's for the same weights (what the PPO ratio and TIS rely on).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LocalEngine } from '../src/engine/local/engine.js';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { paramStoreOver, tensorSpecs } from '../src/engine/local/model/weights.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { Lora } from '../src/engine/local/train/lora.js';
import { TrainModel } from '../src/engine/local/train/model.js';
import type { GenerationEvent } from '../src/engine/types.js';
import { makeTinyModel, maxAbsDiff } from './helpers/models.js';

const dir = makeTinyModel({ family: 'qwen3', seed: 11 });
const cfg = readModelFolder(dir).config;
const prompt = Array.from({ length: 12 }, (_, i) => (i * 41 + 3) % 500);
const completion = Array.from({ length: 10 }, (_, i) => (i * 19 + 100) % 500);

function randomLora(seed: number): Lora {
  const lora = new Lora(cfg, { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] });
  lora.initialise(seed);
  const rng = createRng(seed + 1);
  for (const t of lora.tensors)
    if (t.part === 'B')
      lora.view(t).forEach((_, i, v) => {
        v[i] = (rng.next() - 0.5) * 0.5;
      });
  return lora;
}

test('a LoRA version: sampler log-probs equal the trainer forward with the same adapter; base stays scorable', async () => {
  const engine = await LocalEngine.open(dir);
  try {
    const lora = randomLora(21);
    const base = await engine.logprobs(prompt, completion);
    const swapMs = await engine.publish({ version: 1, kind: 'lora', spec: lora.spec, data: lora.data });
    assert.ok(swapMs >= 0);
    assert.equal(engine.version, 1);
    const adapted = await engine.logprobs(prompt, completion, { version: 1 });
    assert.ok(maxAbsDiff(base.logprobs, adapted.logprobs) > 1e-2, 'the adapter changed nothing');
    const again = await engine.logprobs(prompt, completion, { version: 0 });
    // Not bit-exact: the prefix cache serves this prompt from the first score's rows, and a row's
    // result moves in the last bits with the chunking (prefix-cache-exactness.test.ts).
    assert.ok(
      maxAbsDiff(base.logprobs, again.logprobs) < 1e-5,
      `version 0 must stay the frozen base: ${maxAbsDiff(base.logprobs, again.logprobs)}`,
    );

    // Generation can ask for the frozen base too (a self-judge does), next to the serving version.
    const sample = async (version?: number) => {
      const out: { ids: number[]; logprobs: number[]; version: number } = { ids: [], logprobs: [], version: -1 };
      for await (const e of engine.generate(prompt, {
        maxTokens: 5,
        seed: 3,
        stopTokenIds: [],
        ...(version !== undefined ? { version } : {}),
      })) {
        if (e.type === 'token') {
          out.ids.push(e.token.id);
          out.logprobs.push(e.token.logprob);
        } else out.version = e.version;
      }
      return out;
    };
    const [fromBase, fromServing] = await Promise.all([sample(0), sample()]);
    assert.equal(fromBase.version, 0);
    assert.equal(fromServing.version, 1);
    const baseScore = await engine.logprobs(prompt, fromBase.ids, { version: 0 });
    assert.ok(
      maxAbsDiff(baseScore.logprobs, fromBase.logprobs) < 1e-4,
      'a version-0 generation must report base log-probs',
    );
    assert.throws(() => engine.generate(prompt, { version: -1 }), /version must be a non-negative integer/);

    const params = paramStoreOver(tensorSpecs(cfg), new Float32Array(engine.info.baseParams));
    const trainer = new TrainModel(cfg, params, null, lora, loadKernels());
    const trained = trainer.forward([{ tokens: [...prompt, ...completion], promptLength: prompt.length }]);
    assert.ok(
      maxAbsDiff(Array.from(trained.logprobs), adapted.logprobs) < 1e-4,
      'trainer and sampler disagree on the adapted policy',
    );
  } finally {
    await engine.close();
  }
});

test('full weights: a new version with its own parameters serves new requests; in-flight ones finish on theirs', async () => {
  const engine = await LocalEngine.open(dir);
  try {
    const inFlight: GenerationEvent[] = [];
    const iterator = engine.generate(prompt, { maxTokens: 40, seed: 1, stopTokenIds: [] })[Symbol.asyncIterator]();
    inFlight.push((await iterator.next()).value as GenerationEvent);

    const next = new Float32Array(new SharedArrayBuffer(engine.info.baseParams.byteLength));
    next.set(new Float32Array(engine.info.baseParams));
    const rng = createRng(5);
    for (let i = 0; i < next.length; i++) next[i] = next[i]! + (rng.next() - 0.5) * 0.05;
    await engine.publish({ version: 1, kind: 'full', params: next.buffer as SharedArrayBuffer });

    let fresh: Extract<GenerationEvent, { type: 'finish' }> | undefined;
    for await (const e of engine.generate(prompt, { maxTokens: 3, seed: 1, stopTokenIds: [] }))
      if (e.type === 'finish') fresh = e;
    assert.equal(fresh!.version, 1);
    for (let r = await iterator.next(); !r.done; r = await iterator.next()) inFlight.push(r.value);
    const last = inFlight[inFlight.length - 1]!;
    assert.equal(last.type, 'finish');
    assert.equal(last.type === 'finish' && last.version, 0, 'the in-flight generation must finish on version 0');
    assert.equal(inFlight.filter((e) => e.type === 'token').length, 40);

    const v1 = await engine.logprobs(prompt, completion, { version: 1 });
    const trainer = new TrainModel(cfg, paramStoreOver(tensorSpecs(cfg), next), null, null, loadKernels());
    const expected = trainer.forward([{ tokens: [...prompt, ...completion], promptLength: prompt.length }]);
    assert.ok(maxAbsDiff(Array.from(expected.logprobs), v1.logprobs) < 1e-4);
    await assert.rejects(
      engine.publish({ version: 1, kind: 'full', params: next.buffer as SharedArrayBuffer }),
      /not newer than the serving version 1/,
    );
  } finally {
    await engine.close();
  }
});
