import { test } from 'node:test';
import assert from 'node:assert/strict';
import { candidateSet, kthLargest, logSumExp, sampleToken, topLogprobs } from '../src/engine/local/sampling/sample.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { native, skipNative } from './helpers/native.js';

function randomLogits(V: number, seed: number, scale = 3): Float32Array {
  const rng = createRng(seed);
  return Float32Array.from({ length: V }, () => (rng.next() - 0.5) * 2 * scale);
}

/** The textbook definition: sort everything, then cut by k and by cumulative mass. */
function naiveCandidates(probs: Float64Array, topK: number, topP: number): number[] {
  const total = probs.reduce((a, b) => a + b, 0);
  const order = Array.from(probs.keys()).sort((a, b) => probs[b]! - probs[a]! || a - b);
  const kept: number[] = [];
  let cum = 0;
  for (const id of order) {
    if (topK > 0 && kept.length >= topK) break;
    kept.push(id);
    cum += probs[id]!;
    if (topP < 1 && cum >= topP * total) break;
  }
  return kept;
}

test('candidateSet equals the sort-everything definition for many k, p and distributions', () => {
  for (let seed = 0; seed < 60; seed++) {
    const V = 50 + seed * 37;
    // From seed 40 on, logits on a grid of 1/4: many exact ties, which go by id.
    const logits = randomLogits(V, seed, 1 + (seed % 7) * 2).map((l) => (seed >= 40 ? Math.round(l * 4) / 4 : l));
    const probs = Float64Array.from(logits, (l) => Math.exp(l));
    const total = probs.reduce((a, b) => a + b, 0);
    for (const [k, p] of [
      [0, 0.9],
      [5, 1],
      [0, 0.5],
      [20, 0.95],
      [1, 1],
      [0, 0.999],
      [V + 5, 0.3],
    ] as const) {
      assert.deepEqual(candidateSet(probs, total, k, p), naiveCandidates(probs, k, p), `seed ${seed} k ${k} p ${p}`);
    }
  }
});

test('kthLargest equals the k-th entry of the values sorted, ties included', () => {
  for (let seed = 0; seed < 20; seed++) {
    const rng = createRng(seed);
    // Rounded to few values, so that ties are common.
    const values = Float64Array.from({ length: 30 + seed * 11 }, () => Math.round(rng.next() * (2 + seed)) / 3);
    const sorted = Array.from(values).sort((a, b) => b - a);
    for (const k of [1, 2, 5, values.length - 1, values.length]) assert.equal(kthLargest(values, k), sorted[k - 1]);
  }
});

test('sampleToken reports the model log-prob at temperature 1 and the log-prob of the filtered distribution', () => {
  const logits = randomLogits(300, 7);
  const lse = logSumExp(logits);
  const rng = createRng(1);
  for (let i = 0; i < 50; i++) {
    const r = sampleToken(logits, { temperature: 0.7, topK: 10, topP: 0.9, topLogprobs: 0 }, rng);
    assert.ok(Math.abs(r.logprob - (logits[r.id]! - lse)) < 1e-9);
    // Recompute q(id) by hand: temperature, top-10, top-0.9, renormalize.
    const tempered = Float64Array.from(logits, (l) => Math.exp(l / 0.7));
    const cands = naiveCandidates(tempered, 10, 0.9);
    assert.ok(cands.includes(r.id), 'sampled token is outside the candidate set');
    const mass = cands.reduce((a, id) => a + tempered[id]!, 0);
    assert.ok(Math.abs(r.sampledLogprob - Math.log(tempered[r.id]! / mass)) < 1e-9);
  }
});

