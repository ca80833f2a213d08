// learn/ppo.ts against a TEST DOUBLE learner that records each contract call: the anchor is taken
// once, before the first step, and given to every epoch; mini-batches are cut in order and each
// divides its loss by its own size; the OPD term is finished against the anchor; the top-k loss
// takes no anchor; StepMetrics come from the calls' results.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ForwardBackwardResult, LossSpec, OptimStepResult, TrainingSample } from '../src/engine/types.js';
import { DEFAULT_PPO, trainBatch, type BatchSample, type PpoLearner } from '../src/learn/ppo.js';

/** TEST DOUBLE: log-probs -1 - t/10 per token; each step moves nothing but counts. */
class RecordingLearner implements PpoLearner {
  readonly calls: string[] = [];
  readonly trained: { samples: TrainingSample[]; loss: LossSpec; batchSize: number }[] = [];
  private step = 0;

  async logprobs(samples: TrainingSample[]): Promise<Float32Array[]> {
    this.calls.push(`logprobs ${samples.length}`);
    return samples.map((s) => Float32Array.from(s.completionIds, (_, t) => -1 - t / 10));
  }

  async forwardBackward(samples: TrainingSample[], loss: LossSpec, batchSize: number): Promise<ForwardBackwardResult> {
    this.calls.push(`forwardBackward ${samples.length}/${batchSize}`);
    this.trained.push({ samples, loss, batchSize });
    const tokens = samples.reduce((a, s) => a + s.completionIds.length, 0);
    return { loss: 0.5, tokens, clipFraction: 0.25, approxKl: 0.01, entropy: 2, tisMean: 1, rolloutAbsDiff: 0.1 };
  }

  async optimStep(): Promise<OptimStepResult> {
    this.calls.push('optimStep');
    return { gradNorm: 3, applied: true, lr: 1e-4, step: ++this.step, yieldedMs: 7 };
  }
}

const sample = (id: number, n: number, advantage: number): BatchSample => ({
  promptIds: [1, 2],
  completionIds: Array.from({ length: n }, (_, t) => id * 10 + t),
  advantages: Array(n).fill(advantage),
});

test('one anchor before the first step, mini-batches in order, each epoch over the same anchored samples', async () => {
  const learner = new RecordingLearner();
  const samples = [sample(1, 3, 1), sample(2, 2, -1), sample(3, 4, 1), sample(4, 1, 0), sample(5, 2, 1)];
  const metrics = await trainBatch(learner, samples, { ...DEFAULT_PPO, miniBatchSize: 2, epochs: 2 });
  const step = (n: number) => [`forwardBackward ${n}/${n}`, 'optimStep'];
  assert.deepEqual(learner.calls, ['logprobs 5', ...[2, 2, 1, 2, 2, 1].flatMap(step)]);
  const ids = learner.trained.map((c) => c.samples.map((s) => s.completionIds[0]! / 10));
  assert.deepEqual(ids, [[1, 2], [3, 4], [5], [1, 2], [3, 4], [5]]);
  for (const c of learner.trained) {
    assert.equal(c.loss, DEFAULT_PPO.loss);
    for (const s of c.samples)
      assert.deepEqual(
        Array.from(s.oldLogprobs!),
        s.completionIds.map((_, t) => Math.fround(-1 - t / 10)),
      );
  }
  assert.equal(metrics.length, 6);
  assert.deepEqual(
    metrics.map((m) => [m.step, m.samples, m.tokens]),
    [
      [1, 2, 9],
      [2, 2, 9],
      [3, 1, 4],
      [4, 2, 9],
      [5, 2, 9],
      [6, 1, 4],
    ],
  );
  const m = metrics[0]!;
  assert.deepEqual(
    [
      m.loss,
      m.gradNorm,
      m.applied,
      m.lr,
      m.clipFraction,
      m.approxKl,
      m.entropy,
      m.tisMean,
      m.rolloutAbsDiff,
      m.yieldedMs,
    ],
    [0.5, 3, true, 1e-4, 0.25, 0.01, 2, 1, 0.1, 7],
  );
  assert.ok(metrics.every((x) => x.seconds > 0 && x.tokensPerSecond === x.tokens / x.seconds));
});

test('the OPD term is added against the anchor and a token without a teacher value is masked', async () => {
  const learner = new RecordingLearner();
  const teacherLogprobs = [-0.5, Number.NaN, -2];
  await trainBatch(
    learner,
    [{ ...sample(1, 3, 1), mask: [1, 1, 0], opd: { teacherLogprobs, weight: 2 } }],
    DEFAULT_PPO,
  );
  const [trained] = learner.trained[0]!.samples;
  const old = [-1, -1.1, -1.2].map(Math.fround);
  // Token 2 was masked already: its advantage trains nothing, whatever it holds.
  assert.deepEqual(trained!.advantages, [1 + 2 * (-0.5 - old[0]!), 1, 1 + 2 * (-2 - old[2]!)]);
  assert.deepEqual(trained!.mask, [1, 0, 0]);
  assert.equal('opd' in trained!, false, 'the learner gets plain per-token advantages');
});

test('the top-k loss takes no anchor; OPD samples and bad lengths are refused before any call', async () => {
  const topk: LossSpec = { kind: 'topk', entropyCoef: 0 };
  const learner = new RecordingLearner();
  await trainBatch(learner, [sample(1, 2, 0)], { ...DEFAULT_PPO, loss: topk });
  assert.deepEqual(learner.calls, ['forwardBackward 1/1', 'optimStep']);
  assert.equal(learner.trained[0]!.samples[0]!.oldLogprobs, undefined);

  const refused = new RecordingLearner();
  const opd = { ...sample(1, 2, 0), opd: { teacherLogprobs: [-1, -1], weight: 1 } };
  await assert.rejects(trainBatch(refused, [opd], { ...DEFAULT_PPO, loss: topk }), /OPD samples need the policy loss/);
  await assert.rejects(
    trainBatch(refused, [sample(1, 2, 0), { ...sample(2, 3, 0), advantages: [1] }], DEFAULT_PPO),
    /sample 1: advantages has 1, but completionIds has 3 tokens/,
  );
  assert.deepEqual(refused.calls, []);
});
