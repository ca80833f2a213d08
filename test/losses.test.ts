// The training losses: every gradient against central finite differences in float64, and
// hand-computed cases for the clip branches, importance weights, reduction and the fixes of
// the reference's defects (no teacher data is never a log-prob of 0; the methods' advantages
// are tested in learn-methods.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRng } from '../src/engine/local/sampling/random.js';
import {
  DEFAULT_POLICY_LOSS,
  policyLoss,
  type PolicyLossConfig,
  type PolicyLossInput,
  topKDistillationLoss,
  type TopKDistillationInput,
} from '../src/engine/local/train/losses.js';

const rng = createRng(4242);
const uniform = (lo: number, hi: number) => lo + (hi - lo) * rng.next();

function close(actual: number, expected: number, tol: number, what: string): void {
  assert.ok(
    Math.abs(actual - expected) <= tol * (1 + Math.abs(expected)),
    `${what}: got ${actual}, expected ${expected} (tolerance ${tol})`,
  );
}

/**
 * Central differences of f at x, coordinate by coordinate, against the analytic gradient.
 * The analytic gradient is float32, so the tolerance is relative 1e-6 of the largest entry.
 */
function checkGradient(what: string, f: (x: Float64Array) => number, x: Float64Array, analytic: Float32Array): void {
  const h = 1e-6;
  const scale = Math.max(1e-3, ...[...analytic].map(Math.abs));
  for (let i = 0; i < x.length; i++) {
    const saved = x[i]!;
    x[i] = saved + h;
    const up = f(x);
    x[i] = saved - h;
    const down = f(x);
    x[i] = saved;
    const numeric = (up - down) / (2 * h);
    assert.ok(
      Math.abs(numeric - analytic[i]!) <= 2e-6 * scale,
      `${what}[${i}]: analytic ${analytic[i]}, finite difference ${numeric}`,
    );
  }
}

/** A random mini-batch: log-ratios away from the clip edges (where the loss has a kink). */
function randomPolicyInput(lengths: number[], withRollout: boolean, withRef: boolean): PolicyLossInput {
  const R = lengths.reduce((a, n) => a + n, 0);
  const offsets = lengths.map((_, i) => lengths.slice(0, i).reduce((a, n) => a + n, 0));
  const old = Float64Array.from({ length: R }, () => uniform(-4, -0.1));
  const lp = old.map((o) => {
    for (;;) {
      const ratio = Math.exp(uniform(-0.6, 0.6));
      if (Math.abs(ratio - 0.8) > 0.02 && Math.abs(ratio - 1.28) > 0.02) return o + Math.log(ratio);
    }
  });
  const mask = Float64Array.from({ length: R }, () => (rng.next() < 0.8 ? 1 : 0));
  mask.fill(0, offsets[1]!, offsets[1]! + lengths[1]!); // sample 1 fully masked: counts in B, adds 0
  return {
    logprobs: lp,
    oldLogprobs: old,
    mask,
    offsets,
    lengths,
    advantages: Float64Array.from({ length: R }, (_, t) => (t % 3 === 0 ? 0.7 : t % 3 === 1 ? -1.3 : uniform(-2, 2))),
    // exp(old - rollout) in about [0.37, 2.7], so some weights hit the cap of 2.
    rolloutLogprobs: withRollout ? old.map((o) => o + uniform(-1, 1)) : null,
    refLogprobs: withRef ? old.map((o) => o + uniform(-0.5, 0.5)) : null,
    entropy: Float64Array.from({ length: R }, () => uniform(0.1, 3)),
  };
}

const policyCases: [string, boolean, boolean, Partial<PolicyLossConfig>][] = [
  ['plain PPO-clip', false, false, { tisCap: null }],
  ['with TIS', true, false, {}],
  ['with KL', false, true, { klCoef: 0.3 }],
  ['with entropy', false, false, { entropyCoef: 0.05 }],
  ['TIS, KL and entropy', true, true, { klCoef: 0.1, entropyCoef: 0.02, eps: 0.1, epsHigh: 0.15 }],
];

for (const [name, withRollout, withRef, overrides] of policyCases) {
  test(`policyLoss gradients match finite differences: ${name}`, () => {
    const cfg = { ...DEFAULT_POLICY_LOSS, ...overrides };
    const input = randomPolicyInput([7, 3, 9, 1], withRollout, withRef);
    const out = policyLoss(input, cfg);
    const lp = Float64Array.from(input.logprobs),
      H = Float64Array.from(input.entropy);
    checkGradient('dLogprobs', (x) => policyLoss({ ...input, logprobs: x }, cfg).loss, lp, out.dLogprobs);
    checkGradient('dEntropy', (x) => policyLoss({ ...input, entropy: x }, cfg).loss, H, out.dEntropy);
    assert.ok(
      out.metrics.clipFraction > 0 && out.metrics.clipFraction < 1,
      `both branches exercised, clipFraction ${out.metrics.clipFraction}`,
    );
    if (withRollout) assert.ok(out.metrics.tisClippedFraction > 0, 'some importance weights capped');
  });
}

