// GEMM throughput of every backend on 2 threads, in one run so that the ratios hold on shared
// vCPUs: our sgemm on oneDNN and on OpenBLAS (forced with OPENCLAW_RL_GEMM=blas, in a child
// process), our gemmBf16 (fp32 activations, bf16 weights), our sgemv (both backends) for single tokens, and
// PyTorch (Debian's python3-torch) in fp32 with OpenBLAS's own kernel choice, in fp32 with the
// environment's OPENBLAS_CORETYPE, and in bf16. Shapes: 2048^3 and Qwen3-0.6B's linear layers.
// Run: npm run bench:gemm
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { toBf16 } from '../src/engine/local/kernels/bf16.js';
import { loadNativeKernels } from '../src/engine/local/kernels/native.js';
import { secondsPerCall } from './timing.js';

const THREADS = 2;
const MIN_SECONDS = 0.4;
const PYTHON = process.env.OPENCLAW_RL_PYTHON ?? '/usr/bin/python3';

/** y[M,N] = x[M,K] W[N,K]^T, a linear layer (the engine's layout); named by the layer. */
interface Shape {
  name: string;
  M: number;
  K: number;
  N: number;
}

function shapes(): Shape[] {
  const out: Shape[] = [{ name: '2048^3', M: 2048, K: 2048, N: 2048 }];
  const layers: Array<[string, number, number]> = [
    ['q', 1024, 2048],
    ['k/v', 1024, 1024],
    ['o', 2048, 1024],
    ['gate/up', 1024, 3072],
    ['down', 3072, 1024],
  ];
  for (const tokens of [512, 1]) {
    for (const [name, K, N] of layers) out.push({ name: `${name} T=${tokens}`, M: tokens, K, N });
  }
  out.push({ name: 'head T=1', M: 1, K: 1024, N: 151936 });
  return out;
}

type Results = Record<string, Record<string, number>>; // shape -> implementation -> GFLOP/s

function randomArray(n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.random() * 2 - 1;
  return out;
}

/** Our kernels in this process; the sgemm column is named after the backend in use. */
function measureOurs(bf16: boolean): Results {
  const kernels = loadNativeKernels();
  kernels.setThreads(THREADS);
  const results: Results = {};
  for (const s of shapes()) {
    const [x, W, y] = [randomArray(s.M * s.K), randomArray(s.N * s.K), new Float32Array(s.M * s.N)];
    const gflops = (run: () => void): number => (2 * s.M * s.N * s.K) / secondsPerCall(run, MIN_SECONDS) / 1e9;
    const row: Record<string, number> = {};
    row[`ours sgemm ${kernels.info.gemm}`] = gflops(() =>
      kernels.sgemm(false, true, s.M, s.N, s.K, 1, x, s.K, W, s.K, 0, y, s.N),
    );
    if (s.M === 1)
      row[`ours sgemv ${kernels.info.gemm}`] = gflops(() => kernels.sgemv(false, s.N, s.K, 1, W, s.K, x, 0, y));
    if (bf16) {
      const W16 = new Uint16Array(W.length);
      toBf16(W16, W, W.length);
      row['ours gemmBf16'] = gflops(() => kernels.gemmBf16(false, true, s.M, s.N, s.K, 1, x, s.K, W16, s.K, 0, y, s.N));
    }
    results[s.name] = row;
  }
  return results;
}

const TORCH_SCRIPT = `
import ctypes, json, sys, time, torch
torch.set_num_threads(${THREADS})
d = json.load(sys.stdin)
core = "unknown"
for line in open("/proc/self/maps"):
    if "libopenblas" in line:
        lib = ctypes.CDLL(line.split()[-1]); lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode(); break
def gflops(f, flops):
    f(); times = []; begin = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - begin < ${MIN_SECONDS}:
        t0 = time.perf_counter(); f(); times.append(time.perf_counter() - t0)
    return flops / sorted(times)[len(times) // 2] / 1e9
out = {}
for s in d["shapes"]:
    x, w = torch.rand(s["M"], s["K"]) * 2 - 1, torch.rand(s["N"], s["K"]) * 2 - 1
    flops = 2 * s["M"] * s["N"] * s["K"]
    with torch.no_grad():
        row = {d["label"] % core: gflops(lambda: torch.nn.functional.linear(x, w), flops)}
        if d["bf16"]:
            xb, wb = x.bfloat16(), w.bfloat16()
            row["torch bf16"] = gflops(lambda: torch.nn.functional.linear(xb, wb), flops)
    out[s["name"]] = row
print(json.dumps(out))
`;

function runChild(command: string, args: string[], env: NodeJS.ProcessEnv, input?: string): Results {
  const run = spawnSync(command, args, { env, input, encoding: 'utf8', maxBuffer: 16 << 20 });
  if (run.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1)!) as Results;
}

function measureTorch(ownCoreChoice: boolean): Results {
  const env = { ...process.env };
  if (ownCoreChoice) {
    // For PyTorch only: OpenBLAS picks its kernels for this CPU itself (the engine keeps them set).
    delete env.OPENBLAS_CORETYPE;
    delete env.OPENBLAS_L2_SIZE;
  }
  const label = ownCoreChoice ? 'torch fp32 openblas %s (own choice)' : 'torch fp32 openblas %s (as set)';
  const input = JSON.stringify({ shapes: shapes(), label, bf16: !ownCoreChoice });
  return runChild(PYTHON, ['-c', TORCH_SCRIPT], env, input);
}

function merge(into: Results, from: Results): void {
  for (const [shape, row] of Object.entries(from)) Object.assign((into[shape] ??= {}), row);
}

function main(): void {
  if (process.argv.includes('--ours-json')) {
    console.log(JSON.stringify(measureOurs(false)));
    return;
  }
  const results = measureOurs(true);
  if (loadNativeKernels().info.gemm === 'onednn') {
    const self = fileURLToPath(import.meta.url);
    merge(results, runChild(process.execPath, [self, '--ours-json'], { ...process.env, OPENCLAW_RL_GEMM: 'blas' }));
  }
  merge(results, measureTorch(true));
  merge(results, measureTorch(false));

  const peak = Math.max(...Object.values(results).flatMap((row) => Object.values(row)));
  const info = loadNativeKernels().info;
  console.log(
    `GFLOP/s on ${THREADS} threads (median per call); ours: ${info.gemm} ${info.isa}, bf16 instructions ` +
      `${info.bf16Instructions}; "vs torch" = / PyTorch's best fp32 on that shape; ` +
      `"of peak" = / ${peak.toFixed(0)} GFLOP/s, ` +
      `the best measured in this run`,
  );
  console.log(`| shape [MxKxN] | implementation | GFLOP/s | vs torch fp32 | of peak |`);
  console.log(`|---|---|---:|---:|---:|`);
  for (const s of shapes()) {
    const row = results[s.name]!;
    const torchBest = Math.max(
      ...Object.entries(row)
        .filter(([k]) => k.startsWith('torch fp32'))
        .map(([, v]) => v),
    );
    for (const [impl, value] of Object.entries(row).sort(([, a], [, b]) => b - a)) {
      console.log(
        `| ${s.name} [${s.M}x${s.K}x${s.N}] | ${impl} | ${value.toFixed(1)} | ` +
          `${(value / torchBest).toFixed(2)} | ` +
          `${((100 * value) / peak).toFixed(0)}% |`,
      );
    }
  }
}

main();
