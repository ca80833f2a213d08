// The training attention (train/attention.ts) against causal attention and its gradients written
// out in float64 here, on packed sequences long enough to span several query blocks (the last
// one partial), so that the blocks which skip the masked triangle are all exercised, with the
// backward recomputing the probabilities from the forward's log-sum-exp.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { bf16Value, toBf16 } from '../src/engine/local/kernels/bf16.js';
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
// 700 tokens: query blocks of 5 x 128 and 60 rows, so that the fused kernels' last block rows see
// 640 and 768 key columns, a chunk of 512 and a remainder; then a sequence shorter than one block.
const seqs: PackedSequence[] = [
  { start: 0, length: 700 },
  { start: 700, length: 5 },
];
const T = 705;

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
      const scratch = new Float32Array(attentionScratchSize(700)).fill(NaN);
      attentionForward(kk, { gemm: gemmFor(kk, 'fp32'), bf16: false }, out, lse, q, k, v, seqs, shape, scratch);
      assertClose(out, expected.out, `${name} out`);
      assertClose(lse, expected.lse, `${name} lse`);
      const dq = new Float32Array(T * qDim).fill(NaN),
        dk = new Float32Array(T * kvDim).fill(NaN),
        dv = new Float32Array(T * kvDim).fill(NaN);
      attentionBackward(
        kk,
        { gemm: gemmFor(kk, 'fp32'), bf16: false },
        dq,
        dk,
        dv,
        dOut,
        out,
        lse,
        q,
        k,
        v,
        seqs,
        shape,
        scratch.fill(NaN),
      );
      assertClose(dq, expected.dq, `${name} dq`);
      assertClose(dk, expected.dk, `${name} dk`);
      assertClose(dv, expected.dv, `${name} dv`);
    });
  }
});

