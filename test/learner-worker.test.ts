// The learner in its worker, on the engine's shared base weights: training raises the target's
// log-prob, publishing makes the engine serve the trained weights, and a checkpoint resumes
// exactly where it stopped.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { LocalEngine } from '../src/engine/local/engine.js';
import { LocalLearner } from '../src/engine/local/learner.js';
import { DEFAULT_LEARNER } from '../src/engine/local/train/learner.js';
import { DEFAULT_PPO, trainBatch } from '../src/learn/ppo.js';
import type { GenerationEvent, TrainingSample } from '../src/engine/types.js';
import { makeTinyModel, maxAbsDiff, scratchDir } from './helpers/models.js';

/** One optimizer step per sample. */
const PPO = { ...DEFAULT_PPO, miniBatchSize: 1 };

const dir = makeTinyModel({ family: 'qwen3', seed: 51, initStd: 0.05 });
const promptIds = [11, 22, 33, 44];
const completionIds = [5, 300, 9, 120, 17];
const sample: TrainingSample = { promptIds, completionIds, advantages: completionIds.map(() => 1) };
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

for (const mode of ['lora', 'full'] as const) {
  test(`${mode}: train in the worker, publish, and the engine serves the trained policy`, async () => {
    const engine = await LocalEngine.open(dir);
    const learner = await LocalLearner.open(engine, {
      config: {
        mode:
          mode === 'lora'
            ? { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'v', 'down'] } }
            : { kind: 'full' },
        optimizer: {
          lr: mode === 'lora' ? 5e-3 : 1e-3,
          beta1: 0.9,
          beta2: 0.98,
          eps: 1e-8,
          weightDecay: 0,
          warmupSteps: 0,
          maxGradNorm: 1,
        },
      },
    });
    try {
      const before = mean((await engine.logprobs(promptIds, completionIds)).logprobs);
      for (let i = 0; i < 30; i++) {
        const [m] = await trainBatch(learner, [sample], PPO);
        assert.ok(m!.applied);
      }
      const publication = await learner.publishTo(engine);
      assert.equal(publication.version, 1);
      assert.equal(engine.version, 1);
      const after = mean((await engine.logprobs(promptIds, completionIds, { version: 1 })).logprobs);
      assert.ok(after > before + 1, `served log-prob ${before.toFixed(3)} -> ${after.toFixed(3)}`);
      const base = mean((await engine.logprobs(promptIds, completionIds, { version: 0 })).logprobs);
      assert.ok(Math.abs(base - before) < 1e-6, 'the frozen base changed');
      let finish: Extract<GenerationEvent, { type: 'finish' }> | undefined;
      for await (const e of engine.generate(promptIds, { maxTokens: 2, seed: 1, stopTokenIds: [] }))
        if (e.type === 'finish') finish = e;
      assert.equal(finish!.version, 1);
    } finally {
      await learner.close();
      await engine.close();
    }
  });
}

test('forwardBackward + optimStep is the same update as learn/ppo trainBatch over one mini-batch', async () => {
  const engine = await LocalEngine.open(dir);
  const config = {
    mode: { kind: 'lora' as const, spec: { rank: 4, alpha: 8, targets: ['q' as const, 'k' as const] } },
    seed: 3,
  };
  const a = await LocalLearner.open(engine, { config });
  const b = await LocalLearner.open(engine, { config });
  try {
    await trainBatch(a, [sample], PPO);
    await b.forwardBackward([sample], PPO.loss);
    const step = await b.optimStep();
    assert.equal(step.step, 1);
    const [ua, ub] = [(await a.publish()).update, (await b.publish()).update];
    assert.ok(ua?.kind === 'lora' && ub?.kind === 'lora');
    assert.ok(maxAbsDiff(Array.from(ua.data), Array.from(ub.data)) < 1e-7);
  } finally {
    await a.close();
    await b.close();
    await engine.close();
  }
});

test("a bf16 learner in its worker packs the engine's shared bf16 base and takes the same step", async () => {
  const engine = await LocalEngine.open(dir, { precision: 'bf16' });
  const config = {
    mode: { kind: 'lora' as const, spec: { rank: 4, alpha: 8, targets: ['q' as const, 'up' as const] } },
    seed: 3,
    precision: 'bf16' as const,
  };
  const plain = await LocalLearner.open(engine, { config });
  const packed = await LocalLearner.open(engine, { config: { ...config, packFrozenWeights: true } });
  try {
    assert.equal(plain.resumed.packedBytes, 0);
    const info = engine.info.kernelInfo;
    if (info.gemm === 'onednn' && info.bf16Instructions) assert.ok(packed.resumed.packedBytes > 0, 'packed');
    for (let i = 0; i < 2; i++) {
      const [a, b] = [await trainBatch(plain, [sample], PPO), await trainBatch(packed, [sample], PPO)];
      assert.ok(Math.abs(a[0]!.loss - b[0]!.loss) <= 1e-6 * Math.abs(a[0]!.loss), `${a[0]!.loss} vs ${b[0]!.loss}`);
    }
    const [ua, ub] = [(await plain.publish()).update, (await packed.publish()).update];
    assert.ok(ua?.kind === 'lora' && ub?.kind === 'lora');
    assert.ok(maxAbsDiff(Array.from(ua.data), Array.from(ub.data)) < 1e-6);
  } finally {
    await plain.close();
    await packed.close();
    await engine.close();
  }
});

