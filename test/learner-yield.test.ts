// The learner yields the CPU to serving: while the engine has requests in flight it waits at
// layer boundaries, at most maxYieldMs each time, so a step still completes under continuous
// load and reports the time it gave up; with the engine idle (or yielding off) it never waits.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LocalEngine } from '../src/engine/local/engine.js';
import { LocalLearner, type LocalLearnerOptions } from '../src/engine/local/learner.js';
import { DEFAULT_PPO, trainBatch } from '../src/learn/ppo.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import type { GenerationEvent, StepMetrics, TrainingSample } from '../src/engine/types.js';
import { makeTinyModel } from './helpers/models.js';

/** One optimizer step per sample. */
const PPO = { ...DEFAULT_PPO, miniBatchSize: 1 };

const dir = makeTinyModel({ family: 'qwen3', seed: 81, initStd: 0.05 });
const sample: TrainingSample = { promptIds: [11, 22, 33], completionIds: [5, 300, 9, 120], advantages: [1, 1, 1, 1] };
const config: LocalLearnerOptions['config'] = {
  mode: { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'v'] } },
};
// Yield points of a one-step batch (KL off, one micro-batch): before each layer and the head in
// the anchoring forward and the step's forward, before each layer in the backward.
const yieldPoints = 3 * readModelFolder(dir).config.numLayers + 2;

/** Generation loops that restart until stopped, so the engine always has work in flight. */
function keepServing(engine: LocalEngine, loops: number) {
  const ac = new AbortController();
  let serving!: () => void;
  const started = new Promise<void>((resolve) => {
    serving = resolve;
  });
  const running = Array.from({ length: loops }, async (_, i) => {
    for (let seed = i; !ac.signal.aborted; seed += loops) {
      for await (const e of engine.generate([1, 2, 3], { maxTokens: 300, seed }, ac.signal))
        if (e.type === 'token') serving();
    }
  });
  return {
    started,
    stop: async () => {
      ac.abort();
      await Promise.all(running);
    },
  };
}

test('under continuous serving a step completes, having yielded a bounded time; with yielding off it never waits', async () => {
  const engine = await LocalEngine.open(dir);
  const maxYieldMs = 20;
  const polite = await LocalLearner.open(engine, { config, maxYieldMs });
  const greedy = await LocalLearner.open(engine, { config, yieldToServing: false });
  const load = keepServing(engine, 3);
  try {
    await load.started;
    const [m] = await trainBatch(polite, [sample], PPO);
    assert.ok(m!.applied);
    assert.ok(m!.yieldedMs > 0, 'the learner did not yield to a busy engine');
    assert.ok(m!.yieldedMs <= m!.seconds * 1000);
    // Generous slack per point for timer overshoot on a loaded machine; unbounded waiting would never finish.
    assert.ok(
      m!.yieldedMs < yieldPoints * (maxYieldMs + 50),
      `yielded ${m!.yieldedMs.toFixed(1)} ms at ${yieldPoints} points`,
    );
    const [g] = await trainBatch(greedy, [sample], PPO);
    assert.equal(g!.yieldedMs, 0);
  } finally {
    await load.stop();
    await polite.close();
    await greedy.close();
    await engine.close();
  }
});

test('with the engine idle a step yields nothing', async () => {
  const engine = await LocalEngine.open(dir);
  const learner = await LocalLearner.open(engine, { config });
  try {
    assert.equal(engine.activity[0], 0);
    const metrics = await trainBatch(learner, [sample, sample], PPO);
    assert.equal(metrics.length, 2);
    assert.ok(metrics.every((m) => m.applied && m.yieldedMs === 0));
  } finally {
    await learner.close();
    await engine.close();
  }
});

// A broken wake-up would wait maxYieldMs (10 minutes) at a point; the timeout turns that into a failure.
test('with an unbounded maxYieldMs a step waits out a generation and resumes when serving goes idle', {
  timeout: 60_000,
}, async () => {
  const engine = await LocalEngine.open(dir);
  const learner = await LocalLearner.open(engine, { config, maxYieldMs: 600_000 });
  try {
    let step: Promise<StepMetrics[]> | undefined;
    let finish: Extract<GenerationEvent, { type: 'finish' }> | undefined;
    // Seed 6 runs to maxTokens (asserted), so serving stays busy long after the step is sent.
    for await (const e of engine.generate([1, 2, 3], { maxTokens: 400, seed: 6 })) {
      if (e.type === 'token') step ??= trainBatch(learner, [sample], PPO);
      else finish = e;
    }
    assert.equal(finish!.reason, 'length');
    const [m] = await step!;
    assert.ok(m!.applied && m!.yieldedMs > 0);
  } finally {
    await learner.close();
    await engine.close();
  }
});
