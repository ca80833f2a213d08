// The compute kernels: the native addon against the portable TypeScript kernels, and both
// against naive float64 references written here, on awkward sizes. Without the addon the
// native tests fail with instructions, unless OPENCLAW_RL_KERNELS=portable says that only the
// portable kernels are meant to be tested.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { loadNativeKernels } from '../src/engine/local/kernels/native.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

// ---- inputs -------------------------------------------------------------------------------

const random = randomSource(20261129);
const randomArray = (n: number, scale = 1): Float32Array => randomArrayFrom(random, n, scale);

/** Row-major storage for rows x cols with row stride cols + pad (padding filled too). */
function randomMatrix(rows: number, cols: number, pad: number): { data: Float32Array; ld: number } {
  const ld = Math.max(1, cols + pad);
  return { data: randomArray(rows * ld), ld };
}

// ---- comparison ---------------------------------------------------------------------------

const TOLERANCE = 1e-5;

/** max |actual - expected| <= TOLERANCE * max |expected|: the usual test for accumulated sums. */
function assertCloseNorm(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  let scale = 0;
  for (let i = 0; i < expected.length; i++) scale = Math.max(scale, Math.abs(expected[i]!));
  for (let i = 0; i < expected.length; i++) {
    const error = Math.abs(actual[i]! - expected[i]!);
    assert.ok(
      error <= TOLERANCE * scale,
      `${what}: element ${i} is ${actual[i]}, expected ${expected[i]} (error ${error} > ${TOLERANCE} * max |expected| ${scale})`,
    );
  }
}

/** |actual - expected| <= TOLERANCE * |expected| + 1e-7 per element: for elementwise kernels. */
function assertCloseElementwise(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < expected.length; i++) {
    const error = Math.abs(actual[i]! - expected[i]!);
    assert.ok(
      error <= TOLERANCE * Math.abs(expected[i]!) + 1e-7,
      `${what}: element ${i} is ${actual[i]}, expected ${expected[i]} (error ${error})`,
    );
  }
}

// ---- float64 references (deliberately naive, independent of portable.ts) --------------------

interface GemmCase {
  M: number;
  N: number;
  K: number;
  transA: boolean;
  transB: boolean;
  pad: number;
  alpha: number;
  beta: number;
}

function referenceGemm(
  c: GemmCase,
  A: Float32Array,
  lda: number,
  B: Float32Array,
  ldb: number,
  C0: Float32Array,
  ldc: number,
): Float64Array {
  const C = Float64Array.from(C0);
  for (let i = 0; i < c.M; i++) {
    for (let j = 0; j < c.N; j++) {
      let sum = 0;
      for (let p = 0; p < c.K; p++) {
        const a = c.transA ? A[p * lda + i]! : A[i * lda + p]!;
        const b = c.transB ? B[j * ldb + p]! : B[p * ldb + j]!;
        sum += a * b;
      }
      C[i * ldc + j] = c.alpha * sum + (c.beta === 0 ? 0 : c.beta * C0[i * ldc + j]!);
    }
  }
  return C;
}

function referenceGemv(
  trans: boolean,
  M: number,
  N: number,
  alpha: number,
  A: Float32Array,
  lda: number,
  x: Float32Array,
  beta: number,
  y0: Float32Array,
): Float64Array {
  const y = Float64Array.from(y0);
  const outLength = trans ? N : M;
  const inLength = trans ? M : N;
  for (let o = 0; o < outLength; o++) {
    let sum = 0;
    for (let i = 0; i < inLength; i++) sum += (trans ? A[i * lda + o]! : A[o * lda + i]!) * x[i]!;
    y[o] = alpha * sum + (beta === 0 ? 0 : beta * y0[o]!);
  }
  return y;
}

interface AttentionCase {
  Tq: number;
  start: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  kvPad: number;
  scoreScale: number;
}

