// Decode's matrix-vector products (gemmInt8, sgemv, gemmBf16 with one row) and its attention run on the addon's own
// thread pool (native/src/spin_pool.c), not OpenMP's: the same results whatever the thread count
// and however calls of different sizes follow each other, a pool of threads - 1 helpers per
// calling thread, and helpers stopped with their thread's JS environment (a worker that ends
// leaves no thread behind).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { toBf16 } from '../src/engine/local/kernels/bf16.js';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20261206);
const randomArray = (n: number) => randomArrayFrom(random, n);

/** One call of each kind on shapes large enough for the pool (N * K >= 2^16), the outputs. */
interface Products {
  int8: Float32Array;
  gemv: Float32Array;
  bf16: Float32Array;
}

function decodeInputs(N: number, K: number) {
  const w = randomArray(N * K);
  const w16 = new Uint16Array(N * K);
  toBf16(w16, w, N * K);
  return { N, K, w, w16, x: randomArray(2 * K) };
}
type DecodeInputs = ReturnType<typeof decodeInputs>;

function quantized(k: Kernels, d: DecodeInputs) {
  const q = new Int8Array(d.N * d.K),
    scales = new Float32Array((d.N * d.K) / 32);
  k.quantizeInt8(q, scales, d.w, d.N, d.K);
  return { q, scales };
}

function products(k: Kernels, d: DecodeInputs, i8: { q: Int8Array; scales: Float32Array }): Products {
  const int8 = new Float32Array(2 * d.N),
    gemv = new Float32Array(d.N),
    bf16 = new Float32Array(d.N);
  k.gemmInt8(2, d.N, d.K, d.x, i8.q, i8.scales, int8);
  k.sgemv(false, d.N, d.K, 1, d.w, d.K, d.x.subarray(0, d.K), 0, gemv);
  k.gemmBf16(false, true, 1, d.N, d.K, 1, d.x.subarray(0, d.K), d.K, d.w16, d.K, 0, bf16, d.N);
  return { int8, gemv, bf16 };
}

const threadCount = () => readdirSync('/proc/self/task').length;
const onLinux = process.platform === 'linux';

describe('decode products on the addon thread pool', { skip: skipNative }, () => {
  test('the same results on 1 and 2 threads, over many calls of changing sizes', () => {
    const k = native();
    // Output columns split unevenly over two threads, and sizes that alternate between calls.
    const shapes = [decodeInputs(1027, 256), decodeInputs(96, 2048), decodeInputs(4099, 32)];
    const i8 = shapes.map((d) => quantized(k, d));
    k.setThreads(1);
    try {
      const expected = shapes.map((d, i) => products(k, d, i8[i]!));
      k.setThreads(2);
      for (let round = 0; round < 200; round++) {
        const i = round % shapes.length;
        const got = products(k, shapes[i]!, i8[i]!);
        for (const kind of ['int8', 'gemv', 'bf16'] as const)
          assert.deepEqual(got[kind], expected[i]![kind], `${kind} on 2 threads, round ${round}, shape ${i}`);
      }
    } finally {
      k.setThreads(2);
    }
  });

  test('decode attention splits by kv head: the same results on 1 and 2 threads, and the portable ones', () => {
    const k = native();
    // 5 kv heads (an uneven split), 2 query heads each, 3 query rows against 300 cached keys.
    const [H, KV, hd, start, Tq] = [10, 5, 64, 300, 3];
    const q = randomArray(Tq * H * hd),
      keys = randomArray((start + Tq) * KV * hd),
      values = randomArray((start + Tq) * KV * hd);
    const run = (kernels: Kernels) => {
      const out = new Float32Array(Tq * H * hd);
      kernels.attention(out, q, keys, values, Tq, start, H, KV, hd, KV * hd, 1 / 8);
      return out;
    };
    k.setThreads(1);
    try {
      const one = run(k);
      k.setThreads(2);
      for (let round = 0; round < 20; round++) assert.deepEqual(run(k), one, `round ${round}`);
      const reference = run(portableKernels);
      for (let i = 0; i < one.length; i++) assert.ok(Math.abs(one[i]! - reference[i]!) < 1e-5, `out[${i}]`);
    } finally {
      k.setThreads(2);
    }
  });

  test('a calling thread gets threads - 1 helpers, stopped when its worker ends', { skip: !onLinux }, async () => {
    const moduleUrl = new URL('../src/engine/local/kernels/native.js', import.meta.url).href;
    const d = decodeInputs(1024, 1024);
    // Quantized here: quantizeInt8 runs on OpenMP, whose threads a worker would also start (and
    // libgomp lets them exit on their own time), and only the pool's threads are counted there.
    const i8 = quantized(native(), d);
    // Reports its process's thread count before and after its first product, and after more.
    const workerSource = `
      const { parentPort, workerData } = require('node:worker_threads');
      const { readdirSync } = require('node:fs');
      const count = () => readdirSync('/proc/self/task').length;
      import(workerData.moduleUrl).then(({ loadNativeKernels }) => {
        const k = loadNativeKernels();
        const { N, K, x, q, scales, threads } = workerData;
        k.setThreads(threads);
        const y = new Float32Array(N);
        const before = count();
        k.gemmInt8(1, N, K, x, q, scales, y);
        const after = count();
        for (let i = 0; i < 50; i++) k.gemmInt8(1, N, K, x, q, scales, y);
        parentPort.postMessage({ before, after, later: count(), threaded: k.info.gemm === 'onednn', y });
      });`;
    const runWorker = (threads: number) =>
      new Promise<{ before: number; after: number; later: number; threaded: boolean; y: Float32Array }>(
        (resolve, reject) => {
          const worker = new Worker(workerSource, {
            eval: true,
            workerData: { moduleUrl, N: d.N, K: d.K, x: d.x, ...i8, threads },
          });
          let result: { before: number; after: number; later: number; threaded: boolean; y: Float32Array };
          worker.once('message', (r) => {
            result = r;
          });
          worker.once('error', reject);
          worker.once('exit', () => (result ? resolve(result) : reject(new Error('the worker sent no result'))));
        },
      );
    // What the process creates once, before counting: a worker's first start, and OpenBLAS's
    // threads, which setThreads grows process-wide (blas_ops.c) and never shrinks.
    await runWorker(3);
    const baseline = threadCount();
    for (const threads of [2, 3, 2]) {
      const r = await runWorker(threads);
      // The pool threads only in an OpenMP build, which the oneDNN build is; a build without it
      // decodes on one thread (and a oneDNN build forced onto BLAS still has its helpers).
      const helpers = r.after - r.before;
      if (r.threaded) assert.equal(helpers, threads - 1, `helpers for ${threads} threads`);
      else assert.ok(helpers === 0 || helpers === threads - 1, `${helpers} helpers for ${threads} threads`);
      assert.equal(r.later, r.after, 'later calls reuse the helpers');
      assert.ok(
        r.y.some((v) => v !== 0),
        'the product was computed',
      );
      assert.equal(threadCount(), baseline, `no thread left behind by a worker that used ${threads} threads`);
    }
  });
});
