// The native kernels: the openclaw_native addon (native/, built at install time by
// scripts/build-native.mjs) over oneDNN when it was built with it, else the system BLAS
// (OPENCLAW_RL_GEMM=blas forces the BLAS; docs/engine.md, GEMM backends). The addon checks every argument itself
// (types, counts, and that each access stays inside its array) and throws an Error naming the
// op, so its functions are exposed as they are, with this file supplying the types.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KernelInfo, Kernels } from './kernels.js';

/** Where the install step builds the addon: the package root, seen from dist/src/engine/local/kernels/. */
export const NATIVE_ADDON_PATH = fileURLToPath(
  new URL('../../../../../native/build/Release/openclaw_native.node', import.meta.url),
);

/** What a person has to do to get the native kernels. */
export const NATIVE_BUILD_HINT =
  'apt-get install libopenblas-dev libdnnl-dev (macOS: Xcode command line tools), then npm rebuild openclaw-rl';

// Must equal ADDON_API_VERSION in native/src/addon.c.
const ADDON_API_VERSION = 12;

type NativeAddon = Omit<Kernels, 'name' | 'info' | 'threads'> & {
  readonly apiVersion: number;
  readonly info: KernelInfo;
};

/** Whether this thread has loaded the addon (and with it libgomp, which has read its environment). */
let nativeLoaded = false;

/** Rounds an idle OpenMP thread spins before it sleeps, in a process that only trains. */
const TRAINING_SPIN_ROUNDS = '4000';

/**
 * For a process that trains and serves nothing (`train`, the training benchmark): idle OpenMP
 * threads spin TRAINING_SPIN_ROUNDS rounds (about 0.1 ms here) before they sleep, instead of
 * sleeping at once as openmp_env.c makes them for serving. A LoRA step at the 0.6B shape makes
 * about 2,200 kernel calls back to back, nearly all parallel regions, and waking the sleeping
 * workers for each (a futex wake, tens of microseconds on a VM) cost about 5% of the step
 * (docs/cpu-performance.md). Returns
 * whether it set GOMP_SPINCOUNT: not where the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT. Call
 * it on the main thread (a worker's process.env never reaches the C environment) before the
 * kernels first load: libgomp reads its environment once.
 */
export function spinIdleThreadsWhileTraining(): boolean {
  if (nativeLoaded) throw new Error('spinIdleThreadsWhileTraining() comes too late: the native kernels have loaded');
  if (process.env.OMP_WAIT_POLICY !== undefined || process.env.GOMP_SPINCOUNT !== undefined) return false;
  process.env.GOMP_SPINCOUNT = TRAINING_SPIN_ROUNDS;
  return true;
}

/** Loads the addon (once per thread, by Node's module cache) or throws an Error saying why and how to fix it. */
export function loadNativeKernels(addonPath: string = NATIVE_ADDON_PATH): Kernels {
  let addon: NativeAddon;
  try {
    const require = createRequire(import.meta.url);
    // Built beside the addon (native/src/openmp_env.c): makes idle OpenMP threads sleep unless the
    // user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, and must run before the addon loads libgomp.
    // Only a performance default, so an addon path without it (a copied build) loads as it is.
    const openMpEnv = join(dirname(addonPath), 'openclaw_openmp_env.node');
    if (existsSync(openMpEnv)) require(openMpEnv);
    addon = require(addonPath) as NativeAddon;
    nativeLoaded = true;
  } catch (err) {
    throw new Error(
      `native kernels unavailable: ${loadFailure(err, addonPath)}. For the fast path: ${NATIVE_BUILD_HINT}`,
      {
        cause: err,
      },
    );
  }
  if (addon.apiVersion !== ADDON_API_VERSION) {
    throw new Error(
      `native kernels unavailable: ${addonPath} is a stale build (API version ${String(addon.apiVersion)}, ` +
        `expected ${ADDON_API_VERSION}). Rebuild it: npm rebuild openclaw-rl`,
    );
  }
  // OpenMP's default team: one thread per processor this process may use.
  let threads = availableParallelism();
  return {
    name: 'native',
    info: addon.info,
    sgemm: addon.sgemm,
    gemmBf16: addon.gemmBf16,
    ...(addon.info.gemm === 'onednn' ? { packBf16: addon.packBf16, gemmBf16Packed: addon.gemmBf16Packed } : {}),
    toBf16: addon.toBf16,
    quantizeInt8: addon.quantizeInt8,
    dequantizeInt8Bf16: addon.dequantizeInt8Bf16,
    gemmInt8: addon.gemmInt8,
    sgemv: addon.sgemv,
    adviseHugePages: addon.adviseHugePages,
    rmsnorm: addon.rmsnorm,
    siluMul: addon.siluMul,
    rope: addon.rope,
    attention: addon.attention,
    attentionInt8: addon.attentionInt8,
    adamw: addon.adamw,
    sumSquares: addon.sumSquares,
    temperedWeights: addon.temperedWeights,
    rmsnormBackward: addon.rmsnormBackward,
    siluMulBackward: addon.siluMulBackward,
    logitsStats: addon.logitsStats,
    logitsBackward: addon.logitsBackward,
    causalSoftmaxRows: addon.causalSoftmaxRows,
    causalSoftmaxBackwardRows: addon.causalSoftmaxBackwardRows,
    // OPENCLAW_RL_PREFILL_ATTENTION=blocked: a prompt chunk's attention through the blocked GEMM
    // path of segment-attention.ts instead (to compare).
    ...(process.env.OPENCLAW_RL_PREFILL_ATTENTION === 'blocked'
      ? {}
      : { prefillAttentionBf16: addon.prefillAttentionBf16 }),
    // OPENCLAW_RL_TRAIN_ATTENTION=blockwise: the training attention one GEMM call at a time, as
    // without oneDNN (to compare, or to rule the fused kernels out).
    ...(process.env.OPENCLAW_RL_TRAIN_ATTENTION === 'blockwise'
      ? {}
      : { attentionForwardBf16: addon.attentionForwardBf16, attentionBackwardBf16: addon.attentionBackwardBf16 }),
    setThreads: (n: number) => {
      addon.setThreads(n);
      threads = n;
    },
    threads: () => threads,
  };
}

/** A short reason, e.g. "not built" or the dynamic loader's complaint about a missing libopenblas. */
function loadFailure(err: unknown, addonPath: string): string {
  if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') return `the addon is not built (no ${addonPath})`;
  const firstLine = String((err as Error).message ?? err).split('\n')[0];
  return `${addonPath} failed to load: ${firstLine}`;
}
