// The attention of one segment, one-row kernel (Kernels.attention) against the blocked GEMM path
// (model/segment-attention.ts), native kernels, one BLAS thread: a cached turn (300 new tokens
// after 16k), uncached prefill chunks, and short segments to place BLOCKED_MIN_ROWS. Then, on bf16
// cache rows and BENCH_THREADS threads (2), the fused flash kernel (prefillAttentionBf16) against the
// GEMM path on the same rows, to place FLASH_MIN_ROWS.
//
//   npm run build && node dist/bench/prefill-attention.js

import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { loadNativeKernels } from '../src/engine/local/kernels/native.js';
import { type AttentionHeads, blockedAttention } from '../src/engine/local/model/segment-attention.js';
import { PRESETS } from '../src/engine/local/model/init.js';
import { secondsPerCall } from './timing.js';

function randomArray(n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.random() * 2 - 1;
  return out;
}

const kernels = loadNativeKernels();
kernels.setThreads(1);
let scratch = new Float32Array(0);
const grow = (n: number) => (scratch.length >= n ? scratch : (scratch = new Float32Array(n))).subarray(0, n);

/** Milliseconds per call of the one-row kernel and of the blocked path. */
function time(heads: AttentionHeads, Tq: number, start: number): { oneRow: number; blocked: number } {
  const { numHeads: nHeads, numKvHeads: nKvHeads, headDim } = heads;
  const kvDim = nKvHeads * headDim;
  const q = randomArray(Tq * nHeads * headDim);
  const [k, v] = [randomArray((start + Tq) * kvDim), randomArray((start + Tq) * kvDim)];
  const out = new Float32Array(Tq * nHeads * headDim);
  const minSeconds = 0.3;
  const scale = 1 / Math.sqrt(headDim);
  const oneRow = secondsPerCall(
    () => kernels.attention(out, q, k, v, Tq, start, nHeads, nKvHeads, headDim, kvDim, scale),
    minSeconds,
  );
  const blocked = secondsPerCall(() => blockedAttention(kernels, out, q, k, v, Tq, start, heads, grow), minSeconds);
  return { oneRow: oneRow * 1000, blocked: blocked * 1000 };
}

function report(name: string, heads: AttentionHeads, cases: ReadonlyArray<[number, number]>): void {
  console.log(`\n${name} (${heads.numHeads}/${heads.numKvHeads} heads x ${heads.headDim})`);
  console.log('    Tq   start   one-row (ms)   blocked (ms)   speed-up');
  for (const [Tq, start] of cases) {
    const { oneRow, blocked } = time(heads, Tq, start);
    const cells = [
      String(Tq).padStart(6),
      String(start).padStart(7),
      oneRow.toFixed(3).padStart(14),
      blocked.toFixed(3).padStart(14),
      `${(oneRow / blocked).toFixed(2)}x`.padStart(10),
    ];
    console.log(cells.join(' '));
  }
}

const small = PRESETS.small!,
  qwen = PRESETS['qwen3-0.6b']!;
report('small', small, [
  [300, 16_000],
  [256, 0],
  [256, 16_000],
  [1, 16_000],
  [2, 16_000],
  [4, 16_000],
  [8, 16_000],
  [1, 256],
  [2, 256],
  [4, 256],
  [8, 256],
  [1, 2000],
  [2, 2000],
  [4, 2000],
]);
report('qwen3-0.6b', qwen, [
  [300, 16_000],
  [256, 0],
  [4, 16_000],
  [8, 16_000],
  [16, 16_000],
]);

/** Milliseconds per call of the flash kernel and of the GEMM path, alternated, on the same bf16 rows. */
function timeBf16(heads: AttentionHeads, Tq: number, start: number): { flash: number; blocked: number } {
  const { numHeads: nHeads, numKvHeads: nKvHeads, headDim } = heads;
  const rows = (start + Tq) * nKvHeads * headDim;
  const [k, v] = [new Uint16Array(rows), new Uint16Array(rows)];
  kernels.toBf16(k, randomArray(rows), rows);
  kernels.toBf16(v, randomArray(rows), rows);
  const q = randomArray(Tq * nHeads * headDim);
  const out = new Float32Array(Tq * nHeads * headDim);
  const gemmPath: Kernels = { ...kernels, prefillAttentionBf16: undefined };
  const flash = () =>
    secondsPerCall(() => {
      if (!kernels.prefillAttentionBf16?.(out, q, k, v, Tq, start, nHeads, nKvHeads, headDim))
        throw new Error('this build has no fused prefill attention (it needs oneDNN: scripts/install-system-deps.sh)');
    }, 0.2);
  const blocked = () => secondsPerCall(() => blockedAttention(gemmPath, out, q, k, v, Tq, start, heads, grow), 0.2);
  const [f1, b1, b2, f2] = [flash(), blocked(), blocked(), flash()];
  return { flash: ((f1 + f2) / 2) * 1000, blocked: ((b1 + b2) / 2) * 1000 };
}

const threads = Number(process.env.BENCH_THREADS ?? 2);
kernels.setThreads(threads);
console.log(`\nqwen3-0.6b on bf16 rows, ${threads} threads: the flash kernel against the GEMM path`);
console.log('    Tq   start     flash (ms)   blocked (ms)   speed-up');
for (const [Tq, start] of [
  [8, 16_000],
  [16, 16_000],
  [32, 16_000],
  [128, 16_000],
  [256, 16_000],
  [8, 1000],
  [16, 1000],
  [2048, 0],
] as const) {
  const { flash, blocked } = timeBf16(qwen, Tq, start);
  const cells = [String(Tq).padStart(6), String(start).padStart(7), flash.toFixed(3).padStart(14)];
  cells.push(blocked.toFixed(3).padStart(14), `${(blocked / flash).toFixed(2)}x`.padStart(10));
  console.log(cells.join(' '));
}