test('without top-k or top-p every id is a candidate in id order: draw for draw the inverse-CDF definition', () => {
  // The definition, written out: tempered weights, one uniform, walk the ids in order.
  const reference = (logits: Float32Array, temperature: number, u01: number) => {
    const max = logits.reduce((a, b) => Math.max(a, b), -Infinity);
    const w = Float64Array.from(logits, (l) => Math.exp((l - max) / temperature));
    const total = w.reduce((a, b) => a + b, 0);
    let u = u01 * total;
    for (let id = 0; id < w.length; id++) if ((u -= w[id]!) < 0) return { id, q: Math.log(w[id]! / total) };
    return { id: w.length - 1, q: Math.log(w[w.length - 1]! / total) };
  };
  for (const [temperature, topK, topP] of [
    [1, 0, 1],
    [0.6, 0, 1],
    [1.3, 2000, 0],
  ] as const) {
    const logits = randomLogits(1000, 5, 4);
    const lse = logSumExp(logits);
    const rng = createRng(3),
      mirror = createRng(3);
    for (let i = 0; i < 200; i++) {
      const r = sampleToken(logits, { temperature, topK, topP, topLogprobs: 0 }, rng);
      const want = reference(logits, temperature, mirror.next());
      assert.equal(r.id, want.id, `draw ${i} at temperature ${temperature}`);
      assert.ok(Math.abs(r.sampledLogprob - want.q) < 1e-12);
      assert.ok(Math.abs(r.logprob - (logits[r.id]! - lse)) < 1e-12);
    }
  }
});

test('a log-normalizer given by the caller is the one the log-probs use', () => {
  const logits = randomLogits(400, 8);
  const given = logSumExp(logits) + 0.25;
  for (const temperature of [0, 1, 0.8]) {
    const r = sampleToken(logits, { temperature, topK: 0, topP: 1, topLogprobs: 3 }, createRng(1), given);
    assert.equal(r.logprob, logits[r.id]! - given);
    assert.equal(r.top![0]!.logprob, logits[r.top![0]!.id]! - given);
  }
});

test('greedy picks the argmax with sampled log-prob 0; a seed reproduces a sample exactly', () => {
  const logits = randomLogits(1000, 3);
  const g = sampleToken(logits, { temperature: 0, topK: 0, topP: 1, topLogprobs: 0 }, createRng(0));
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  assert.equal(g.id, best);
  assert.equal(g.sampledLogprob, 0);
  const draw = (seed: number) => {
    const rng = createRng(seed);
    return Array.from(
      { length: 20 },
      () => sampleToken(logits, { temperature: 1, topK: 0, topP: 1, topLogprobs: 0 }, rng).id,
    );
  };
  assert.deepEqual(draw(42), draw(42));
  assert.notDeepEqual(draw(42), draw(43));
});

