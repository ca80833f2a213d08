// The int8 kernels (quantizeInt8, gemmInt8) of the native addon against the portable oracle
// (src/engine/local/kernels/int8.ts), and the oracle itself against the definition.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { gemmInt8QuantizedActivations, INT8_BLOCK } from '../src/engine/local/kernels/int8.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20261202);
const U = 2 ** -24;

/**
 * Random weights [N,K] of magnitudes spread over 1e-6..10, with special blocks: all zero, one
 * value only, and values that are exact ties (k + 0.5) * scale, so that rounding is exercised.
 */
function weights(N: number, K: number): Float32Array {
  const w = new Float32Array(N * K);
  for (let b = 0; b < (N * K) / INT8_BLOCK; b++) {
    const at = b * INT8_BLOCK,
      kind = b % 5,
      magnitude = 10 ** (Math.floor(random() * 3.5 + 3.5) - 6);
    if (kind === 0) continue;
    if (kind === 1) {
      w[at + (b % INT8_BLOCK)] = -magnitude;
      continue;
    }
    if (kind === 2) {
      // The largest is 127 * 2^-7, so scale = 2^-7 exactly and k + 0.5 steps are exact ties.
      w[at] = 127 / 128;
      for (let i = 1; i < INT8_BLOCK; i++) w[at + i] = (Math.floor(random() * 126) + 0.5) / 128;
      continue;
    }
    for (let i = 0; i < INT8_BLOCK; i++) w[at + i] = random() * magnitude;
  }
  return w;
}

function quantize(k: typeof portableKernels, w: Float32Array, N: number, K: number) {
  const q = new Int8Array(N * K),
    scales = new Float32Array((N * K) / INT8_BLOCK);
  k.quantizeInt8(q, scales, w, N, K);
  return { q, scales };
}

describe('quantizeInt8', () => {
  test('the portable oracle meets the definition: max|w| -> 127, error <= scale / 2, ties to even', () => {
    const N = 40,
      K = 96,
      w = weights(N, K);
    const { q, scales } = quantize(portableKernels, w, N, K);
    for (let b = 0; b < scales.length; b++) {
      let max = 0;
      for (let i = 0; i < INT8_BLOCK; i++) max = Math.max(max, Math.abs(w[b * INT8_BLOCK + i]!));
      assert.equal(scales[b]!, Math.fround(max / 127), `scale of block ${b}`);
      for (let i = 0; i < INT8_BLOCK; i++) {
        const at = b * INT8_BLOCK + i;
        if (Math.abs(w[at]!) === max && max > 0) assert.equal(Math.abs(q[at]!), 127, `the largest of block ${b}`);
        assert.ok(Math.abs(w[at]! - q[at]! * scales[b]!) <= scales[b]! * (0.5 + 2 ** -20), `element ${at}`);
        if (b % 5 === 2 && i > 0) {
          assert.equal(Math.abs(q[at]!) % 2, 0, `the tie ${w[at]! * 128} rounds to even, got ${q[at]!}`);
        }
      }
    }
  });

  test('native is bit-exact with the oracle', { skip: skipNative }, () => {
    for (const [N, K] of [
      [1, 32],
      [7, 96],
      [300, 1024],
      [64, 3072],
    ] as const) {
      const w = weights(N, K);
      const expected = quantize(portableKernels, w, N, K),
        actual = quantize(native(), w, N, K);
      assert.deepEqual(actual.scales, expected.scales, `${N}x${K} scales`);
      assert.deepEqual(actual.q, expected.q, `${N}x${K} values`);
    }
  });

  test('K not a multiple of 32 is refused with a RangeError, as are short arrays', { skip: skipNative }, () => {
    for (const k of [portableKernels, native()]) {
      assert.throws(
        () => k.quantizeInt8(new Int8Array(66), new Float32Array(3), new Float32Array(66), 2, 33),
        (e: Error) => e instanceof RangeError && /K = 33 must be a multiple of 32/.test(e.message),
      );
    }
    assert.throws(
      () => native().quantizeInt8(new Int8Array(64), new Float32Array(1), new Float32Array(64), 2, 32),
      /openclaw_native\.quantizeInt8: scales has 1/,
    );
  });
});