test('a checkpoint resumes steps, published version, consumed ids and the exact weights', async () => {
  const checkpointDir = join(scratchDir('ocrl-ckpt-'), 'learner');
  const engine = await LocalEngine.open(dir);
  const config = {
    mode: { kind: 'lora' as const, spec: { rank: 4, alpha: 8, targets: ['q' as const, 'up' as const] } },
  };
  try {
    const first = await LocalLearner.open(engine, { config, checkpointDir });
    assert.equal(first.resumed.steps, 0);
    for (let i = 0; i < 3; i++) await trainBatch(first, [sample], PPO);
    await first.publish();
    await first.save(['turn-1', 'turn-2']);
    const saved = (await first.publish()).update; // version 2, from the same weights
    await first.close();

    const second = await LocalLearner.open(engine, { config, checkpointDir });
    assert.deepEqual(second.resumed.consumedSampleIds, ['turn-1', 'turn-2']);
    assert.equal(second.resumed.steps, 3);
    assert.equal(second.resumed.version, 1);
    const resumed = (await second.publish()).update;
    assert.equal(resumed?.version, 2);
    assert.ok(saved?.kind === 'lora' && resumed?.kind === 'lora');
    assert.deepEqual(Array.from(resumed.data), Array.from(saved.data));
    await second.close();

    await assert.rejects(
      LocalLearner.open(engine, { config: { ...config, mode: { kind: 'full' } }, checkpointDir }),
      /trains a LoRA .* this run trains all parameters/,
    );
  } finally {
    await engine.close();
  }
});

test('a second learner on the same engine numbers its publications after the version being served', async () => {
  const engine = await LocalEngine.open(dir);
  const config = {
    mode: { kind: 'lora' as const, spec: { rank: 4, alpha: 8, targets: ['q' as const] } },
  };
  try {
    const first = await LocalLearner.open(engine, { config });
    assert.equal((await first.publishTo(engine)).version, 1);
    await first.close();
    const second = await LocalLearner.open(engine, { config });
    assert.equal(second.resumed.version, 1);
    assert.equal((await second.publishTo(engine)).version, 2);
    assert.equal(engine.version, 2);
    await second.close();
  } finally {
    await engine.close();
  }
});

test("versionAfter above the checkpoint's published version: the next publication follows it", async () => {
  const checkpointDir = join(scratchDir('ocrl-ckpt-'), 'learner');
  const engine = await LocalEngine.open(dir);
  const config = {
    mode: { kind: 'lora' as const, spec: { rank: 4, alpha: 8, targets: ['v' as const] } },
  };
  try {
    const first = await LocalLearner.open(engine, { config, checkpointDir });
    await first.publish();
    await first.save([]);
    await first.close();
    const second = await LocalLearner.open(engine, { config, checkpointDir, versionAfter: 5 });
    assert.equal(second.resumed.version, 5);
    assert.equal((await second.publishTo(engine)).version, 6);
    await second.close();
    await assert.rejects(
      LocalLearner.open(engine, { config, versionAfter: -1 }),
      /versionAfter must be a non-negative integer/,
    );
  } finally {
    await engine.close();
  }
});

for (const mode of ['lora', 'full'] as const) {
  test(`${mode}: restore a published version's folder (and version 0), publish it again: the same served log-probs`, async () => {
    const engine = await LocalEngine.open(dir);
    const versionsDir = join(scratchDir('restore-'), 'versions');
    const learner = await LocalLearner.open(engine, {
      config: {
        mode:
          mode === 'lora'
            ? { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'v', 'down'] } }
            : { kind: 'full' },
        optimizer: { ...DEFAULT_LEARNER.optimizer, lr: mode === 'lora' ? 5e-3 : 1e-3 },
      },
      versionsDir,
      keepVersions: Number.POSITIVE_INFINITY,
    });
    const served = async (version: number) => (await engine.logprobs(promptIds, completionIds, { version })).logprobs;
    try {
      const base = await served(0);
      for (let i = 0; i < 3; i++) await trainBatch(learner, [sample], PPO);
      // The engine keeps only the versions in use: each is read while it serves.
      const v1 = await learner.publishTo(engine);
      const served1 = await served(1);
      for (let i = 0; i < 3; i++) await trainBatch(learner, [sample], PPO);
      await learner.publishTo(engine);
      assert.ok(maxAbsDiff(await served(2), served1) > 1e-3, 'version 2 differs from version 1');
      await learner.restore(v1.weightsPath);
      assert.equal((await learner.publishTo(engine)).version, 3);
      assert.deepEqual(await served(3), served1);
      // Training goes on from the restored weights.
      assert.ok((await trainBatch(learner, [sample], PPO))[0]!.applied);
      await learner.restore(null);
      await learner.publishTo(engine);
      assert.ok(maxAbsDiff(await served(4), base) < 1e-6, 'version 0: the start of training serves the base');
      await assert.rejects(learner.restore(join(versionsDir, 'v-99')), /no such folder \(not a policy version\)/);
    } finally {
      await learner.close();
      await engine.close();
    }
  });
}