test('sampling frequencies follow the filtered distribution (chi-square)', () => {
  const logits = Float32Array.from([2, 1.5, 1, 0.5, 0, -1, -3, -5]);
  const settings = { temperature: 0.8, topK: 0, topP: 0.9, topLogprobs: 0 };
  const tempered = Float64Array.from(logits, (l) => Math.exp(l / 0.8));
  const cands = naiveCandidates(tempered, 0, 0.9);
  const mass = cands.reduce((a, id) => a + tempered[id]!, 0);
  const rng = createRng(9);
  const N = 20000;
  const counts = new Map<number, number>();
  for (let i = 0; i < N; i++) {
    const id = sampleToken(logits, settings, rng).id;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  for (const id of counts.keys()) assert.ok(cands.includes(id), `token ${id} is outside the nucleus`);
  let chi2 = 0;
  for (const id of cands) {
    const expected = (N * tempered[id]!) / mass;
    chi2 += ((counts.get(id) ?? 0) - expected) ** 2 / expected;
  }
  // df = cands.length - 1 <= 7; the 99.9% quantile of chi2(7) is 24.3.
  assert.ok(chi2 < 24.3, `chi-square ${chi2.toFixed(2)} too large`);
});

test('topLogprobs returns the k best as normalized log-probs, best first', () => {
  const logits = randomLogits(500, 11);
  const lse = logSumExp(logits);
  const top = topLogprobs(logits, 5);
  const sorted = Array.from(logits.keys())
    .sort((a, b) => logits[b]! - logits[a]!)
    .slice(0, 5);
  assert.deepEqual(
    top.map((t) => t.id),
    sorted,
  );
  for (const t of top) assert.ok(Math.abs(t.logprob - (logits[t.id]! - lse)) < 1e-9);
});

/** e^((z - max) * invT) in float64, the definition the kernels compute. */
function referenceWeights(z: Float32Array, invT: number): { w: Float64Array; total: number } {
  const max = z.reduce((a, b) => Math.max(a, b), -Number.MAX_VALUE);
  const w = Float64Array.from(z, (l) => Math.exp((l - max) * Math.min(invT, 3.4028234663852886e38)));
  return { w, total: w.reduce((a, b) => a + b, 0) };
}

test('temperedWeights: both kernels against float64, masked logits 0, far-below weights 0, huge invT the greedy limit', () => {
  const kernels = skipNative ? [portableKernels] : [portableKernels, native()];
  for (const V of [1, 15, 16, 17, 33, 1000, 151936]) {
    const z = randomLogits(V, V, 6);
    for (let i = 0; i < V; i++) z[i]! += 40; // far from 0: the max must be subtracted
    if (V > 2) z[1] = -Infinity;
    if (V > 3) z[2] = z[0]! - 200; // e^-200 of the best: below the native kernel's e^-87
    for (const invT of [1, 1 / 0.6, 5, 1e39, Infinity]) {
      const want = referenceWeights(z, invT);
      for (const k of kernels) {
        const what = `${k.name} V ${V} invT ${invT}`;
        const w = new Float64Array(V).fill(Number.NaN);
        const total = k.temperedWeights(w, z, V, invT);
        const tolerance = k.name === 'native' ? 2e-6 : 1e-15;
        assert.ok(Math.abs(total - want.total) <= tolerance * want.total, `${what}: total ${total} vs ${want.total}`);
        for (let i = 0; i < V; i++) {
          const [got, exact] = [w[i]!, want.w[i]!];
          const below = exact < Math.exp(-87);
          const ok = below ? got <= Math.exp(-87) && got >= 0 : Math.abs(got - exact) <= tolerance * exact;
          assert.ok(ok, `${what}: weight ${i} ${got} vs ${exact}`);
        }
        if (V > 2) assert.equal(w[1], 0, `${what}: a masked logit weighs 0`);
        if (V > 3 && k.name === 'native') assert.equal(w[2], 0, `${what}: e^-200 is stored as 0`);
        if (invT > 1e38) assert.equal(total, 1, `${what}: only the best token is left`);
      }
    }
  }
});

test('temperedWeights (native) checks its arguments', { skip: skipNative }, () => {
  const k = native();
  const z = new Float32Array(8);
  assert.throws(() => k.temperedWeights(new Float64Array(8), z, 8, 0), /invT must be a positive number, got 0/);
  assert.throws(() => k.temperedWeights(new Float64Array(8), z, 8, Number.NaN), /invT must be a positive number/);
  assert.throws(() => k.temperedWeights(new Float64Array(7), z, 8, 1), RangeError);
  assert.throws(() => k.temperedWeights(new Float32Array(8) as unknown as Float64Array, z, 8, 1), TypeError);
});

test('sampleToken on the native weights draws what it draws on the float64 ones, draw for draw', {
  skip: skipNative,
}, () => {
  const weigh = native().temperedWeights;
  const logits = randomLogits(151936, 11, 5);
  for (const [temperature, topK, topP] of [
    [1, 0, 1],
    [0.6, 20, 0.95],
    [0.7, 0, 0.8],
  ] as const) {
    const s = { temperature, topK, topP, topLogprobs: 0 };
    const [a, b] = [createRng(9), createRng(9)];
    for (let i = 0; i < 200; i++) {
      const js = sampleToken(logits, s, a);
      const nat = sampleToken(logits, s, b, undefined, weigh);
      assert.equal(nat.id, js.id, `draw ${i} at ${JSON.stringify(s)}`);
      assert.ok(Math.abs(nat.sampledLogprob - js.sampledLogprob) < 1e-5, `draw ${i}: ${nat.sampledLogprob}`);
      assert.ok(Math.abs(nat.logprob - js.logprob) < 1e-5, `draw ${i}: ${nat.logprob}`);
    }
  }
});