/**
 * gemmInt8 native against the oracle. The oracle sums in float64 and rounds once; the native
 * kernel rounds each product x q, each pair sum, each block sum times its scale, each block's add
 * into an accumulator, and the final lane sums: at most K/32 + 8 <= K + 3 roundings per term, so
 * |error| <= (K + 3) u sum_p |x_p q_p scale_p| to first order, as in kernels-bf16.test.ts.
 */
function checkGemm(M: number, N: number, K: number): void {
  const x = randomArrayFrom(random, M * K, 3),
    w = weights(N, K);
  const { q, scales } = quantize(portableKernels, w, N, K);
  const actual = new Float32Array(M * N).fill(NaN),
    expected = new Float32Array(M * N);
  native().gemmInt8(M, N, K, x, q, scales, actual);
  portableKernels.gemmInt8(M, N, K, x, q, scales, expected);
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let magnitude = 0;
      for (let p = 0; p < K; p++) {
        magnitude += Math.abs(x[i * K + p]! * q[j * K + p]! * scales[Math.floor((j * K + p) / INT8_BLOCK)]!);
      }
      const [a, e] = [actual[i * N + j]!, expected[i * N + j]!];
      assert.ok(Math.abs(a - e) <= (K + 3) * U * magnitude, `${M}x${N}x${K}: y[${i},${j}]! is ${a}, expected ${e}`);
    }
  }
}

/**
 * The VNNI variant against gemmInt8QuantizedActivations. Both quantize x with the same rule (bit
 * for bit: quantizeInt8 is tested so) and the integer dot products are exact, so only the fp32
 * scaling and summing differ: per block one rounding of the two scales' product, one of the FMA
 * into a lane's accumulator, then at most blocks/4 further adds in that lane and 5 in the final
 * sums, within (blocks + 10) u sum_b |xScale_b scale_b| sum_p |qx_p q_p|. A single activation
 * quantized one step off moves y by xScale * |q_p| * scale, far beyond that at these K.
 */
function checkVnniGemm(M: number, N: number, K: number, x: Float32Array = randomArrayFrom(random, M * K, 3)): void {
  const w = weights(N, K),
    blocks = K / INT8_BLOCK;
  const { q, scales } = quantize(portableKernels, w, N, K);
  const { q: qx, scales: xScales } = quantize(portableKernels, x, M, K);
  const actual = new Float32Array(M * N).fill(NaN),
    expected = new Float32Array(M * N);
  native().gemmInt8(M, N, K, x, q, scales, actual);
  gemmInt8QuantizedActivations(M, N, K, x, q, scales, expected);
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let magnitude = 0;
      for (let b = 0; b < blocks; b++) {
        let dot = 0;
        for (let p = b * INT8_BLOCK; p < (b + 1) * INT8_BLOCK; p++) dot += Math.abs(qx[i * K + p]! * q[j * K + p]!);
        magnitude += Math.abs(xScales[i * blocks + b]! * scales[j * blocks + b]!) * dot;
      }
      const [a, e] = [actual[i * N + j]!, expected[i * N + j]!];
      assert.ok(
        Math.abs(a - e) <= (blocks + 10) * U * magnitude,
        `vnni ${M}x${N}x${K}: y[${i},${j}]! is ${a}, expected ${e}`,
      );
    }
  }
}

/** Why the VNNI tests skip: portable kernels only (native() is not loaded then), or a CPU without VNNI. */
const skipVnni =
  skipNative ||
  (native().info.int8Dot === 'vnni' ? false : `this CPU has no AVX512-VNNI (gemmInt8: ${native().info.int8Dot})`);

