// Throughput of the native kernels against the portable TypeScript ones, measured in the same
// run so that the ratios hold even when the machine's speed drifts (shared vCPUs). Shapes are
// those of a Qwen3-0.6B-sized model. Run: node dist/bench/kernels.js
import { availableParallelism } from 'node:os';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { loadNativeKernels } from '../src/engine/local/kernels/native.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { secondsPerCall } from './timing.js';

interface BenchCase {
  name: string;
  flops: number;
  run(kernels: Kernels): void;
}

function randomArray(n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.random() * 2 - 1;
  return out;
}

/** C[M,N] = A[M,K] * B[K,N]; named M x K x N. */
function sgemmCase(M: number, K: number, N: number): BenchCase {
  const [A, B, C] = [randomArray(M * K), randomArray(K * N), new Float32Array(M * N)];
  return {
    name: `sgemm ${M}x${K}x${N}`,
    flops: 2 * M * N * K,
    run: (k) => k.sgemm(false, false, M, N, K, 1, A, K, B, N, 0, C, N),
  };
}

/** y[out] = W[out,in] * x[in], a linear layer for one token; named 1 x in x out. */
function sgemvCase(inputs: number, outputs: number): BenchCase {
  const [W, x, y] = [randomArray(outputs * inputs), randomArray(inputs), new Float32Array(outputs)];
  return {
    name: `sgemv 1x${inputs}x${outputs}`,
    flops: 2 * inputs * outputs,
    run: (k) => k.sgemv(false, outputs, inputs, 1, W, inputs, x, 0, y),
  };
}

/** Qwen3-0.6B attention: 16 query heads, 8 kv heads of 128. */
function attentionCase(Tq: number, start: number): BenchCase {
  const [nHeads, nKvHeads, headDim] = [16, 8, 128];
  const kvStride = nKvHeads * headDim;
  const rows = start + Tq;
  const [q, k, v] = [randomArray(Tq * nHeads * headDim), randomArray(rows * kvStride), randomArray(rows * kvStride)];
  const out = new Float32Array(Tq * nHeads * headDim);
  let visibleKeys = 0;
  for (let t = 0; t < Tq; t++) visibleKeys += start + t + 1;
  return {
    name: `attention Tq=${Tq} start=${start} 16/8x128`,
    flops: 4 * headDim * nHeads * visibleKeys, // q.k and p.v, 2 flops per multiply-add each
    run: (kernels) =>
      kernels.attention(out, q, k, v, Tq, start, nHeads, nKvHeads, headDim, kvStride, 1 / Math.sqrt(headDim)),
  };
}

function main(): void {
  let native: Kernels | undefined;
  try {
    native = loadNativeKernels();
  } catch (err) {
    console.log(`native kernels not available, portable only: ${(err as Error).message}`);
  }
  const threads = availableParallelism();
  const threadCounts = threads > 1 ? [1, threads] : [1];
  const cases = [
    sgemmCase(512, 512, 512),
    sgemmCase(1024, 1024, 1024),
    sgemmCase(256, 1024, 3072),
    sgemvCase(1024, 4096),
    sgemvCase(1024, 151936),
    attentionCase(512, 0),
    attentionCase(1, 2047),
  ];

  const header = ['op', 'portable', ...(native ? threadCounts.flatMap((n) => [`native ${n}T`, `ratio ${n}T`]) : [])];
  console.log('GFLOP/s (median per call); ratio = native / portable, measured in this run');
  console.log(row(header));
  for (const c of cases) {
    const gflops = (seconds: number) => c.flops / seconds / 1e9;
    const portable = gflops(secondsPerCall(() => c.run(portableKernels), 0.5));
    const cells = [c.name, portable.toFixed(2)];
    for (const n of native ? threadCounts : []) {
      native!.setThreads(n);
      const fast = gflops(secondsPerCall(() => c.run(native!), 1));
      cells.push(fast.toFixed(1), `${(fast / portable).toFixed(0)}x`);
    }
    console.log(row(cells));
  }
  if (native) console.log(`BLAS threads tried: ${threadCounts.join(', ')} (attention is single-threaded C either way)`);
}

function row(cells: string[]): string {
  return cells.map((cell, i) => (i === 0 ? cell.padEnd(32) : cell.padStart(11))).join('');
}

main();
