// The GEMM backend of the native addon: what `info` reports, sgemm on oneDNN (and on the BLAS
// forced by OPENCLAW_RL_GEMM=blas, in a child process) against the portable kernels, and
// gemmBf16 against PyTorch (Debian's python3-torch) as an independent reference.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bf16Bits, bf16Value, toBf16 } from '../src/engine/local/kernels/bf16.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { native, skipNative } from './helpers/native.js';
import { PYTHON } from './helpers/models.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20260612);
const nativePath = fileURLToPath(new URL('../src/engine/local/kernels/native.js', import.meta.url));

/** Runs `script` (an ES module body with `native` = loadNativeKernels()) in a child with the given OPENCLAW_RL_GEMM. */
function inChild(gemm: string, script: string): ReturnType<typeof spawnSync> {
  const env = { ...process.env, OPENCLAW_RL_GEMM: gemm };
  const body =
    `import { loadNativeKernels } from ${JSON.stringify(nativePath)};\n` +
    `const native = loadNativeKernels();\n${script}`;
  return spawnSync(process.execPath, ['--input-type=module', '-e', body], { env, encoding: 'utf8' });
}

/** The error of sgemm against portable (float64 sums) over transposes and strides: max |diff| / max |expected|. */
function sgemmError(sgemm: typeof portableKernels.sgemm): number {
  let worst = 0;
  for (const [transA, transB] of [
    [false, false],
    [false, true],
    [true, false],
    [true, true],
  ] as const) {
    const cases = [
      [1, 300, 257, 0, 1, 0],
      [37, 53, 129, 3, 0.5, 1],
      [130, 70, 300, 1, -1, 0.25],
    ] as const;
    for (const [M, N, K, pad, alpha, beta] of cases) {
      const lda = (transA ? M : K) + pad,
        ldb = (transB ? K : N) + pad,
        ldc = N + pad;
      const A = randomArrayFrom(random, (transA ? K : M) * lda),
        B = randomArrayFrom(random, (transB ? N : K) * ldb);
      const C0 = randomArrayFrom(random, M * ldc);
      const [actual, expected] = [C0.slice(), C0.slice()];
      sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, actual, ldc);
      portableKernels.sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, expected, ldc);
      let scale = 0,
        error = 0;
      for (let i = 0; i < expected.length; i++) {
        scale = Math.max(scale, Math.abs(expected[i]!));
        error = Math.max(error, Math.abs(actual[i]! - expected[i]!));
      }
      worst = Math.max(worst, error / scale);
    }
  }
  return worst;
}

// The existing sgemm tolerance (test/kernels.test.ts): max |error| <= 1e-5 max |expected|.
const SGEMM_TOLERANCE = 1e-5;