function referenceAttention(
  c: AttentionCase,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  kvStride: number,
  scale: number,
): Float64Array {
  const width = c.nHeads * c.headDim;
  const out = new Float64Array(c.Tq * width);
  for (let h = 0; h < c.nHeads; h++) {
    const kvHead = Math.floor((h * c.nKvHeads) / c.nHeads);
    for (let t = 0; t < c.Tq; t++) {
      const visible = c.start + t + 1;
      const scores: number[] = [];
      for (let j = 0; j < visible; j++) {
        let dot = 0;
        for (let d = 0; d < c.headDim; d++)
          dot += q[t * width + h * c.headDim + d]! * k[j * kvStride + kvHead * c.headDim + d]!;
        scores.push(dot * scale);
      }
      const max = Math.max(...scores);
      const weights = scores.map((s) => Math.exp(s - max));
      const total = weights.reduce((a, b) => a + b, 0);
      for (let d = 0; d < c.headDim; d++) {
        let sum = 0;
        for (let j = 0; j < visible; j++) sum += weights[j]! * v[j * kvStride + kvHead * c.headDim + d]!;
        out[t * width + h * c.headDim + d] = sum / total;
      }
    }
  }
  return out;
}

// ---- cases --------------------------------------------------------------------------------

const gemmShapes: Array<[number, number, number]> = [
  [1, 1, 1],
  [1, 7, 13],
  [5, 1, 9],
  [3, 5, 7],
  [17, 31, 9],
  [33, 65, 129],
  [64, 64, 64],
  [7, 300, 1],
];

const gemmCases: GemmCase[] = gemmShapes.flatMap(([M, N, K], shape) =>
  [false, true].flatMap((transA) =>
    [false, true].map((transB) => ({
      M,
      N,
      K,
      transA,
      transB,
      pad: shape % 3 === 0 ? 0 : shape % 3 === 1 ? 3 : 8,
      alpha: shape % 2 === 0 ? 1 : 0.75,
      beta: shape % 4 === 0 ? 0 : shape % 4 === 1 ? 1 : -0.5,
    })),
  ),
);

function gemmInputs(c: GemmCase) {
  const a = c.transA ? randomMatrix(c.K, c.M, c.pad) : randomMatrix(c.M, c.K, c.pad);
  const b = c.transB ? randomMatrix(c.N, c.K, c.pad + 1) : randomMatrix(c.K, c.N, c.pad + 1);
  const C0 = randomMatrix(c.M, c.N, c.pad + 2);
  // beta == 0 must overwrite C, NaN included; NaN in the padding also shows it is never written.
  if (c.beta === 0) C0.data.fill(NaN);
  const expected = referenceGemm(c, a.data, a.ld, b.data, b.ld, C0.data, C0.ld);
  return { a, b, C0, expected };
}

function runGemm(kernels: Kernels, c: GemmCase, inputs: ReturnType<typeof gemmInputs>): Float32Array {
  const { a, b, C0 } = inputs;
  const C = Float32Array.from(C0.data);
  kernels.sgemm(c.transA, c.transB, c.M, c.N, c.K, c.alpha, a.data, a.ld, b.data, b.ld, c.beta, C, C0.ld);
  return C;
}

/** Compares C with a reference entry by entry; NaN padding must have stayed NaN. */
function assertGemmClose(C: Float32Array, expected: ArrayLike<number>, what: string): void {
  const written = Array.from(C, (value, i) => (Number.isNaN(expected[i]) ? 0 : value));
  const reference = Array.from(expected, (value) => (Number.isNaN(value) ? 0 : value));
  for (let i = 0; i < C.length; i++) {
    if (Number.isNaN(expected[i])) assert.ok(Number.isNaN(C[i]), `${what}: wrote padding at ${i}`);
  }
  assertCloseNorm(written, reference, what);
}

function gemmName(c: GemmCase): string {
  return `${c.M}x${c.N}x${c.K} ${c.transA ? 'T' : 'N'}${c.transB ? 'T' : 'N'} pad ${c.pad} alpha ${c.alpha} beta ${c.beta}`;
}

const gemvCases: Array<{ trans: boolean; M: number; N: number; pad: number; alpha: number; beta: number }> = (
  [
    [1, 1],
    [1, 9],
    [13, 1],
    [37, 129],
    [64, 300],
    [250, 33],
  ] as const
).flatMap(([M, N], i) =>
  [false, true].map((trans) => ({
    trans,
    M,
    N,
    pad: i % 2 === 0 ? 0 : 5,
    alpha: i % 2 === 0 ? 1 : 1.25,
    beta: i % 3 === 0 ? 0 : 0.5,
  })),
);

