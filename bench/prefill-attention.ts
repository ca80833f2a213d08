// The attention of one segment, one-row kernel (Kernels.attention) against the blocked GEMM path
// (model/segment-attention.ts), native kernels, one BLAS thread: a cached turn (300 new tokens
// after 16k), uncached prefill chunks, and short segments to place BLOCKED_MIN_ROWS.
//
//   npm run build && node dist/bench/prefill-attention.js

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
