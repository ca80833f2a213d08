// The Learner contract (src/engine/types.ts, docs/engine.md "Conformance suite") as tests any
// learner backend runs through learnerContract with a factory of its own. Every learner call goes
// through learnerOps (learner-adapter.ts).

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ModelConfig } from '../../src/engine/local/model/config.js';
import { policyVersionAt, readPolicyUpdate } from '../../src/engine/local/policy-versions.js';
import type { LearnerConfig } from '../../src/engine/local/train/learner.js';
import type { PolicyVersion } from '../../src/engine/policy-version.js';
import type { Sampler, Scorer, TrainingSample } from '../../src/engine/types.js';
import { scratchDir } from '../helpers/models.js';
import { type ContractLearner, type LearnerOps, learnerOps } from './learner-adapter.js';

export type ClosableSampler = Sampler & Scorer & { close(): Promise<void> };

export interface LearnerFixture {
  cfg: ModelConfig;
  /** A sampler and scorer over the learners' base model that loads their versions. */
  reader: Sampler & Scorer;
  /** A learner on `config`; it resumes from a checkpoint in checkpointDir and publishes into versionsDir. */
  open(config: LearnerConfig, dirs: { checkpointDir: string; versionsDir: string }): Promise<ContractLearner>;
  /** Another sampler over the same base model, that has loaded nothing yet. */
  openSampler(): Promise<ClosableSampler>;
  close(): Promise<void>;
}

export type TrainMode = 'lora' | 'full';

export function contractConfig(mode: TrainMode, weightDecay = 0): LearnerConfig {
  return {
    mode:
      mode === 'lora'
        ? { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } }
        : { kind: 'full' },
    optimizer: {
      lr: mode === 'lora' ? 1e-2 : 1e-3,
      beta1: 0.9,
      beta2: 0.999,
      eps: 1e-8,
      weightDecay,
      warmupSteps: 0,
      maxGradNorm: 1,
    },
    microBatchTokens: 4096,
    activationBudgetBytes: 2 ** 30,
    seed: 3,
  };
}