describe('the native GEMM backend', { skip: skipNative }, () => {
  test('info names the library, its ISA and whether the CPU has bf16 instructions', () => {
    const { info } = native();
    assert.match(info.gemm, /^(onednn|openblas|accelerate)$/);
    assert.ok(info.isa.length > 0);
    if (info.gemm !== 'onednn') {
      assert.equal(info.bf16Instructions, false);
      return;
    }
    // oneDNN's own CPU detection against the kernel's: bf16 instructions are AVX512-BF16 or AMX-BF16.
    const flags = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
    assert.equal(info.bf16Instructions, /\b(avx512_bf16|amx_bf16)\b/.test(flags), `isa ${info.isa}`);
    if (info.bf16Instructions) assert.match(info.isa, /^avx512_core_(bf16|amx)/);
  });

  test('sgemm matches the portable kernels on the backend in use', () => {
    assert.ok(sgemmError(native().sgemm) <= SGEMM_TOLERANCE);
  });

  test('sgemv matches the portable kernels, on one thread and on several (both transposes, padded rows)', () => {
    for (const [M, N, pad] of [
      [5, 7, 0],
      [3001, 257, 3],
      [300, 2100, 1],
    ] as const) {
      for (const trans of [false, true]) {
        const A = randomArrayFrom(random, M * (N + pad)),
          x = randomArrayFrom(random, trans ? M : N);
        const y0 = randomArrayFrom(random, trans ? N : M);
        for (const [alpha, beta] of [
          [1, 0],
          [-0.5, 2],
        ] as const) {
          const [actual, expected] = [y0.slice(), y0.slice()];
          native().sgemv(trans, M, N, alpha, A, N + pad, x, beta, actual);
          portableKernels.sgemv(trans, M, N, alpha, A, N + pad, x, beta, expected);
          const scale = expected.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
          const error = actual.reduce((m, v, i) => Math.max(m, Math.abs(v - expected[i]!)), 0);
          assert.ok(error <= SGEMM_TOLERANCE * scale, `${M}x${N} trans ${trans}: error ${error}, scale ${scale}`);
        }
      }
    }
  });

  test('OPENCLAW_RL_GEMM=blas forces the system BLAS, which matches too', () => {
    const child = inChild(
      'blas',
      `
      const { portableKernels } = await import(${JSON.stringify(nativePath.replace(/native\.js$/, 'portable.js'))});
      const A = Float32Array.from({ length: 70 * 90 }, (_, i) => Math.sin(i));
      const B = Float32Array.from({ length: 90 * 50 }, (_, i) => Math.cos(i));
      const [C, D] = [new Float32Array(70 * 50), new Float32Array(70 * 50)];
      native.sgemm(false, true, 70, 50, 90, 1, A, 90, B, 90, 0, C, 50);
      portableKernels.sgemm(false, true, 70, 50, 90, 1, A, 90, B, 90, 0, D, 50);
      let error = 0, scale = 0;
      for (let i = 0; i < C.length; i++) {
        error = Math.max(error, Math.abs(C[i] - D[i]));
        scale = Math.max(scale, Math.abs(D[i]));
      }
      console.log(JSON.stringify({ info: native.info, relative: error / scale }));`,
    );
    assert.equal(child.status, 0, String(child.stderr));
    const { info, relative } = JSON.parse(String(child.stdout)) as { info: { gemm: string }; relative: number };
    assert.match(info.gemm, /^(openblas|accelerate)$/);
    assert.ok(relative <= SGEMM_TOLERANCE, `relative error ${relative}`);
  });

  test('an unknown OPENCLAW_RL_GEMM is a load error naming the variable and its values', () => {
    const child = inChild('mkl', 'console.log(native.info.gemm);');
    assert.notEqual(child.status, 0);
    assert.match(String(child.stderr), /OPENCLAW_RL_GEMM must be "onednn", "blas", or unset/);
  });

  test('loading the kernels in a worker makes idle OpenMP threads sleep, unless the user chose a policy', () => {
    // The worker's process.env is a copy; the main thread's reads the C environment libgomp reads.
    const policyAfterWorkerLoad = (policy: string | undefined): string => {
      const { OMP_WAIT_POLICY: _, GOMP_SPINCOUNT: __, ...env } = process.env;
      const script = `const { Worker } = require('node:worker_threads');
        const w = new Worker('import(' + JSON.stringify(${JSON.stringify(nativePath)}) + ').then((m) => m.loadNativeKernels())',
          { eval: true });
        w.on('exit', () => console.log(process.env.OMP_WAIT_POLICY ?? 'unset'));`;
      const child = spawnSync(process.execPath, ['-e', script], {
        env: policy === undefined ? env : { ...env, OMP_WAIT_POLICY: policy },
        encoding: 'utf8',
      });
      assert.equal(child.status, 0, child.stderr);
      return child.stdout.trim();
    };
    assert.equal(policyAfterWorkerLoad(undefined), 'passive');
    assert.equal(policyAfterWorkerLoad('active'), 'active');
  });

  test('a process that only trains makes idle OpenMP threads spin briefly first, unless the user chose', () => {
    const afterTrainingLoad = (chosen: Record<string, string>): string => {
      const { OMP_WAIT_POLICY: _, GOMP_SPINCOUNT: __, ...env } = process.env;
      const script = `import { loadNativeKernels, spinIdleThreadsWhileTraining } from ${JSON.stringify(nativePath)};
        const set = spinIdleThreadsWhileTraining();
        loadNativeKernels();
        let late = 'no error';
        try { spinIdleThreadsWhileTraining(); } catch (e) { late = e.message; }
        console.log([set, process.env.OMP_WAIT_POLICY ?? 'unset', process.env.GOMP_SPINCOUNT ?? 'unset', late].join(' | '));`;
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        env: { ...env, ...chosen },
        encoding: 'utf8',
      });
      assert.equal(child.status, 0, child.stderr);
      return child.stdout.trim();
    };
    const late = 'spinIdleThreadsWhileTraining() comes too late: the native kernels have loaded';
    assert.equal(afterTrainingLoad({}), `true | unset | 4000 | ${late}`);
    assert.equal(afterTrainingLoad({ OMP_WAIT_POLICY: 'passive' }), `false | passive | unset | ${late}`);
    assert.equal(afterTrainingLoad({ GOMP_SPINCOUNT: '0' }), `false | unset | 0 | ${late}`);
  });

  test('setThreads(1) and back keeps sgemm correct', () => {
    native().setThreads(1);
    try {
      assert.ok(sgemmError(native().sgemm) <= SGEMM_TOLERANCE);
    } finally {
      native().setThreads(2);
    }
  });
});