// The fused bf16 kernels (native/src/train_attention.c) against the blockwise bf16 code they
// replace. Both round the same float32 values to bf16 (Q, K, V, dO, then P and dS); they differ
// only in the order of fp32 sums, so a value can land on the other side of a bf16 rounding
// boundary and one operand moves by one bf16 ulp (2^-8 relative). Each output is a sum of terms
// bounded by its largest value, so we allow 2^-8 of the largest |value| per output.
describe('training attention: fused bf16 kernels', () => {
  const q = randomArrayFrom(random, T * qDim, 2),
    k = randomArrayFrom(random, T * kvDim, 2);
  const v = randomArrayFrom(random, T * kvDim),
    dOut = randomArrayFrom(random, T * qDim);
  const pairs = new Int32Array(seqs.flatMap((s) => [s.start, s.length]));

  function run(kk: Kernels, nHeads = H, nKvHeads = KV, inputs = { q, k, v, dOut }) {
    const compute = { gemm: gemmFor(kk, 'bf16'), bf16: true },
      shape = { nHeads, nKvHeads, headDim: hd };
    const out = new Float32Array(T * nHeads * hd).fill(NaN),
      lse = new Float32Array(T * nHeads).fill(NaN);
    const scratch = new Float32Array(attentionScratchSize(700)).fill(NaN);
    attentionForward(kk, compute, out, lse, inputs.q, inputs.k, inputs.v, seqs, shape, scratch);
    const dq = new Float32Array(T * nHeads * hd).fill(NaN),
      dk = new Float32Array(T * nKvHeads * hd).fill(NaN),
      dv = new Float32Array(T * nKvHeads * hd).fill(NaN);
    const { k: kIn, v: vIn } = inputs;
    attentionBackward(kk, compute, dq, dk, dv, inputs.dOut, out, lse, inputs.q, kIn, vIn, seqs, shape, scratch);
    return { out, lse, dq, dk, dv };
  }

  function assertWithinUlp(actual: Float32Array, expected: Float32Array, what: string): void {
    const max = expected.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    for (let i = 0; i < expected.length; i++) {
      const error = Math.abs(actual[i]! - expected[i]!);
      assert.ok(error <= 2 ** -8 * max, `${what}: element ${i} is ${actual[i]}, blockwise ${expected[i]} (max ${max})`);
    }
  }

  const blockwiseOf = (kk: Kernels): Kernels => ({
    ...kk,
    attentionForwardBf16: undefined,
    attentionBackwardBf16: undefined,
  });

  test('run on oneDNN builds, and match the blockwise bf16 code', { skip: skipNative }, () => {
    const kk = native();
    const fused = kk.attentionForwardBf16?.(
      new Float32Array(T * qDim),
      new Float32Array(T * H),
      q,
      k,
      v,
      pairs,
      H,
      KV,
      hd,
    );
    // A oneDNN build must take the fused path; elsewhere it declines and the blockwise code runs.
    assert.equal(fused, kk.info.gemm === 'onednn', `fused forward ran: ${fused}, GEMM backend ${kk.info.gemm}`);
    const a = run(kk),
      b = run(blockwiseOf(kk));
    for (const name of ['out', 'lse', 'dq', 'dk', 'dv'] as const) assertWithinUlp(a[name], b[name], name);
  });

  // The kernels stack up to 4 query heads of a KV head into one block of rows, the largest divisor of
  // the group (above: a group of 2). Groups of 4 and 3 stack all, 8 takes two passes of 4, 1 none.
  for (const [nHeads, nKvHeads] of [
    [8, 2],
    [6, 2],
    [16, 2],
    [3, 3],
  ] as const) {
    test(`${nHeads} query heads over ${nKvHeads} KV heads match the blockwise bf16 code`, { skip: skipNative }, () => {
      const kk = native();
      const inputs = {
        q: randomArrayFrom(random, T * nHeads * hd, 2),
        k: randomArrayFrom(random, T * nKvHeads * hd, 2),
        v: randomArrayFrom(random, T * nKvHeads * hd),
        dOut: randomArrayFrom(random, T * nHeads * hd),
      };
      const a = run(kk, nHeads, nKvHeads, inputs),
        b = run(blockwiseOf(kk), nHeads, nKvHeads, inputs);
      for (const name of ['out', 'lse', 'dq', 'dk', 'dv'] as const) assertWithinUlp(a[name], b[name], name);
    });
  }

  // A training step keeps the output as bf16 bits (train/model.ts): the forward must write the float
  // output's rounding, and the backward must read the bits as their float values.
  const keptAsBits = (name: string, kernels: () => Kernels, skip: string | boolean) =>
    test(`${name}: an output kept as bf16 bits is the float output rounded, and the backward reads it widened`, {
      skip,
    }, () => {
      const kk = kernels();
      const compute = { gemm: gemmFor(kk, 'bf16'), bf16: true },
        shape = { nHeads: H, nKvHeads: KV, headDim: hd };
      const scratch = new Float32Array(attentionScratchSize(700));
      const floats = run(kk);
      const bits = new Uint16Array(T * qDim).fill(0xffff),
        lse = new Float32Array(T * H);
      attentionForward(kk, compute, bits, lse, q, k, v, seqs, shape, scratch);
      const rounded = new Uint16Array(T * qDim);
      toBf16(rounded, floats.out, T * qDim);
      assert.deepEqual(bits, rounded, 'the output bits');
      assert.deepEqual(lse, floats.lse, 'lse');
      const backward = (out: Float32Array | Uint16Array) => {
        const dq = new Float32Array(T * qDim),
          dk = new Float32Array(T * kvDim),
          dv = new Float32Array(T * kvDim);
        attentionBackward(kk, compute, dq, dk, dv, dOut, out, lse, q, k, v, seqs, shape, scratch);
        return { dq, dk, dv };
      };
      const widened = Float32Array.from(bits, (b) => bf16Value(b));
      assert.deepEqual(backward(bits), backward(widened), 'dq, dk, dv');
    });
  keptAsBits('fused', native, skipNative);
  keptAsBits('blockwise', () => blockwiseOf(native()), skipNative);
  keptAsBits('portable', () => portableKernels, false);

  test('a GEMM on all threads after the fused kernels gives the same bits as before them', { skip: skipNative }, () => {
    // The fused kernels run one-thread matmuls inside a parallel region; the primitives cached
    // for the calling thread's own team must stay apart from those.
    const kk = native();
    const n = 256,
      A = randomArrayFrom(random, n * n),
      B = randomArrayFrom(random, n * n);
    const product = () => {
      const C = new Float32Array(n * n);
      kk.gemmBf16(false, false, n, n, n, 1, A, n, B, n, 0, C, n);
      return C;
    };
    const before = product();
    run(kk);
    assert.deepEqual(product(), before);
  });

  test('refuse sequences out of order and arrays too short', { skip: skipNative }, () => {
    const kk = native();
    if (!kk.attentionForwardBf16) return assert.fail('the native kernels have no attentionForwardBf16');
    const out = new Float32Array(T * qDim),
      lse = new Float32Array(T * H);
    const call = (p: Int32Array, l = lse) => kk.attentionForwardBf16!(out, l, q, k, v, p, H, KV, hd);
    assert.throws(() => call(new Int32Array([0, 300, 200, 5])), /sequence 1 .* must start at or after 300/);
    assert.throws(() => call(new Int32Array([0, 300, 300])), /pairs/);
    assert.throws(() => call(pairs, new Float32Array(T * H - 1)), /lse/);
    assert.throws(() => kk.attentionForwardBf16!(out, lse, q, k, v, pairs, H, 3, hd), /multiple of nKvHeads/);
  });
});