test('policyLoss: ratio ≡ 1 gives clipFraction 0 and gradient -A / len', () => {
  for (const A of [1, -1, 0.25]) {
    const n = 4,
      lp = [-1, -2, -0.5, -3];
    const out = policyLoss({
      logprobs: lp,
      oldLogprobs: lp,
      rolloutLogprobs: null,
      refLogprobs: null,
      advantages: Array(n).fill(A),
      mask: Array(n).fill(1),
      entropy: Array(n).fill(1),
      offsets: [0],
      lengths: [n],
    });
    close(out.loss, -A, 1e-12, 'loss');
    for (const g of out.dLogprobs) close(g, -A / n, 1e-7, 'dLogprobs');
    assert.equal(out.metrics.clipFraction, 0);
    assert.equal(out.metrics.approxKl, 0);
    assert.equal(out.metrics.ratioMean, 1);
    assert.equal(out.metrics.tokens, n);
  }
});

// One token, eps 0.2 / epsHigh 0.28: [ratio, A, loss, d loss / d lp, clipped].
const clipTable: [number, number, number, number, boolean][] = [
  [1.5, 1, -1.28, 0, true], // A > 0, ratio above 1 + epsHigh: the clipped branch is the max
  [1.5, -1, 1.5, 1.5, false], // A < 0 above the range: unclipped is larger, gradient -ratio A
  [0.5, 1, -0.5, -0.5, false], // A > 0 below the range: unclipped is larger
  [0.5, -1, 0.8, 0, true], // A < 0 below 1 - eps: clipped
  [1.1, 2, -2.2, -2.2, false], // inside the range: a tie, slope of the unclipped branch
  [1.5, 0, 0, 0, false], // A = 0: a tie, not counted as clipped
];

for (const [ratio, A, loss, grad, clipped] of clipTable) {
  test(`policyLoss clip branch: ratio ${ratio}, A ${A}`, () => {
    const out = policyLoss({
      logprobs: [Math.log(ratio) - 1],
      oldLogprobs: [-1],
      rolloutLogprobs: null,
      refLogprobs: null,
      advantages: [A],
      mask: [1],
      entropy: [0],
      offsets: [0],
      lengths: [1],
    });
    close(out.loss, loss, 1e-12, 'loss');
    close(out.dLogprobs[0]!, grad, 1e-7, 'dLogprobs');
    assert.equal(out.metrics.clipFraction, clipped ? 1 : 0);
  });
}

test('policyLoss: truncated importance weights scale loss and gradient, capped at tisCap', () => {
  const run = (rollout: number, tisCap: number | null) =>
    policyLoss(
      {
        logprobs: [-1],
        oldLogprobs: [-1],
        rolloutLogprobs: [rollout],
        refLogprobs: null,
        advantages: [1],
        mask: [1],
        entropy: [0],
        offsets: [0],
        lengths: [1],
      },
      { ...DEFAULT_POLICY_LOSS, tisCap },
    );
  const capped = run(-1 - Math.log(3), 2); // weight 3 -> 2
  close(capped.loss, -2, 1e-12, 'capped loss');
  close(capped.dLogprobs[0]!, -2, 1e-7, 'capped gradient');
  assert.equal(capped.metrics.tisClippedFraction, 1);
  close(capped.metrics.tisMean, 2, 1e-12, 'tisMean');
  const down = run(-1 + Math.log(2), 2); // weight 0.5
  close(down.loss, -0.5, 1e-12, 'down-weighted loss');
  assert.equal(down.metrics.tisClippedFraction, 0);
  const off = run(-1 - Math.log(3), null);
  close(off.loss, -1, 1e-12, 'correction off');
  close(off.metrics.rolloutAbsDiff, Math.log(3), 1e-12, 'rolloutAbsDiff');
});