const attentionCases: AttentionCase[] = [
  { Tq: 1, start: 0, nHeads: 1, nKvHeads: 1, headDim: 1, kvPad: 0, scoreScale: 1 },
  { Tq: 1, start: 5, nHeads: 4, nKvHeads: 4, headDim: 8, kvPad: 0, scoreScale: 1 }, // decode, ratio 1
  { Tq: 7, start: 0, nHeads: 4, nKvHeads: 2, headDim: 12, kvPad: 3, scoreScale: 1 }, // prefill, ratio 2
  { Tq: 1, start: 37, nHeads: 8, nKvHeads: 2, headDim: 64, kvPad: 0, scoreScale: 1 }, // decode, ratio 4
  { Tq: 5, start: 11, nHeads: 8, nKvHeads: 2, headDim: 33, kvPad: 5, scoreScale: 1 }, // chunk after a cache
  { Tq: 19, start: 0, nHeads: 2, nKvHeads: 1, headDim: 128, kvPad: 0, scoreScale: 1 },
  { Tq: 3, start: 2, nHeads: 2, nKvHeads: 2, headDim: 16, kvPad: 1, scoreScale: 40 }, // large scores: needs max subtraction
];

function attentionName(c: AttentionCase): string {
  return `Tq ${c.Tq} start ${c.start} heads ${c.nHeads}/${c.nKvHeads} headDim ${c.headDim} kvPad ${c.kvPad} x${c.scoreScale}`;
}

function attentionInputs(c: AttentionCase) {
  const kvStride = c.nKvHeads * c.headDim + c.kvPad;
  const rows = c.start + c.Tq;
  return {
    q: randomArray(c.Tq * c.nHeads * c.headDim, c.scoreScale),
    k: randomArray(rows * kvStride),
    v: randomArray(rows * kvStride),
    kvStride,
    scale: 1 / Math.sqrt(c.headDim),
  };
}

function runAttention(kernels: Kernels, c: AttentionCase, inputs: ReturnType<typeof attentionInputs>): Float32Array {
  const out = new Float32Array(c.Tq * c.nHeads * c.headDim);
  kernels.attention(
    out,
    inputs.q,
    inputs.k,
    inputs.v,
    c.Tq,
    c.start,
    c.nHeads,
    c.nKvHeads,
    c.headDim,
    inputs.kvStride,
    inputs.scale,
  );
  return out;
}

function ropeInverseFrequencies(headDim: number): Float32Array {
  const half = headDim / 2;
  return Float32Array.from({ length: half }, (_, i) => 1 / 1e6 ** ((2 * i) / headDim));
}

// ---- portable kernels against the float64 references ----------------------------------------

describe('portable kernels', () => {
  test('sgemm matches a float64 reference (all transposes, padded strides, beta 0/1/other)', () => {
    for (const c of gemmCases) {
      const inputs = gemmInputs(c);
      assertGemmClose(runGemm(portableKernels, c, inputs), inputs.expected, `portable sgemm ${gemmName(c)}`);
    }
  });

  test('sgemv matches a float64 reference (both transposes)', () => {
    for (const c of gemvCases) {
      const a = randomMatrix(c.M, c.N, c.pad);
      const x = randomArray(c.trans ? c.M : c.N);
      const y0 = randomArray(c.trans ? c.N : c.M);
      if (c.beta === 0) y0.fill(NaN);
      const y = Float32Array.from(y0);
      portableKernels.sgemv(c.trans, c.M, c.N, c.alpha, a.data, a.ld, x, c.beta, y);
      assertCloseNorm(
        y,
        referenceGemv(c.trans, c.M, c.N, c.alpha, a.data, a.ld, x, c.beta, y0),
        `portable sgemv ${JSON.stringify(c)}`,
      );
    }
  });

  test('attention matches a float64 reference (causal, GQA 1/2/4, decode with a cache)', () => {
    for (const c of attentionCases) {
      const inputs = attentionInputs(c);
      const expected = referenceAttention(c, inputs.q, inputs.k, inputs.v, inputs.kvStride, inputs.scale);
      assertCloseNorm(runAttention(portableKernels, c, inputs), expected, `portable attention ${attentionName(c)}`);
    }
  });

  test('rmsnorm gives unit root-mean-square rows under a unit weight', () => {
    const [rows, dim] = [3, 37];
    const x = randomArray(rows * dim, 5);
    const out = new Float32Array(rows * dim);
    portableKernels.rmsnorm(out, x, new Float32Array(dim).fill(1), rows, dim, 0);
    for (let r = 0; r < rows; r++) {
      const row = out.subarray(r * dim, (r + 1) * dim);
      const rms = Math.sqrt(row.reduce((s, value) => s + value * value, 0) / dim);
      assert.ok(Math.abs(rms - 1) < 1e-6, `row ${r}: rms ${rms}`);
    }
  });

  test('siluMul matches silu(z) = z * sigmoid(z) at known points', () => {
    const gate = Float32Array.from([0, 1, -1, 10, -10]);
    const out = new Float32Array(5);
    portableKernels.siluMul(out, gate, new Float32Array(5).fill(2), 5);
    const expected = [0, 1, -1, 10, -10].map((z) => (2 * z) / (1 + Math.exp(-z)));
    assertCloseElementwise(out, expected, 'portable siluMul');
  });

  test('rope is the identity at position 0 and rotates pairs (i, i + half) at position 1', () => {
    const headDim = 4;
    const invFreq = Float32Array.from([1, 0.5]);
    const x = Float32Array.from([1, 2, 3, 4, 1, 2, 3, 4]);
    portableKernels.rope(x, 2, 1, headDim, Int32Array.from([0, 1]), invFreq);
    const rotated = (a: number, b: number, angle: number): [number, number] => [
      a * Math.cos(angle) - b * Math.sin(angle),
      b * Math.cos(angle) + a * Math.sin(angle),
    ];
    const [x0, x2] = rotated(1, 3, 1);
    const [x1, x3] = rotated(2, 4, 0.5);
    assertCloseElementwise(x, [1, 2, 3, 4, x0, x1, x2, x3], 'portable rope');
  });
});

