// The bf16 kernels (toBf16, gemmBf16) of the native addon against the portable oracle
// (src/engine/local/kernels/bf16.ts), on every path the addon picks between: the small-M kernel,
// oneDNN's matmul primitive, and the BLAS fallback. The whole file runs a second time in a child
// process with OPENCLAW_RL_GEMM=blas when the addon uses oneDNN, so both backends of one build
// are checked.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { bf16Bits, bf16Value, toBf16 as portableToBf16 } from '../src/engine/local/kernels/bf16.js';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20260611);

type Kind = 'f32' | 'bf16';

interface Operand {
  data: Float32Array | Uint16Array;
  ld: number;
  /** The stored element at (r, c), rounded to bf16, as a number. */
  at(r: number, c: number): number;
}

/** rows x cols, row stride cols + pad; the padding holds NaN, so a kernel that reads it fails. */
function operand(rows: number, cols: number, pad: number, kind: Kind): Operand {
  const ld = Math.max(1, cols + pad);
  const values = randomArrayFrom(random, rows * ld);
  for (let r = 0; r < rows; r++) for (let c = cols; c < ld; c++) values[r * ld + c] = NaN;
  const bits = new Uint16Array(values.length);
  portableToBf16(bits, values, values.length);
  return { data: kind === 'bf16' ? bits : values, ld, at: (r, c) => bf16Value(bits[r * ld + c]!) };
}

interface Case {
  M: number;
  N: number;
  K: number;
  transA: boolean;
  transB: boolean;
  pad: number;
  alpha: number;
  beta: number;
  kindA: Kind;
  kindB: Kind;
}

function name(c: Case): string {
  return (
    `${c.M}x${c.N}x${c.K} ${c.transA ? 'T' : 'N'}${c.transB ? 'T' : 'N'} pad ${c.pad} alpha ${c.alpha} ` +
    `beta ${c.beta} A ${c.kindA} B ${c.kindB}`
  );
}

/**
 * Runs the case on `kernels` and on the portable oracle and compares element by element.
 * Both sides round the inputs to bf16 identically, and a product of two bf16 values is exact in
 * fp32, so they differ only in how the K products are summed: the oracle sums in float64 and
 * rounds once, the native kernels sum in fp32 in some order. Recursive fp32 summation of K terms
 * errs by at most (K - 1) u sum |a||b| (u = 2^-24, to first order, for any order), and scaling
 * by alpha, adding beta C and the oracle's own final rounding add one u each, hence the bound
 * (K + 3) u (|alpha| sum_p |a_ip||b_pj| + |beta c_ij|).
 */
function check(kernels: Kernels, c: Case): void {
  const A = operand(c.transA ? c.K : c.M, c.transA ? c.M : c.K, c.pad, c.kindA);
  const B = operand(c.transB ? c.N : c.K, c.transB ? c.K : c.N, c.pad, c.kindB);
  const ldc = c.N + c.pad;
  const C0 = randomArrayFrom(random, Math.max(1, c.M * ldc));
  if (c.beta === 0) C0.fill(NaN); // beta 0 overwrites, NaN included
  const [actual, expected] = [C0.slice(), C0.slice()];
  kernels.gemmBf16(c.transA, c.transB, c.M, c.N, c.K, c.alpha, A.data, A.ld, B.data, B.ld, c.beta, actual, ldc);
  portableKernels.gemmBf16(
    c.transA,
    c.transB,
    c.M,
    c.N,
    c.K,
    c.alpha,
    A.data,
    A.ld,
    B.data,
    B.ld,
    c.beta,
    expected,
    ldc,
  );
  const a = (i: number, p: number): number => (c.transA ? A.at(p, i) : A.at(i, p));
  const b = (p: number, j: number): number => (c.transB ? B.at(j, p) : B.at(p, j));
  for (let i = 0; i < c.M; i++) {
    for (let j = 0; j < c.N; j++) {
      let magnitude = 0;
      for (let p = 0; p < c.K; p++) magnitude += Math.abs(a(i, p) * b(p, j));
      const at = i * ldc + j;
      const bound =
        (c.K + 3) * 2 ** -24 * (Math.abs(c.alpha) * magnitude + (c.beta === 0 ? 0 : Math.abs(c.beta * C0[at]!)));
      const error = Math.abs(actual[at]! - expected[at]!);
      assert.ok(
        error <= bound,
        `${name(c)}: C[${i},${j}] is ${actual[at]}, expected ${expected[at]} (error ${error} > ${bound})`,
      );
    }
    // The padding of C is not written.
    for (let j = c.N; j < ldc; j++) {
      assert.ok(Object.is(actual[i * ldc + j], C0[i * ldc + j]), `${name(c)}: C padding written`);
    }
  }
}