test('policyLoss: token mean per sample, mean over samples; fully masked samples count in B', () => {
  // Sample 0: 2 tokens (1 masked), sample 1: 3 tokens, sample 2: fully masked.
  const out = policyLoss({
    logprobs: [-1, -1, -1, -1, -1, -1, -1],
    oldLogprobs: [-1, -1, -1, -1, -1, -1, -1],
    rolloutLogprobs: null,
    refLogprobs: null,
    advantages: [2, 99, 1, 1, 1, 5, 5],
    mask: [1, 0, 1, 1, 1, 0, 0],
    entropy: Array(7).fill(0),
    offsets: [0, 2, 5],
    lengths: [2, 3, 2],
  });
  close(out.loss, (-2 + -1) / 3, 1e-12, 'loss');
  const expected = [-2 / 1 / 3, 0, -1 / 3 / 3, -1 / 3 / 3, -1 / 3 / 3, 0, 0];
  expected.forEach((g, t) => close(out.dLogprobs[t]!, g, 1e-7, `dLogprobs[${t}]`));
  assert.equal(out.metrics.tokens, 4);
  // As one micro-batch of a batch of 6 samples, everything halves.
  const micro = policyLoss({
    logprobs: [-1, -1, -1, -1, -1, -1, -1],
    oldLogprobs: [-1, -1, -1, -1, -1, -1, -1],
    rolloutLogprobs: null,
    refLogprobs: null,
    advantages: [2, 99, 1, 1, 1, 5, 5],
    mask: [1, 0, 1, 1, 1, 0, 0],
    entropy: Array(7).fill(0),
    offsets: [0, 2, 5],
    lengths: [2, 3, 2],
    batchSize: 6,
  });
  close(micro.loss, out.loss / 2, 1e-12, 'micro-batch loss');
});

test('policyLoss: k3 KL to the base and the entropy bonus', () => {
  const out = policyLoss(
    {
      logprobs: [-2],
      oldLogprobs: [-2],
      rolloutLogprobs: null,
      refLogprobs: [-1],
      advantages: [0],
      mask: [1],
      entropy: [1.5],
      offsets: [0],
      lengths: [1],
    },
    { ...DEFAULT_POLICY_LOSS, klCoef: 0.5, entropyCoef: 0.1 },
  );
  const kl = Math.E - 1 - 1; // exp(ref - lp) - (ref - lp) - 1 with ref - lp = 1
  close(out.metrics.klLoss, kl, 1e-12, 'klLoss');
  close(out.loss, 0.5 * kl - 0.1 * 1.5, 1e-12, 'loss');
  close(out.dLogprobs[0]!, 0.5 * (1 - Math.E), 1e-6, 'dLogprobs');
  close(out.dEntropy[0]!, -0.1, 1e-7, 'dEntropy');
});

test('policyLoss: masked tokens are never read, so NaN there changes nothing', () => {
  const out = policyLoss(
    {
      logprobs: [-1, NaN],
      oldLogprobs: [-1, NaN],
      rolloutLogprobs: [-1, NaN],
      refLogprobs: [-1, NaN],
      advantages: [1, NaN],
      mask: [1, 0],
      entropy: [1, NaN],
      offsets: [0],
      lengths: [2],
    },
    { ...DEFAULT_POLICY_LOSS, klCoef: 0.1 },
  );
  close(out.loss, -1, 1e-12, 'loss');
  assert.deepEqual([...out.dLogprobs], [-1, 0]);
});

test('policyLoss: bad inputs get errors that name every length or the problem', () => {
  const base: PolicyLossInput = {
    logprobs: [-1, -1],
    oldLogprobs: [-1, -1],
    rolloutLogprobs: null,
    refLogprobs: null,
    advantages: [1],
    mask: [1, 1],
    entropy: [0, 0],
    offsets: [0],
    lengths: [2],
  };
  assert.throws(
    () => policyLoss(base),
    /per-token arrays differ in length \(expected 2\): oldLogprobs 2, advantages 1, mask 2, entropy 2/,
  );
  const ok = { ...base, advantages: [1, 1] };
  assert.throws(() => policyLoss(ok, { ...DEFAULT_POLICY_LOSS, klCoef: 0.1 }), /klCoef is 0.1 but no refLogprobs/);
  assert.throws(() => policyLoss({ ...ok, mask: [1, 0.5] }), /mask\[1\] is 0.5; masks hold 0 or 1/);
  assert.throws(
    () => policyLoss({ ...ok, offsets: [0, 1], lengths: [2, 1] }),
    /sample 1 spans \[1, 2\) but samples must be ascending, non-overlapping/,
  );
  assert.throws(() => policyLoss({ ...ok, lengths: [3] }), /inside 2 tokens/);
});

// ---- top-K distillation -------------------------------------------------------------------

