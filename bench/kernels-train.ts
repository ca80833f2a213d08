// Speed of the training kernels, native against portable, measured in the same run so that the
// ratios hold even when the machine's speed drifts (shared vCPUs). Shapes are those of a
// Qwen3-0.6B-sized training step: 512 rows of dim 1024, MLP width 3072, a 151936-token
// vocabulary (64 rows at a time), 128 x 512 attention score row blocks, AdamW over 10M values.
// Every kernel is single-threaded, and these are streaming passes, so the native column also
// shows GB/s (the bytes each call must read and write at least) next to a plain copy's.
// Run: node dist/bench/kernels-train.js
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { loadNativeKernels } from '../src/engine/local/kernels/native.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { secondsPerCall } from './timing.js';

interface BenchCase {
  name: string;
  /** Bytes read and written at least once per call. */
  bytes: number;
  run(kernels: Kernels): void;
}

function randomArray(n: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (Math.random() * 2 - 1) * scale;
  return out;
}

const F32 = 4;

function adamwCase(n: number): BenchCase {
  const [p, g, m] = [randomArray(n), randomArray(n, 1e-2), randomArray(n, 1e-3)];
  const v = Float32Array.from(randomArray(n, 1e-3), (x) => x * x);
  // Reads p, g, m, v; writes p, m, v.
  return {
    name: `adamw n=${(n / 1e6).toFixed(0)}M`,
    bytes: 7 * n * F32,
    run: (k) => k.adamw(p, g, m, v, n, 1e-5, 0.9, 0.999, 1e-8, 0.01, 1 - 0.9 ** 10, 1 - 0.999 ** 10, 1, null, false),
  };
}

function rmsnormBackwardCase(rows: number, dim: number): BenchCase {
  const [x, dy, w, dw] = [randomArray(rows * dim), randomArray(rows * dim), randomArray(dim), new Float32Array(dim)];
  const dx = new Float32Array(rows * dim);
  // Reads x, dy, dx (accumulate); writes dx.
  return {
    name: `rmsnormBackward ${rows}x${dim} +=, dw`,
    bytes: 4 * rows * dim * F32,
    run: (k) => k.rmsnormBackward(dx, dw, dy, x, w, rows, dim, 1e-6, true),
  };
}

function siluMulBackwardCase(n: number, label: string): BenchCase {
  const [da, gate, up] = [randomArray(n), randomArray(n, 4), randomArray(n)];
  const [dg, du] = [new Float32Array(n), new Float32Array(n)];
  return {
    name: `siluMulBackward ${label}`,
    bytes: 5 * n * F32,
    run: (k) => k.siluMulBackward(dg, du, da, gate, up, n),
  };
}

function logitsInput(rows: number, V: number): Float32Array {
  return randomArray(rows * V, 8);
}

function logitsStatsCase(rows: number, V: number): BenchCase {
  const logits = logitsInput(rows, V);
  const [lse, entropy] = [new Float32Array(rows), new Float32Array(rows)];
  return {
    name: `logitsStats ${rows}x${V}`,
    bytes: rows * V * F32,
    run: (k) => k.logitsStats(lse, entropy, logits, rows, V),
  };
}

function logitsBackwardCase(rows: number, V: number): BenchCase {
  const logits = logitsInput(rows, V);
  const [lse, entropy] = [new Float32Array(rows), new Float32Array(rows)];
  portableKernels.logitsStats(lse, entropy, logits, rows, V);
  const [gSum, gEntropy] = [randomArray(rows), randomArray(rows)];
  // In place, so after the first call the rows hold gradients: the work per element is the same
  // (the kernels have no value-dependent branches, and nothing becomes subnormal).
  return {
    name: `logitsBackward ${rows}x${V}`,
    bytes: 2 * rows * V * F32,
    run: (k) => k.logitsBackward(logits, rows, V, lse, entropy, gSum, gEntropy),
  };
}

// One block of attention score rows as the training attention makes them: the last 128 query
// rows of an n-token sequence against its n keys (head dim 128 for the backward's dO . O).

function causalSoftmaxRowsCase(n: number): BenchCase {
  const rows = 128,
    S = randomArray(rows * n, 4),
    lse = new Float32Array(rows);
  return {
    name: `causalSoftmaxRows ${rows}x${n}`,
    bytes: 2 * rows * n * F32,
    run: (k) => k.causalSoftmaxRows(S, lse, rows, n, n - rows),
  };
}

function causalSoftmaxBackwardRowsCase(n: number): BenchCase {
  const rows = 128,
    hd = 128,
    S = randomArray(rows * n, 4),
    lse = new Float32Array(rows);
  portableKernels.causalSoftmaxRows(Float32Array.from(S), lse, rows, n, n - rows);
  const dP = randomArray(rows * n),
    dO = randomArray(rows * hd),
    O = randomArray(rows * hd);
  return {
    name: `causalSoftmaxBackwardRows ${rows}x${n}`,
    bytes: 4 * rows * n * F32,
    run: (k) => k.causalSoftmaxBackwardRows(dP, S, lse, dO, O, rows, n, n - rows, hd, hd),
  };
}

/** The memory-speed yardstick: GB/s of copying n floats with TypedArray.set (memmove), read + write. */
function copyGigabytesPerSecond(n: number): number {
  const [from, to] = [randomArray(n), new Float32Array(n)];
  return (2 * n * F32) / secondsPerCall(() => to.set(from), 1) / 1e9;
}

function main(): void {
  let native: Kernels | undefined;
  try {
    native = loadNativeKernels();
  } catch (err) {
    console.log(`native kernels not available, portable only: ${(err as Error).message}`);
  }
  const [rows, dim, F, V, logitRows, n] = [512, 1024, 3072, 151936, 64, 512];
  const cases = [
    adamwCase(10_000_000),
    rmsnormBackwardCase(rows, dim),
    rmsnormBackwardCase(rows * 16, 128), // the q-norm: one row per head
    siluMulBackwardCase(rows * F, `${rows}x${F}`),
    logitsStatsCase(logitRows, V),
    logitsBackwardCase(logitRows, V),
    causalSoftmaxRowsCase(n),
    causalSoftmaxBackwardRowsCase(n),
  ];

  console.log('ms per call (median); ratio = portable time / native time, measured in this run');
  console.log(row(['op', 'portable ms', ...(native ? ['native ms', 'ratio', 'native GB/s'] : [])]));
  for (const c of cases) {
    const portable = secondsPerCall(() => c.run(portableKernels), 1);
    const cells = [c.name, (portable * 1e3).toFixed(2)];
    if (native) {
      const fast = secondsPerCall(() => c.run(native!), 1);
      cells.push((fast * 1e3).toFixed(3), `${(portable / fast).toFixed(1)}x`, (c.bytes / fast / 1e9).toFixed(1));
    }
    console.log(row(cells));
  }
  const copyBytes = logitRows * V * F32;
  console.log(
    row([
      `copy ${(copyBytes / 1e6).toFixed(0)} MB (TypedArray.set)`,
      '',
      '',
      '',
      copyGigabytesPerSecond(logitRows * V).toFixed(1),
    ]),
  );
  console.log(
    "GB/s counts each array read or written once per call; the copy is this machine's single-thread memory speed.",
  );
}

function row(cells: string[]): string {
  return cells.map((cell, i) => (i === 0 ? cell.padEnd(36) : cell.padStart(12))).join('');
}

main();