describe('gemmBf16 against PyTorch', { skip: skipNative }, () => {
  test('matches the bf16-rounded inputs multiplied in float64, and torch bf16 matmul within its output rounding', (t) => {
    const [M, N, K] = [24, 40, 200];
    const A = randomArrayFrom(random, M * K); // activations, fp32
    const B = new Uint16Array(N * K); // weights, bf16, stored [N,K]
    toBf16(B, randomArrayFrom(random, N * K), N * K);
    const C = new Float32Array(M * N);
    native().gemmBf16(false, true, M, N, K, 1, A, K, B, K, 0, C, N);
    const script = [
      'import json, sys, torch',
      'd = json.load(sys.stdin); M, N, K = d["M"], d["N"], d["K"]',
      'a = torch.tensor(d["A"], dtype=torch.float32).reshape(M, K).to(torch.bfloat16)',
      'b = (torch.tensor(d["B"], dtype=torch.int32) << 16).to(torch.int32).view(torch.float32).reshape(N, K)',
      'exact = a.double() @ b.double().T',
      'bf16 = (a @ b.to(torch.bfloat16).T).float()',
      'print(json.dumps({"exact": exact.flatten().tolist(), "bf16": bf16.flatten().tolist()}))',
    ].join('\n');
    const run = spawnSync(PYTHON, ['-c', script], {
      input: JSON.stringify({ M, N, K, A: [...A], B: [...B] }),
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    assert.equal(run.status, 0, run.stderr);
    const torch = JSON.parse(run.stdout) as { exact: number[]; bf16: number[] };
    let worstExact = 0,
      worstBf16 = 0;
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j++) {
        let magnitude = 0;
        for (let p = 0; p < K; p++)
          magnitude += Math.abs(bf16Value(bf16Bits(A[i * K + p]!)) * bf16Value(B[j * K + p]!));
        // fp32 summation of K exact products: see the derivation in test/kernels-bf16.test.ts.
        const fp32Bound = (K + 3) * 2 ** -24 * magnitude;
        const [ours, exact, bf16] = [C[i * N + j]!, torch.exact[i * N + j]!, torch.bf16[i * N + j]!];
        assert.ok(Math.abs(ours - exact) <= fp32Bound, `C[${i},${j}] = ${ours}, float64 reference ${exact}`);
        // torch rounds its result to bf16 (half an ulp, at most 2^-8 relative) after its own fp32 sum.
        const torchBound = 2 ** -8 * Math.abs(bf16) + 2 * fp32Bound;
        assert.ok(Math.abs(ours - bf16) <= torchBound, `C[${i},${j}] = ${ours}, torch bf16 ${bf16}`);
        worstExact = Math.max(worstExact, Math.abs(ours - exact) / magnitude);
        worstBf16 = Math.max(worstBf16, Math.abs(ours - bf16) / magnitude);
      }
    }
    t.diagnostic(
      `max |ours - float64| / sum|a||b| = ${worstExact.toExponential(2)}; ` +
        `vs torch bf16: ${worstBf16.toExponential(2)}`,
    );
  });
});