/** Log-softmax of random logits over V ids, then the log-probs of the first K. */
function topK(V: number, K: number, sharp: number): number[] {
  const z = Array.from({ length: V }, () => uniform(-sharp, sharp));
  const max = Math.max(...z);
  const lse = max + Math.log(z.reduce((a, x) => a + Math.exp(x - max), 0));
  return z.slice(0, K).map((x) => x - lse);
}

function randomTopKInput(lengths: number[], K: number): TopKDistillationInput {
  const R = lengths.reduce((a, n) => a + n, 0);
  const student: number[] = [],
    teacher: number[] = [];
  for (let r = 0; r < R; r++) {
    student.push(...topK(12, K, 2));
    teacher.push(...topK(12, K, 3));
  }
  const mask = Array.from({ length: R }, (_, r) => (r === 2 ? 0 : 1));
  for (let k = 0; k < K; k++) teacher[4 * K + k] = NaN; // token 4: no teacher data at all
  teacher[6 * K + K - 1] = NaN; // token 6: a short teacher row
  // Token 7: top-K log-probs summing past 1 (possible across numerics): the tail clamp holds.
  for (let k = 0; k < K; k++) student[7 * K + k] = Math.log(0.3);
  return {
    K,
    studentLogprobs: Float64Array.from(student),
    teacherLogprobs: teacher,
    mask,
    offsets: lengths.map((_, i) => lengths.slice(0, i).reduce((a, n) => a + n, 0)),
    lengths,
  };
}

for (const entropyCoef of [0, 0.2]) {
  test(`topKDistillationLoss gradients match finite differences (entropyCoef ${entropyCoef})`, () => {
    const input = randomTopKInput([5, 4, 2], 4);
    const out = topKDistillationLoss(input, { entropyCoef });
    const s = Float64Array.from(input.studentLogprobs);
    checkGradient(
      'dStudentLogprobs',
      (x) => topKDistillationLoss({ ...input, studentLogprobs: x }, { entropyCoef }).loss,
      s,
      out.dStudentLogprobs,
    );
    assert.equal(out.metrics.tokensWithoutTeacher, 1);
    assert.equal(out.metrics.tokens, 9);
  });
}

test('topKDistillationLoss: hand-computed KL with the tail bin; zero loss and gradient at the teacher', () => {
  // K = 1: student (0.5 | tail 0.5), teacher (0.25 | tail 0.75).
  const one = topKDistillationLoss({
    K: 1,
    studentLogprobs: [Math.log(0.5)],
    teacherLogprobs: [Math.log(0.25)],
    mask: [1],
    offsets: [0],
    lengths: [1],
  });
  close(one.loss, 0.5 * Math.log(2) + 0.5 * Math.log(0.5 / 0.75), 1e-12, 'loss');
  close(one.metrics.studentTailMass, 0.5, 1e-12, 'studentTailMass');
  close(one.metrics.teacherTailMass, 0.75, 1e-12, 'teacherTailMass');
  const same = [Math.log(0.4), Math.log(0.3), Math.log(0.1)];
  const at = topKDistillationLoss({
    K: 3,
    studentLogprobs: same,
    teacherLogprobs: same,
    mask: [1],
    offsets: [0],
    lengths: [1],
  });
  close(at.loss, 0, 1e-12, 'loss at the teacher');
  for (const g of at.dStudentLogprobs) close(g, 0, 1e-7, 'gradient at the teacher');
});

test('topKDistillationLoss: a token without teacher data is masked, not read as log-prob 0', () => {
  const s = [Math.log(0.5), Math.log(0.2)],
    t = [Math.log(0.25), Math.log(0.25)];
  const alone = topKDistillationLoss({
    K: 2,
    studentLogprobs: s,
    teacherLogprobs: t,
    mask: [1],
    offsets: [0],
    lengths: [1],
  });
  const withGap = topKDistillationLoss({
    K: 2,
    studentLogprobs: [...s, ...s],
    teacherLogprobs: [...t, NaN, NaN],
    mask: [1, 1],
    offsets: [0],
    lengths: [2],
  });
  close(withGap.loss, alone.loss, 1e-12, 'the gap neither adds loss nor dilutes the token mean');
  assert.deepEqual([...withGap.dStudentLogprobs.subarray(2)], [0, 0]);
  assert.equal(withGap.metrics.tokensWithoutTeacher, 1);
  assert.throws(
    () =>
      topKDistillationLoss({ K: 2, studentLogprobs: s, teacherLogprobs: [0], mask: [1], offsets: [0], lengths: [1] }),
    /expected 2\): studentLogprobs 2, teacherLogprobs 1/,
  );
});
