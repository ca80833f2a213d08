// The machine report every comparison benchmark prints first: CPU model, the instruction-set
// flags that decide fp32/bf16 GEMM speed (AVX-512, AVX512-BF16, AMX), our kernels' info, the
// OpenBLAS environment and the thread counts, so a table can be read against its hardware.

import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { loadKernels } from '../src/engine/local/kernels/index.js';

const FLAGS = [
  'avx2',
  'fma',
  'avx512f',
  'avx512bw',
  'avx512vl',
  'avx512_vnni',
  'avx512_bf16',
  'amx_tile',
  'amx_bf16',
  'amx_int8',
];

export interface MachineInfo {
  cpu: string;
  flags: Record<string, boolean>;
  cores: number;
  kernels: string;
}

export function machineInfo(): MachineInfo {
  let text = '';
  try {
    text = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    // not Linux: flags unknown
  }
  const model = /^model name\s*:\s*(.*)$/m.exec(text)?.[1] ?? 'unknown';
  const have = new Set((/^flags\s*:\s*(.*)$/m.exec(text)?.[1] ?? '').split(/\s+/));
  const k = loadKernels();
  return {
    cpu: model,
    flags: Object.fromEntries(FLAGS.map((f) => [f, have.has(f)])),
    cores: availableParallelism(),
    kernels: `${k.name} (gemm ${k.info.gemm}, isa ${k.info.isa}, bf16 instructions ${k.info.bf16Instructions ? 'yes' : 'no (emulated in fp32)'}, gemmInt8 ${k.info.int8Dot})`,
  };
}

/** Prints the machine report; `threads` is what both sides of the comparison are given. */
export function printMachine(threads: number): MachineInfo {
  const m = machineInfo();
  const flags = Object.entries(m.flags)
    .map(([f, on]) => `${f}${on ? '+' : '-'}`)
    .join(' ');
  const blasEnv = ['OPENBLAS_CORETYPE', 'OPENBLAS_L2_SIZE', 'OPENBLAS_NUM_THREADS', 'OMP_NUM_THREADS']
    .map((v) => `${v}=${process.env[v] ?? '(unset)'}`)
    .join(' ');
  console.log(`machine: ${m.cpu}, ${m.cores} logical cores; flags ${flags}`);
  console.log(`our kernels: ${m.kernels}`);
  console.log(`threads: ${threads} for every side; our process env ${blasEnv}`);
  return m;
}

export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Environment with OpenBLAS's core/cache overrides removed (for "PyTorch at its best" only). */
export function envWithoutOpenblasOverrides(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.OPENBLAS_CORETYPE;
  delete env.OPENBLAS_L2_SIZE;
  return env;
}