const base: Case = {
  M: 1,
  N: 1,
  K: 1,
  transA: false,
  transB: true,
  pad: 0,
  alpha: 1,
  beta: 0,
  kindA: 'f32',
  kindB: 'bf16',
};

describe('toBf16, native against portable', { skip: skipNative }, () => {
  test('bit-exact on ties, subnormals, Inf, NaN and signed zeros', () => {
    const words = [
      0x00000000,
      0x80000000,
      0x3f800000,
      0x3f808000,
      0x3f818000,
      0x3f807fff,
      0x3f808001, // ties to even, both ways
      0x00000001,
      0x00008000,
      0x00018000,
      0x007fffff,
      0x807fffff,
      0x00400000, // subnormals
      0x7f7fffff,
      0xff7fffff,
      0x7f7f8000,
      0x7f800000,
      0xff800000, // the largest finite ones round to Inf
      0x7fc00000,
      0xffc00000,
      0x7f800001,
      0xff800001,
      0x7f80ffff,
      0x7fbfffff,
      0x7fffffff, // quiet and signalling NaN
    ];
    const x = new Float32Array(new Uint32Array(words).buffer);
    const [actual, expected] = [new Uint16Array(x.length), new Uint16Array(x.length)];
    native().toBf16(actual, x, x.length);
    portableToBf16(expected, x, x.length);
    assert.deepEqual(actual, expected);
    assert.equal(actual[3], 0x3f80, 'tie 0x3f808000 rounds down to the even 0x3f80');
    assert.equal(actual[4], 0x3f82, 'tie 0x3f818000 rounds up to the even 0x3f82');
    assert.equal(actual[15], 0x7f80, '0x7f7f8000 rounds up to Inf');
    for (const i of [18, 19, 20, 21, 22, 23, 24]) assert.ok(Number.isNaN(bf16Value(actual[i]!)), `word ${i} stays NaN`);
  });

  test('bit-exact in whole runs of 32 (the AVX512-BF16 instruction path), with and without subnormals', () => {
    // Ties, Inf, NaN and zeros fill two runs of 32 with no subnormal (the instruction rounds them);
    // the third run holds subnormals, which the instruction would flush to zero.
    const special = [0x3f808000, 0x3f818000, 0x7f7f8000, 0xff800000, 0x7f800001, 0xffc00000, 0x80000000, 0x3f807fff];
    const runs = Array.from({ length: 64 }, (_, i) => special[i % special.length]!);
    runs.push(...Array.from({ length: 32 }, (_, i) => (i % 3 === 0 ? 0x00018000 + i : 0x3f808000 + i)));
    const x = new Float32Array(new Uint32Array(runs).buffer);
    const [actual, expected] = [new Uint16Array(x.length), new Uint16Array(x.length)];
    native().toBf16(actual, x, x.length);
    portableToBf16(expected, x, x.length);
    assert.deepEqual(actual, expected);
    assert.equal(actual[64], 0x0002, 'the subnormal 0x00018000 rounds to 0x0002, not to 0');
  });

  test('bit-exact on random values of every magnitude, only the first n written', () => {
    const n = 100_003;
    const words = new Uint32Array(n + 5);
    for (let i = 0; i < words.length; i++) words[i] = Math.floor((random() + 1) * 2 ** 31) >>> 0;
    const x = new Float32Array(words.buffer);
    const actual = new Uint16Array(n + 5).fill(0x1234);
    native().toBf16(actual, x, n);
    for (let i = 0; i < n; i++)
      if (actual[i] !== bf16Bits(x[i]!)) assert.fail(`element ${i} (0x${words[i]!.toString(16)})`);
    assert.deepEqual([...actual.subarray(n)], [0x1234, 0x1234, 0x1234, 0x1234, 0x1234]);
  });

  test('short arrays are a RangeError naming the op', () => {
    assert.throws(
      () => native().toBf16(new Uint16Array(3), new Float32Array(4), 4),
      /openclaw_native\.toBf16: out has 3/,
    );
    assert.throws(
      () => native().toBf16(new Uint16Array(4), new Float32Array(3), 4),
      /openclaw_native\.toBf16: x has 3/,
    );
    assert.throws(
      () => native().toBf16(new Float32Array(4) as unknown as Uint16Array, new Float32Array(4), 4),
      TypeError,
    );
  });
});