/** The trained values of a version (the LoRA buffer or every parameter), from memory or its folder. */
export function weightsOf(v: PolicyVersion, cfg: ModelConfig): Float32Array {
  const u = readPolicyUpdate(v, cfg);
  return u.kind === 'lora' ? u.data : new Float32Array(u.params);
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.equal(a.length, b.length, 'lengths differ');
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

export function learnerContract(name: string, open: () => Promise<LearnerFixture>, modes: TrainMode[]): void {
  let f: LearnerFixture | null = null;
  const fixture = () => f ?? assert.fail('the fixture did not open');
  const sampleWith = (advantage: number): TrainingSample => {
    const vocab = fixture().cfg.vocabSize;
    const completionIds = [5, 300, 9, 120, 17].map((id) => id % vocab);
    return { promptIds: [11, 22, 33, 44], completionIds, advantages: completionIds.map(() => advantage) };
  };
  let scratch: string | null = null;
  let runs = 0;
  /** A fresh pair of folders (one scratch folder for the suite: each costs an exit listener). */
  const freshDirs = () => {
    scratch ??= scratchDir('ocrl-contract-');
    const run = join(scratch, `run-${++runs}`);
    return { checkpointDir: join(run, 'checkpoints'), versionsDir: join(run, 'versions') };
  };
  const openOps = async (config: LearnerConfig, dirs = freshDirs()) =>
    learnerOps(await fixture().open(config, dirs), fixture().reader);
  const using = async (ops: LearnerOps, body: (ops: LearnerOps) => Promise<void>) => {
    try {
      await body(ops);
    } finally {
      await ops.close();
    }
  };

  describe(`Learner contract: ${name}`, () => {
    before(async () => {
      f = await open();
    });
    after(async () => {
      await f?.close();
    });

    for (const mode of modes) {
      test(`${mode}: forwardBackward + optimStep with positive advantages raises the sample's log-prob`, async () => {
        const sample = sampleWith(1);
        await using(await openOps(contractConfig(mode)), async (ops) => {
          const [before] = await ops.logprobs([sample]);
          for (let i = 0; i < 3; i++) {
            const { forward, optim } = await ops.step([sample]);
            assert.equal(forward.tokens, sample.completionIds.length);
            assert.ok(optim.applied && optim.gradNorm > 0, `step ${i + 1}: ${JSON.stringify(optim)}`);
          }
          const [after] = await ops.logprobs([sample]);
          assert.ok(mean(after!) > mean(before!) + 1e-3, `mean log-prob ${mean(before!)} -> ${mean(after!)}`);
          // The learner's own forward pass and a sampler serving its published version agree.
          const [served] = await ops.servedLogprobs([sample]);
          assert.ok(maxAbsDiff(after!, served!) < 1e-4, `learner vs served: ${maxAbsDiff(after!, served!)}`);
        });
      });

      test(`${mode}: zero advantages, no KL or entropy: a step changes nothing; AdamW's decay only shrinks`, async () => {
        const sample = sampleWith(0);
        await using(await openOps(contractConfig(mode, 0)), async (ops) => {
          // Read at once: a backend may prune all but its newest version folders.
          const w0 = weightsOf(await ops.publish(), fixture().cfg);
          const [lp0] = await ops.logprobs([sample]);
          const { optim } = await ops.step([sample]);
          assert.equal(optim.gradNorm, 0);
          assert.deepEqual(weightsOf(await ops.publish(), fixture().cfg), w0, 'the weights moved');
          const [lp1] = await ops.logprobs([sample]);
          assert.ok(maxAbsDiff(lp0!, lp1!) <= 1e-6, 'the log-probs moved');
        });
        // Decoupled weight decay moves weights without any gradient: p <- p (1 - lr wd), on matrices
        // and embeddings (all of a LoRA), never on norms and biases.
        const config = contractConfig(mode, 0.5);
        const factor = 1 - config.optimizer.lr * config.optimizer.weightDecay;
        await using(await openOps(config), async (ops) => {
          const w0 = weightsOf(await ops.publish(), fixture().cfg);
          await ops.step([sample]);
          const w1 = weightsOf(await ops.publish(), fixture().cfg);
          let decayed = 0,
            nonzero = 0;
          for (let i = 0; i < w0.length; i++) {
            const scaled = Math.abs(w1[i]! - w0[i]! * factor) <= 1e-6 * Math.abs(w0[i]!);
            assert.ok(scaled || w1[i] === w0[i], `value ${i}: ${w0[i]} -> ${w1[i]}, neither kept nor x${factor}`);
            if (w0[i] !== 0) nonzero++;
            if (scaled && w1[i] !== w0[i]) decayed++;
          }
          // A LoRA's B starts at zero, and zero stays zero.
          assert.ok(decayed > nonzero / 2, `only ${decayed} of ${nonzero} nonzero values decayed`);
        });
      });

      test(`${mode}: save, then a learner reopened on the checkpoint has the same weights and optimizer`, async () => {
        const sample = sampleWith(1);
        const dirs = freshDirs();
        const config = contractConfig(mode);
        let saved: Float32Array, next: Float32Array;
        await using(await openOps(config, dirs), async (ops) => {
          await ops.step([sample]);
          await ops.step([sample]);
          await ops.save();
          saved = weightsOf(await ops.publish(), fixture().cfg);
          await ops.step([sample]);
          next = weightsOf(await ops.publish(), fixture().cfg);
        });
        await using(await openOps(config, dirs), async (ops) => {
          assert.deepEqual(weightsOf(await ops.publish(), fixture().cfg), saved!, 'the reopened weights differ');
          const { optim } = await ops.step([sample]);
          assert.equal(optim.step, 3, 'the step count resumes');
          // The same third step: equal only if AdamW's moments were restored with the weights.
          const d = maxAbsDiff(weightsOf(await ops.publish(), fixture().cfg), next!);
          assert.ok(d <= 1e-6, `the step after the reopen differs by ${d}`);
        });
      });

      test(`${mode}: publish() writes a version folder; a fresh sampler reads it and scores like the reader`, async () => {
        const sample = sampleWith(1);
        await using(await openOps(contractConfig(mode)), async (ops) => {
          await ops.step([sample]);
          const v = await ops.publish();
          assert.equal(v.kind, mode);
          assert.ok(v.path !== null, 'the version has no folder');
          const onDisk = policyVersionAt(v.path, v.version);
          assert.equal(onDisk.kind, v.kind);
          if (v.update) assert.deepEqual(weightsOf(onDisk, fixture().cfg), weightsOf(v, fixture().cfg));
          // The reader loads v as given (the in-memory fast path when it carries its update),
          // the fresh sampler only the folder: the same weights give the same log-probs.
          const reader = fixture().reader;
          await reader.use(v);
          const fast = await reader.logprobs(sample.promptIds, sample.completionIds, { version: v.version });
          const base = await reader.logprobs(sample.promptIds, sample.completionIds, { version: 0 });
          const fresh = await fixture().openSampler();
          try {
            await fresh.use(onDisk);
            const read = await fresh.logprobs(sample.promptIds, sample.completionIds, { version: v.version });
            // 1e-5: the reader's prefix cache may sum a row in another order (docs/engine.md).
            assert.ok(maxAbsDiff(fast.logprobs, read.logprobs) <= 1e-5, 'the folder and the fast path differ');
            assert.ok(maxAbsDiff(base.logprobs, read.logprobs) > 1e-4, 'the version scores like the base');
          } finally {
            await fresh.close();
          }
        });
      });
    }
  });
}
