// The training attention (train/attention.ts) against causal attention and its gradients written
// out in float64 here, on packed sequences long enough to span several query blocks (the last
// one partial), so that the blocks which skip the masked triangle are all exercised, with the
// backward recomputing the probabilities from the forward's log-sum-exp.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { gemmFor } from '../src/engine/local/precision.js';
import {
  attentionBackward,
  attentionForward,
  attentionScratchSize,
  type PackedSequence,
} from '../src/engine/local/train/attention.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20261201);
const H = 4,
  KV = 2,
  hd = 8,
  qDim = H * hd,
  kvDim = KV * hd,
  scale = 1 / Math.sqrt(hd);
// 300 tokens: query blocks of 128, 128 and 44 rows; then a sequence shorter than one block.
const seqs: PackedSequence[] = [
  { start: 0, length: 300 },
  { start: 300, length: 5 },
];
const T = 305;

/** out, lse (at H*start + h*length + i), dq, dk, dv in float64, straight from the definitions. */
function reference(q: Float32Array, k: Float32Array, v: Float32Array, dOut: Float32Array) {
  const out = new Float64Array(T * qDim),
    lse = new Float64Array(T * H),
    dq = new Float64Array(T * qDim);
  const dk = new Float64Array(T * kvDim),
    dv = new Float64Array(T * kvDim);
  for (const s of seqs) {
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / (H / KV));
      const qi = (t: number, d: number) => (s.start + t) * qDim + h * hd + d;
      const kj = (t: number, d: number) => (s.start + t) * kvDim + g * hd + d;
      for (let i = 0; i < s.length; i++) {
        const p = new Float64Array(i + 1);
        for (let j = 0; j <= i; j++) for (let d = 0; d < hd; d++) p[j]! += scale * q[qi(i, d)]! * k[kj(j, d)]!;
        const max = Math.max(...p);
        let sum = 0;
        for (let j = 0; j <= i; j++) sum += p[j] = Math.exp(p[j]! - max);
        lse[H * s.start + h * s.length + i] = max + Math.log(sum);
        for (let j = 0; j <= i; j++) p[j]! /= sum;
        // dS_j = P_j (dP_j - sum_c P_c dP_c), dP_j = dO . V_j
        const dP = new Float64Array(i + 1);
        let dot = 0;
        for (let j = 0; j <= i; j++) {
          for (let d = 0; d < hd; d++) {
            out[qi(i, d)]! += p[j]! * v[kj(j, d)]!;
            dv[kj(j, d)]! += p[j]! * dOut[qi(i, d)]!;
            dP[j]! += dOut[qi(i, d)]! * v[kj(j, d)]!;
          }
          dot += p[j]! * dP[j]!;
        }
        for (let j = 0; j <= i; j++) {
          const dS = p[j]! * (dP[j]! - dot);
          for (let d = 0; d < hd; d++) {
            dq[qi(i, d)]! += scale * dS * k[kj(j, d)]!;
            dk[kj(j, d)]! += scale * dS * q[qi(i, d)]!;
          }
        }
      }
    }
  }
  return { out, lse, dq, dk, dv };
}

function assertClose(actual: Float32Array, expected: Float64Array, what: string): void {
  const max = expected.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
  for (let i = 0; i < expected.length; i++) {
    const error = Math.abs(actual[i]! - expected[i]!);
    assert.ok(
      error <= 1e-5 * max,
      `${what}: element ${i} is ${actual[i]}, expected ${expected[i]} (error ${error}, largest |value| ${max})`,
    );
  }
}

describe('training attention over several query blocks', () => {
  const q = randomArrayFrom(random, T * qDim, 2),
    k = randomArrayFrom(random, T * kvDim, 2);
  const v = randomArrayFrom(random, T * kvDim),
    dOut = randomArrayFrom(random, T * qDim);
  const expected = reference(q, k, v, dOut);
  const implementations: Array<[string, () => Kernels, string | false]> = [
    ['portable', () => portableKernels, false],
    ['native', native, skipNative],
  ];
  for (const [name, kernels, skip] of implementations) {
    test(`${name}: output, log-sum-exp and dq, dk, dv match float64`, { skip }, () => {
      const kk = kernels();
      const shape = { nHeads: H, nKvHeads: KV, headDim: hd };
      // Stale values everywhere the kernels must overwrite: NaN would survive any missed write.
      const out = new Float32Array(T * qDim).fill(NaN),
        lse = new Float32Array(T * H).fill(NaN);
      const scratch = new Float32Array(attentionScratchSize(300)).fill(NaN);
      attentionForward(kk, gemmFor(kk, 'fp32'), out, lse, q, k, v, seqs, shape, scratch);
      assertClose(out, expected.out, `${name} out`);
      assertClose(lse, expected.lse, `${name} lse`);
      const dq = new Float32Array(T * qDim).fill(NaN),
        dk = new Float32Array(T * kvDim).fill(NaN),
        dv = new Float32Array(T * kvDim).fill(NaN);
      attentionBackward(kk, gemmFor(kk, 'fp32'), dq, dk, dv, dOut, out, lse, q, k, v, seqs, shape, scratch.fill(NaN));
      assertClose(dq, expected.dq, `${name} dq`);
      assertClose(dk, expected.dk, `${name} dk`);
      assertClose(dv, expected.dv, `${name} dv`);
    });
  }
});