// ---- native kernels against the portable ones and the references ----------------------------

/** The same computation on the native kernels, then on the portable ones: [native, portable]. */
function onBoth<T>(compute: (kernels: Kernels) => T): [T, T] {
  return [compute(native()), compute(portableKernels)];
}

describe('native kernels', { skip: skipNative }, () => {
  test('sgemm matches portable and a float64 reference (all transposes, padded strides, beta 0/1/other)', () => {
    for (const c of gemmCases) {
      const inputs = gemmInputs(c);
      const fromNative = runGemm(native(), c, inputs);
      assertGemmClose(fromNative, inputs.expected, `native sgemm vs float64 ${gemmName(c)}`);
      assertGemmClose(fromNative, runGemm(portableKernels, c, inputs), `native sgemm vs portable ${gemmName(c)}`);
    }
  });

  test('sgemm with K = 0 scales C by beta, and accepts a view of the right columns of a larger matrix', () => {
    const C = Float32Array.from([1, 2, 3, 4]);
    native().sgemm(false, false, 2, 2, 0, 1, new Float32Array(0), 1, new Float32Array(0), 2, 3, C, 2);
    assert.deepEqual([...C], [3, 6, 9, 12]);

    // The last 3 columns of a 4x5 matrix: the view ends exactly at the last element it uses.
    const whole = randomArray(4 * 5);
    const view = whole.subarray(2);
    const B = randomArray(3 * 6);
    const [fromNative, fromPortable] = onBoth((kernels) => {
      const out = new Float32Array(4 * 6);
      kernels.sgemm(false, false, 4, 6, 3, 1, view, 5, B, 6, 0, out, 6);
      return out;
    });
    assertCloseNorm(fromNative, fromPortable, 'sgemm on a column view');
  });

  test('sgemv matches portable and a float64 reference (both transposes)', () => {
    for (const c of gemvCases) {
      const a = randomMatrix(c.M, c.N, c.pad);
      const x = randomArray(c.trans ? c.M : c.N);
      const y0 = randomArray(c.trans ? c.N : c.M);
      if (c.beta === 0) y0.fill(NaN);
      const [yNative, yPortable] = onBoth((kernels) => {
        const y = Float32Array.from(y0);
        kernels.sgemv(c.trans, c.M, c.N, c.alpha, a.data, a.ld, x, c.beta, y);
        return y;
      });
      const name = JSON.stringify(c);
      assertCloseNorm(
        yNative,
        referenceGemv(c.trans, c.M, c.N, c.alpha, a.data, a.ld, x, c.beta, y0),
        `native sgemv vs float64 ${name}`,
      );
      assertCloseNorm(yNative, yPortable, `native sgemv vs portable ${name}`);
    }
  });

  test('attention matches portable and a float64 reference (causal, GQA 1/2/4, decode with start > 0)', () => {
    for (const c of attentionCases) {
      const inputs = attentionInputs(c);
      const fromNative = runAttention(native(), c, inputs);
      const expected = referenceAttention(c, inputs.q, inputs.k, inputs.v, inputs.kvStride, inputs.scale);
      assertCloseNorm(fromNative, expected, `native attention vs float64 ${attentionName(c)}`);
      assertCloseNorm(
        fromNative,
        runAttention(portableKernels, c, inputs),
        `native attention vs portable ${attentionName(c)}`,
      );
    }
  });

  test('rmsnorm matches portable, also in place', () => {
    for (const [rows, dim] of [
      [1, 1],
      [3, 7],
      [5, 1027],
      [2, 64],
    ] as const) {
      const x = randomArray(rows * dim, 3);
      const weight = randomArray(dim);
      const [fromNative, fromPortable] = onBoth((kernels) => {
        const out = new Float32Array(rows * dim);
        kernels.rmsnorm(out, x, weight, rows, dim, 1e-6);
        return out;
      });
      assertCloseElementwise(fromNative, fromPortable, `rmsnorm ${rows}x${dim}`);
      const inPlace = Float32Array.from(x);
      native().rmsnorm(inPlace, inPlace, weight, rows, dim, 1e-6);
      assertCloseElementwise(inPlace, fromPortable, `rmsnorm in place ${rows}x${dim}`);
    }
  });

  test('siluMul matches portable, also with out aliasing gate or up', () => {
    for (const n of [1, 7, 1000, 3077]) {
      const gate = randomArray(n, 12);
      const up = randomArray(n);
      const expected = new Float32Array(n);
      portableKernels.siluMul(expected, gate, up, n);
      const out = new Float32Array(n);
      native().siluMul(out, gate, up, n);
      assertCloseElementwise(out, expected, `siluMul n=${n}`);
      const gateCopy = Float32Array.from(gate);
      native().siluMul(gateCopy, gateCopy, up, n);
      assertCloseElementwise(gateCopy, expected, `siluMul out = gate, n=${n}`);
      const upCopy = Float32Array.from(up);
      native().siluMul(upCopy, gate, upCopy, n);
      assertCloseElementwise(upCopy, expected, `siluMul out = up, n=${n}`);
    }
  });

  test('rope matches portable (odd head counts, large positions)', () => {
    for (const [rows, heads, headDim] of [
      [1, 1, 2],
      [3, 3, 6],
      [4, 2, 64],
      [2, 5, 130],
    ] as const) {
      const x = randomArray(rows * heads * headDim);
      const positions = Int32Array.from({ length: rows }, (_, r) => (r === rows - 1 ? 40961 : r * 7));
      const invFreq = ropeInverseFrequencies(headDim);
      const [fromNative, fromPortable] = onBoth((kernels) => {
        const rotated = Float32Array.from(x);
        kernels.rope(rotated, rows, heads, headDim, positions, invFreq);
        return rotated;
      });
      assertCloseNorm(fromNative, fromPortable, `rope ${rows}x${heads}x${headDim}`);
    }
  });

  test('setThreads changes nothing in the results', () => {
    const c: GemmCase = { M: 96, N: 80, K: 72, transA: false, transB: true, pad: 0, alpha: 1, beta: 0 };
    const inputs = gemmInputs(c);
    native().setThreads(1);
    const one = runGemm(native(), c, inputs);
    native().setThreads(2);
    const two = runGemm(native(), c, inputs);
    assertGemmClose(one, two, 'sgemm with 1 and 2 BLAS threads');
  });

  test('the addon loads in worker threads and computes the same results there', async () => {
    const moduleUrl = new URL('../src/engine/local/kernels/native.js', import.meta.url).href;
    const c: AttentionCase = { Tq: 3, start: 4, nHeads: 4, nKvHeads: 2, headDim: 16, kvPad: 0, scoreScale: 1 };
    const inputs = attentionInputs(c);
    const A = randomArray(37 * 29);
    const B = randomArray(29 * 53);
    const expected = {
      gemm: (() => {
        const C = new Float32Array(37 * 53);
        native().sgemm(false, false, 37, 53, 29, 1, A, 29, B, 53, 0, C, 53);
        return C;
      })(),
      attention: runAttention(native(), c, inputs),
    };
    const workerSource = `
      const { parentPort, workerData } = require('node:worker_threads');
      import(workerData.moduleUrl).then(({ loadNativeKernels }) => {
        const k = loadNativeKernels();
        const { A, B, c, inputs } = workerData;
        const gemm = new Float32Array(37 * 53);
        k.sgemm(false, false, 37, 53, 29, 1, A, 29, B, 53, 0, gemm, 53);
        const attention = new Float32Array(c.Tq * c.nHeads * c.headDim);
        k.attention(attention, inputs.q, inputs.k, inputs.v, c.Tq, c.start, c.nHeads, c.nKvHeads, c.headDim, inputs.kvStride, inputs.scale);
        parentPort.postMessage({ name: k.name, gemm, attention });
      });`;
    const runWorker = () =>
      new Promise<{ name: string; gemm: Float32Array; attention: Float32Array }>((resolve, reject) => {
        const worker = new Worker(workerSource, { eval: true, workerData: { moduleUrl, A, B, c, inputs } });
        worker.once('message', (result) => {
          resolve(result);
          void worker.terminate();
        });
        worker.once('error', reject);
      });
    // Two at once: the addon must be loadable into several threads (contexts) concurrently.
    for (const result of await Promise.all([runWorker(), runWorker()])) {
      assert.equal(result.name, 'native');
      assertCloseNorm(result.gemm, expected.gemm, 'sgemm in a worker');
      assertCloseNorm(result.attention, expected.attention, 'attention in a worker');
    }
  });

  test('bad arguments throw an Error naming the op, and compute nothing', () => {
    const k = native();
    const f = (n: number) => new Float32Array(n);
    const untyped = k as unknown as Record<keyof Kernels, (...args: unknown[]) => void>;
    const expectError = (op: string, detail: RegExp, call: () => void) =>
      assert.throws(call, (err: unknown) => {
        assert.ok(err instanceof Error, 'an Error');
        assert.match(err.message, new RegExp(`openclaw_native\\.${op}: `));
        assert.match(err.message, detail);
        assert.match(err.message, /nothing was computed|rebuild the addon/);
        return true;
      });

    const C = f(4).fill(7);
    expectError('sgemm', /A has 3 elements but needs 4/, () =>
      k.sgemm(false, false, 2, 2, 2, 1, f(3), 2, f(4), 2, 0, C, 2),
    );
    assert.deepEqual([...C], [7, 7, 7, 7], 'C untouched after a refused call');
    expectError('sgemm', /B has 5 elements but needs 6 for N x K = 3 x 2/, () =>
      k.sgemm(false, true, 2, 3, 2, 1, f(4), 2, f(5), 2, 0, f(6), 3),
    );
    expectError('sgemm', /lda = 1 must be >= max\(1, 2\)/, () =>
      k.sgemm(false, false, 2, 2, 2, 1, f(4), 1, f(4), 2, 0, f(4), 2),
    );
    expectError('sgemm', /C has 3 elements/, () => k.sgemm(false, false, 2, 2, 2, 1, f(4), 2, f(4), 2, 0, f(3), 2));
    expectError('sgemm', /argument 6 \(A\) must be a Float32Array/, () =>
      k.sgemm(false, false, 2, 2, 2, 1, new Float64Array(4) as unknown as Float32Array, 2, f(4), 2, 0, f(4), 2),
    );
    expectError('sgemm', /argument 6 \(A\) must be a Float32Array/, () =>
      untyped.sgemm(false, false, 2, 2, 2, 1, [1, 2, 3, 4], 2, f(4), 2, 0, f(4), 2),
    );
    expectError('sgemm', /expected 13 arguments, got 2/, () => untyped.sgemm(false, false));
    expectError('sgemm', /argument 0 \(transA\) must be a boolean/, () =>
      untyped.sgemm(0, false, 2, 2, 2, 1, f(4), 2, f(4), 2, 0, f(4), 2),
    );
    expectError('sgemm', /M = 1.5 must be an integer/, () =>
      k.sgemm(false, false, 1.5, 2, 2, 1, f(4), 2, f(4), 2, 0, f(4), 2),
    );
    expectError('sgemm', /N = -1 must be an integer/, () =>
      k.sgemm(false, false, 2, -1, 2, 1, f(4), 2, f(4), 2, 0, f(4), 2),
    );
    expectError('sgemm', /K = nan must be an integer/, () =>
      k.sgemm(false, false, 2, 2, NaN, 1, f(4), 2, f(4), 2, 0, f(4), 2),
    );
    expectError('sgemv', /x has 2 elements but needs N = 3/, () => k.sgemv(false, 2, 3, 1, f(6), 3, f(2), 0, f(2)));
    expectError('sgemv', /y has 2 elements but needs N = 3/, () => k.sgemv(true, 2, 3, 1, f(6), 3, f(2), 0, f(2)));
    expectError('rmsnorm', /weight has 3 elements but needs dim = 4/, () => k.rmsnorm(f(8), f(8), f(3), 2, 4, 1e-6));
    expectError('rmsnorm', /out has 7 elements/, () => k.rmsnorm(f(7), f(8), f(4), 2, 4, 1e-6));
    expectError('siluMul', /up has 4 elements but needs n = 5/, () => k.siluMul(f(5), f(5), f(4), 5));
    expectError('rope', /headDim = 3 must be even/, () => k.rope(f(6), 2, 1, 3, new Int32Array(2), f(1)));
    expectError('rope', /positions has 1 elements but needs rows = 2/, () =>
      k.rope(f(8), 2, 1, 4, new Int32Array(1), f(2)),
    );
    expectError('rope', /argument 4 \(positions\) must be a Int32Array/, () =>
      k.rope(f(8), 2, 1, 4, new Float32Array(2) as unknown as Int32Array, f(2)),
    );
    expectError('attention', /nHeads = 3 must be a multiple of nKvHeads = 2/, () =>
      k.attention(f(6), f(6), f(8), f(8), 1, 0, 3, 2, 2, 4, 1),
    );
    // start + Tq = 4 cache rows of 4 floats are read, but only 3 rows are there.
    expectError('attention', /k has 12 elements but needs 16/, () =>
      k.attention(f(8), f(8), f(12), f(16), 1, 3, 4, 2, 2, 4, 1),
    );
    expectError('attention', /kvStride = 3 must be >= max\(1, 4\)/, () =>
      k.attention(f(8), f(8), f(16), f(16), 1, 3, 4, 2, 2, 3, 1),
    );
    expectError('attention', /q has 4 elements but needs Tq\*nHeads\*headDim = 8/, () =>
      k.attention(f(8), f(4), f(16), f(16), 1, 3, 4, 2, 2, 4, 1),
    );
    expectError('setThreads', /n = 0 must be an integer in \[1,/, () => k.setThreads(0));
  });
});

// ---- loading ------------------------------------------------------------------------------

describe('loading', () => {
  test('a missing addon gives an Error saying it is not built and how to build it', () => {
    assert.throws(() => loadNativeKernels('/nonexistent/openclaw_native.node'), /not built.*npm rebuild openclaw-rl/);
  });

  const indexPath = fileURLToPath(new URL('../src/engine/local/kernels/index.js', import.meta.url));
  const loadInChild = (setting: string | undefined) => {
    const env = { ...process.env };
    delete env.OPENCLAW_RL_KERNELS;
    if (setting !== undefined) env.OPENCLAW_RL_KERNELS = setting;
    const script = `import(${JSON.stringify(indexPath)}).then((m) => console.log(m.loadKernels().name))`;
    return spawnSync(process.execPath, ['-e', script], { env, encoding: 'utf8' });
  };

  test('OPENCLAW_RL_KERNELS=portable forces the portable kernels, silently', () => {
    const child = loadInChild('portable');
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), 'portable');
    assert.equal(child.stderr, '');
  });

  test('an unknown OPENCLAW_RL_KERNELS value is an error naming the variable', () => {
    const child = loadInChild('fast');
    assert.notEqual(child.status, 0);
    assert.match(child.stderr, /OPENCLAW_RL_KERNELS=fast is not supported/);
  });

  test('by default, and with OPENCLAW_RL_KERNELS=native, the native kernels are chosen', { skip: skipNative }, () => {
    native();
    for (const setting of [undefined, 'native']) {
      const child = loadInChild(setting);
      assert.equal(child.status, 0, child.stderr);
      assert.equal(child.stdout.trim(), 'native', `OPENCLAW_RL_KERNELS=${setting}`);
      assert.equal(child.stderr, '');
    }
  });
});