describe('gemmBf16, native against the portable oracle', { skip: skipNative }, () => {
  test('decode shapes, M = 1..8 against a bf16 matrix stored [N,K] (M = 1: the hand-written kernel)', () => {
    for (let M = 1; M <= 8; M++) {
      check(native(), { ...base, M, N: 67, K: 300 });
      check(native(), { ...base, M, N: 300, K: 1027, pad: 3, kindA: M % 2 ? 'f32' : 'bf16', transA: M > 4 });
    }
    for (const M of [1, 3]) check(native(), { ...base, M, N: 40, K: 33, alpha: -0.5, beta: 1.5 });
    check(native(), { ...base, M: 2, N: 2048, K: 64 });
  });

  test('M = 1..8 on the other layouts and operand kinds', () => {
    for (let M = 1; M <= 8; M++) {
      for (const [transA, transB] of [
        [false, false],
        [true, false],
        [true, true],
      ] as const) {
        check(native(), { ...base, M, N: 45, K: 70, transA, transB, kindB: 'f32', pad: M % 3 });
        check(native(), { ...base, M, N: 33, K: 50, transA, transB, kindA: 'bf16', kindB: 'bf16', beta: 0.5 });
      }
    }
  });

  test('every transpose, stride, alpha, beta and operand kind on bigger shapes', () => {
    const kinds: Array<[Kind, Kind]> = [
      ['f32', 'f32'],
      ['f32', 'bf16'],
      ['bf16', 'f32'],
      ['bf16', 'bf16'],
    ];
    for (const transA of [false, true]) {
      for (const transB of [false, true]) {
        for (const [kindA, kindB] of kinds) {
          for (const [alpha, beta, pad] of [
            [1, 0, 0],
            [0.75, 1, 5],
            [-2, -0.5, 1],
          ] as const) {
            check(native(), { M: 37, N: 53, K: 129, transA, transB, pad, alpha, beta, kindA, kindB });
          }
        }
      }
    }
    check(native(), { ...base, M: 9, N: 64, K: 512 });
    check(native(), { ...base, M: 128, N: 96, K: 640, pad: 8, beta: 1 });
    check(native(), { ...base, M: 96, N: 200, K: 300, transB: false, kindA: 'bf16', kindB: 'f32' });
  });

  test('short K (the rank-update kernel, K <= 32): remainders of its 4-row, 64-column blocks, odd K', () => {
    const kinds: Array<[Kind, Kind]> = [
      ['f32', 'f32'],
      ['bf16', 'f32'],
      ['f32', 'bf16'],
    ];
    for (const transA of [false, true]) {
      for (const transB of [false, true]) {
        for (const [kindA, kindB] of kinds) {
          check(native(), { M: 13, N: 200, K: 16, transA, transB, pad: 3, alpha: 2, beta: 1, kindA, kindB });
          check(native(), { M: 8, N: 64, K: 7, transA, transB, pad: 0, alpha: -0.5, beta: 0, kindA, kindB });
        }
      }
    }
    for (const K of [1, 2, 31, 32, 33])
      check(native(), { ...base, M: 21, N: 130, K, transB: K % 2 === 0, kindB: 'f32', beta: 0.25 });
    // Above the parallel threshold: each thread's rows end with a partial block.
    check(native(), { ...base, M: 302, N: 260, K: 16, kindB: 'f32', beta: 1, pad: 2 });
    check(native(), { ...base, M: 302, N: 260, K: 16, transB: false, kindA: 'bf16', kindB: 'f32' });
  });

  test('thin B (the skinny kernel, N <= 16 past short K): remainders of its 16-row blocks, odd K', () => {
    const kinds: Array<[Kind, Kind]> = [
      ['bf16', 'f32'],
      ['f32', 'f32'],
      ['bf16', 'bf16'],
    ];
    for (const transB of [false, true]) {
      for (const [kindA, kindB] of kinds) {
        check(native(), { M: 37, N: 16, K: 129, transA: false, transB, pad: 3, alpha: 2, beta: 1, kindA, kindB });
        check(native(), { M: 21, N: 13, K: 33, transA: false, transB, pad: 0, alpha: -0.5, beta: 0, kindA, kindB });
      }
    }
    for (const N of [1, 7, 16]) check(native(), { ...base, M: 50, N, K: 1001, transB: N % 2 === 1, kindB: 'f32' });
    // Above the parallel threshold: each thread's rows end with a partial block.
    check(native(), { ...base, M: 302, N: 16, K: 1024, kindA: 'bf16', kindB: 'f32', beta: 0.5, pad: 2 });
  });

  test('the same shape again (a cached primitive) with new data', () => {
    for (let round = 0; round < 3; round++) check(native(), { ...base, M: 40, N: 48, K: 56, kindB: 'f32', beta: 1 });
  });

  test('K = 0 scales C by beta (beta 0 overwrites NaN); M or N = 0 writes nothing', () => {
    const C = Float32Array.of(1, NaN, 3, 4, 5, 6);
    native().gemmBf16(false, true, 2, 2, 0, 1, new Float32Array(0), 1, new Uint16Array(0), 1, 0.5, C, 3);
    assert.deepEqual([...C], [0.5, NaN, 3, 2, 2.5, 6]);
    native().gemmBf16(false, true, 2, 2, 0, 1, new Float32Array(0), 1, new Uint16Array(0), 1, 0, C, 3);
    assert.deepEqual([...C], [0, 0, 3, 0, 0, 6]);
    const untouched = Float32Array.of(NaN, 7);
    native().gemmBf16(false, false, 0, 2, 4, 1, new Float32Array(0), 4, new Float32Array(8), 2, 0, untouched, 2);
    native().gemmBf16(false, false, 1, 0, 4, 1, new Float32Array(4), 4, new Float32Array(0), 1, 0, untouched, 1);
    assert.deepEqual([...untouched], [NaN, 7]);
  });

  test('bad arguments are errors naming the op and the argument', () => {
    const k = native();
    const A = new Float32Array(12),
      B = new Uint16Array(12),
      C = new Float32Array(9);
    assert.throws(() => k.gemmBf16(false, true, 3, 3, 4, 1, A, 3, B, 4, 0, C, 3), /openclaw_native\.gemmBf16: lda = 3/);
    assert.throws(
      () => k.gemmBf16(false, true, 3, 3, 4, 1, A, 4, B, 4, 0, new Float32Array(8), 3),
      /openclaw_native\.gemmBf16: C has 8 elements/,
    );
    assert.throws(
      () => k.gemmBf16(false, true, 3, 3, 4, 1, A, 4, new Int16Array(12) as unknown as Uint16Array, 4, 0, C, 3),
      /openclaw_native\.gemmBf16: argument 8 \(B\) must be a Float32Array or a Uint16Array/,
    );
    assert.throws(() => k.gemmBf16(false, true, -1, 3, 4, 1, A, 4, B, 4, 0, C, 3), /openclaw_native\.gemmBf16: M = -1/);
  });
});

