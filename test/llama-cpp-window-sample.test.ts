// Sampling from the largest logits (src/engine/llama-cpp/window-sample.ts) against the embedded
// engine's sampling of the whole row (src/engine/local/sampling/sample.ts): where the window
// answers, the same draw from the same generator, the same sampled log-prob, the log-prob within
// the float32 normalizer's error (about 1e-4 on these rows); where it cannot decide (a flat distribution), it says so without
// drawing.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sampleFromWindow } from '../src/engine/llama-cpp/window-sample.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { type SampleSettings, sampleToken } from '../src/engine/local/sampling/sample.js';

const VOCAB = 50_000;

/** Logits of a peaked row (a few ids far above a noisy floor, as a trained model's) or a flat one. */
function row(seed: number, peaked: boolean): Float32Array {
  const rng = createRng(seed);
  const r = new Float32Array(VOCAB);
  for (let i = 0; i < VOCAB; i++) r[i] = (rng.next() - 0.5) * (peaked ? 6 : 0.5);
  if (peaked) for (let j = 0; j < 12; j++) r[Math.floor(rng.next() * VOCAB)] = 12 + 4 * rng.next();
  return r;
}

/** What llama.cpp returns: the `size` largest logits, and sum(exp(logit - max)) summed in float32. */
function windowOf(r: Float32Array, size: number): { logits: Map<number, number>; weight: number } {
  const ids = Array.from(r.keys()).sort((a, b) => r[b]! - r[a]! || a - b);
  const max = r[ids[0]!]!;
  let weight = 0;
  for (let i = 0; i < r.length; i++) weight = Math.fround(weight + Math.fround(Math.exp(r[i]! - max)));
  return { logits: new Map(ids.slice(0, size).map((id) => [id, r[id]!])), weight };
}

const settings: SampleSettings[] = [
  { temperature: 0.7, topP: 0.9, topK: 0, topLogprobs: 2 },
  { temperature: 0.6, topP: 0.95, topK: 20, topLogprobs: 0 },
  { temperature: 1, topP: 0.8, topK: 0, topLogprobs: 0 },
  { temperature: 0.5, topP: 1, topK: 5, topLogprobs: 0 },
];

test('where the window answers it draws what sampling the whole row draws', () => {
  for (const s of settings) {
    let answered = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const r = row(seed, true);
      const { logits, weight } = windowOf(r, 256);
      const [a, b] = [createRng(seed * 7), createRng(seed * 7)];
      const got = sampleFromWindow(logits, weight, VOCAB, s, a);
      if (got === null) continue;
      answered++;
      const want = sampleToken(r, s, b);
      assert.equal(got.id, want.id, `T ${s.temperature} top-p ${s.topP} top-k ${s.topK}, row ${seed}`);
      assert.equal(got.sampledLogprob, want.sampledLogprob);
      // llama.cpp's normalizer is a float32 sum: on peaked rows it drops part of the tail's small terms.
      assert.ok(Math.abs(got.logprob - want.logprob) < 1e-3, `${got.logprob} vs ${want.logprob}`);
      assert.deepEqual(
        got.top?.map((t) => t.id),
        want.top?.map((t) => t.id),
      );
      assert.equal(a.next(), b.next(), 'one draw each');
    }
    assert.ok(answered >= 10, `T ${s.temperature} top-p ${s.topP}: the window answered ${answered} of 12 peaked rows`);
  }
});

test('on a flat row the nucleus lies beyond the window: no answer, and nothing drawn', () => {
  const r = row(3, false);
  const { logits, weight } = windowOf(r, 256);
  const rng = createRng(5);
  assert.equal(sampleFromWindow(logits, weight, VOCAB, settings[0]!, rng), null);
  assert.equal(rng.next(), createRng(5).next());
});

test('a window of the whole vocabulary always answers', () => {
  const small = Float32Array.from({ length: 300 }, (_, i) => Math.sin(i) * 2);
  const ids = Array.from(small.keys());
  const max = Math.max(...small);
  const weight = small.reduce((w, l) => w + Math.exp(l - max), 0);
  const s = settings[2]!;
  const got = sampleFromWindow(new Map(ids.map((id) => [id, small[id]!])), weight, 300, s, createRng(2));
  assert.equal(got?.id, sampleToken(small, s, createRng(2)).id);
});
