// The serving activity count a learner yields to: the scheduler keeps activity[0] equal to its
// jobs in flight and notifies waiters when it drops to 0; LocalEngine shares it with its worker.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LocalEngine } from '../src/engine/local/engine.js';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { Transformer } from '../src/engine/local/model/transformer.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import type { ResolvedSampling } from '../src/engine/local/runtime/protocol.js';
import { Scheduler } from '../src/engine/local/runtime/scheduler.js';
import type { GenerationEvent } from '../src/engine/types.js';
import { makeTinyModel } from './helpers/models.js';

const dir = makeTinyModel({ family: 'qwen3', seed: 61 });
const prompt = [3, 14, 15, 92, 65];

// Atomics.waitAsync is in Node 20 but not in the ES2022 lib this project compiles against.
const waitAsync = (
  Atomics as unknown as {
    waitAsync(
      a: Int32Array,
      i: number,
      v: number,
      timeoutMs: number,
    ): { async: true; value: Promise<string> } | { async: false; value: string };
  }
).waitAsync;

function newScheduler(activity: Int32Array): Scheduler {
  const { config } = readModelFolder(dir);
  const base = { version: 0, model: new Transformer(config, loadWeights(dir, config), loadKernels()), lora: null };
  // No eos ids, so every generation runs exactly to maxTokens.
  return new Scheduler(base, config, [], () => ({ push: () => '' }), 256, activity);
}

const sampling = (maxTokens: number): ResolvedSampling => ({
  temperature: 1,
  topP: 1,
  topK: 0,
  maxTokens,
  stop: [],
  stopTokenIds: [],
  seed: 1,
  topLogprobs: 0,
  version: null,
});

test('the scheduler counts its jobs in flight and notifies when the count drops to 0', async () => {
  const activity = new Int32Array(new SharedArrayBuffer(4));
  const s = newScheduler(activity);
  s.addGeneration(1, prompt, sampling(3));
  s.addGeneration(2, prompt, sampling(1));
  s.addScore(3, prompt, [7, 8, 9], 0, 0);
  assert.equal(activity[0], 3);
  s.step(); // prefills all three: generation 2 and the score finish, generation 1 has 2 tokens to go
  assert.equal(activity[0], 1);
  const waiting = waitAsync(activity, 0, 1, 10_000);
  assert.ok(waiting.async, 'the count changed before the waiter registered');
  s.step();
  assert.equal(activity[0], 1);
  s.step();
  assert.equal(activity[0], 0);
  assert.equal(await waiting.value, 'ok', 'a waiter must be woken when serving goes idle, not time out');

  s.addGeneration(4, prompt, sampling(50));
  s.cancel(4);
  assert.equal(activity[0], 1, 'a cancelled job is in flight until the next step drops it');
  s.step();
  assert.equal(activity[0], 0);
  s.addScore(5, prompt, [1, 2], 0, 0);
  s.failAll();
  assert.equal(activity[0], 0);
});

test("LocalEngine.activity is the worker's count: 1 while a generation streams, 0 once it has finished", async () => {
  const engine = await LocalEngine.open(dir);
  try {
    assert.equal(engine.activity[0], 0);
    const params = { maxTokens: 400, seed: 8 };
    let finish: Extract<GenerationEvent, { type: 'finish' }> | undefined;
    for await (const e of engine.generate(prompt, params)) if (e.type === 'finish') finish = e;
    // The same seed gives the same tokens: this generation cannot end early on an eos below.
    assert.equal(finish!.reason, 'length');
    assert.equal(engine.activity[0], 0);

    const ac = new AbortController();
    for await (const e of engine.generate(prompt, params, ac.signal)) {
      if (e.type === 'token' && !ac.signal.aborted) {
        assert.equal(engine.activity[0], 1);
        ac.abort();
      } else if (e.type === 'finish') finish = e;
    }
    assert.equal(finish!.reason, 'cancelled');
    assert.equal(engine.activity[0], 0);
  } finally {
    await engine.close();
  }
});