describe('gemmBf16 short K without bf16 dot products', { skip: skipNative }, () => {
  test('the short-K test passes in a child process with OPENCLAW_RL_BF16_DOT=fp32 (the fp32 FMA variant)', () => {
    if (process.env.OPENCLAW_RL_BF16_DOT === 'fp32') return;
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    const child = spawnSync(
      process.execPath,
      ['--test', '--test-reporter=tap', '--test-name-pattern=short K', fileURLToPath(import.meta.url)],
      { env: { ...env, OPENCLAW_RL_BF16_DOT: 'fp32' }, encoding: 'utf8' },
    );
    assert.equal(child.status, 0, `${child.stdout}\n${child.stderr}`);
    assert.match(child.stdout, /# pass [1-9]/);
    assert.match(child.stdout, /# fail 0/);
  });
});

describe('gemmBf16 on the forced BLAS backend', { skip: skipNative }, () => {
  test('this file passes in a child process with OPENCLAW_RL_GEMM=blas', () => {
    // Without oneDNN (or in that child) the tests above ran on the BLAS already.
    if (process.env.OPENCLAW_RL_GEMM === 'blas' || native().info.gemm !== 'onednn') {
      assert.match(native().info.gemm, /^(openblas|accelerate)$/);
      assert.equal(native().info.bf16Instructions, false);
      return;
    }
    // Without NODE_TEST_CONTEXT, which the runner sets for its own children and which would
    // make this child report in the runner's internal format.
    const { NODE_TEST_CONTEXT: _, ...env } = process.env;
    const child = spawnSync(process.execPath, ['--test', '--test-reporter=tap', fileURLToPath(import.meta.url)], {
      env: { ...env, OPENCLAW_RL_GEMM: 'blas' },
      encoding: 'utf8',
    });
    assert.equal(child.status, 0, `${child.stdout}\n${child.stderr}`);
    assert.match(child.stdout, /# fail 0/);
  });
});