describe('gemmInt8', () => {
  test('the oracle equals x . dequantized(W)^T, summed independently', () => {
    const M = 3,
      N = 9,
      K = 64,
      x = randomArrayFrom(random, M * K),
      w = weights(N, K);
    const { q, scales } = quantize(portableKernels, w, N, K);
    const y = new Float32Array(M * N);
    portableKernels.gemmInt8(M, N, K, x, q, scales, y);
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let sum = 0,
          magnitude = 0;
        for (let p = K - 1; p >= 0; p--) {
          const term = x[i * K + p]! * (q[j * K + p]! * scales[(j * K + p) >> 5]!);
          sum += term;
          magnitude += Math.abs(term);
        }
        assert.ok(Math.abs(y[i * N + j]! - sum) <= 2 * U * magnitude, `y[${i},${j}]!`);
      }
    }
  });

  test('the quantized-activation oracle equals dequantized(x) . dequantized(W)^T', () => {
    const M = 3,
      N = 9,
      K = 96,
      x = randomArrayFrom(random, M * K),
      w = weights(N, K);
    const { q, scales } = quantize(portableKernels, w, N, K);
    const { q: qx, scales: xScales } = quantize(portableKernels, x, M, K);
    const y = new Float32Array(M * N);
    gemmInt8QuantizedActivations(M, N, K, x, q, scales, y);
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let sum = 0,
          magnitude = 0;
        for (let p = K - 1; p >= 0; p--) {
          const term = qx[i * K + p]! * xScales[(i * K + p) >> 5]! * (q[j * K + p]! * scales[(j * K + p) >> 5]!);
          sum += term;
          magnitude += Math.abs(term);
        }
        assert.ok(Math.abs(y[i * N + j]! - sum) <= 2 * U * magnitude, `y[${i},${j}]!`);
      }
    }
  });

  // The fp32-activation variants the CPU runs: capped by OPENCLAW_RL_INT8_DOT (read on every call).
  for (const cap of ['avx512', 'avx2', 'generic']) {
    test(`native (${cap} or narrower) against the oracle for M = 1..8 at decode and head shapes`, {
      skip: skipNative,
    }, () => {
      process.env.OPENCLAW_RL_INT8_DOT = cap;
      try {
        for (let M = 1; M <= 8; M++) {
          checkGemm(M, 67, 32);
          checkGemm(M, 300, 1024);
        }
        checkGemm(1, 1024, 3072);
        checkGemm(2, 4096, 64);
      } finally {
        delete process.env.OPENCLAW_RL_INT8_DOT;
      }
    });
  }

  test('native vnni against the quantized-activation oracle for M = 1..8, odd block counts included', {
    skip: skipVnni,
  }, () => {
    for (let M = 1; M <= 8; M++) {
      for (const K of [32, 64, 96, 1024]) checkVnniGemm(M, 67, K);
      checkVnniGemm(M, 300, 3072);
    }
    checkVnniGemm(1, 4096, 1024);
    // Activation blocks of zeros, of one value, and of exact ties, as the weights have.
    checkVnniGemm(2, 67, 1024, weights(2, 1024));
  });

  test('native vnni: a NaN or infinite activation makes its outputs NaN, as the fp32 product does', {
    skip: skipVnni,
  }, () => {
    const K = 64,
      N = 5;
    const { q, scales } = quantize(portableKernels, weights(N, K), N, K);
    const x = randomArrayFrom(random, 3 * K);
    x[3] = NaN;
    x[K + 40] = Infinity;
    const y = new Float32Array(3 * N);
    native().gemmInt8(3, N, K, x, q, scales, y);
    for (let j = 0; j < N; j++) {
      // Row 0's first block and row 1's second block hold them; a zero weight block still gives NaN.
      assert.ok(Number.isNaN(y[j]!) && Number.isNaN(y[N + j]!), `column ${j}: ${y[j]!}, ${y[N + j]!}`);
      assert.ok(Number.isFinite(y[2 * N + j]!), `row 2 column ${j}: ${y[2 * N + j]!}`);
    }
  });

  test('M = 0 writes nothing; K not a multiple of 32 and short arrays are refused', { skip: skipNative }, () => {
    const y = Float32Array.of(NaN, 7);
    native().gemmInt8(0, 2, 32, new Float32Array(0), new Int8Array(64), new Float32Array(2), y);
    assert.deepEqual([...y], [NaN, 7]);
    for (const k of [portableKernels, native()]) {
      assert.throws(
        () => k.gemmInt8(1, 1, 40, new Float32Array(40), new Int8Array(40), new Float32Array(2), y),
        (e: Error) => e instanceof RangeError && /K = 40 must be a multiple of 32/.test(e.message),
      );
    }
    assert.throws(
      () => native().gemmInt8(2, 2, 32, new Float32Array(32), new Int8Array(64), new Float32Array(2), y),
      /openclaw_native\.gemmInt8: x has 32/,
    );
    assert.throws(
      () =>
        native().gemmInt8(1, 2, 32, new Float32Array(32), new Int8Array(64), new Float32Array(2), new Float32Array(1)),
      /openclaw_native\.gemmInt8: y has 1/,
    );
  });
});
