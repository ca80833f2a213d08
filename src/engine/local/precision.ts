// The arithmetic precision of the engine's matrix products. fp32 is the exact reference path
// (sgemm everywhere). bf16 computes as GPUs do under autocast: every GEMM input rounded to
// bfloat16, products summed in fp32, outputs kept in fp32; everything else (master weights,
// gradients, optimizer state, norms, softmax, losses) stays fp32. Weights that many GEMMs read
// are kept as bf16 copies (Uint16Array, the same layout as the float32 parameter buffer) so
// they are rounded once, not on every call, and decoding reads half the bytes.

import type { Kernels } from './kernels/kernels.js';
import type { TensorSpec } from './model/weights.js';

export type Precision = 'fp32' | 'bf16';
export type PrecisionSetting = Precision | 'auto';

export const PRECISION_SETTINGS: readonly PrecisionSetting[] = ['fp32', 'bf16', 'auto'];

/** A --precision value, checked: a clear error for anything but fp32, bf16 or auto. */
export function parsePrecision(value: string): PrecisionSetting {
  if ((PRECISION_SETTINGS as readonly string[]).includes(value)) return value as PrecisionSetting;
  throw new RangeError(`precision must be one of ${PRECISION_SETTINGS.join(', ')}, got "${value}"`);
}

/**
 * auto = bf16 where the native kernels run gemmBf16 on bf16 instructions (then it is faster than
 * sgemm and halves the weight bytes a decode step reads); elsewhere it would be an fp32 GEMM plus
 * rounding, slower than fp32 and less exact, so fp32.
 */
export function resolvePrecision(setting: PrecisionSetting, kernels: Pick<Kernels, 'name' | 'info'>): Precision {
  if (setting !== 'auto') return setting;
  return kernels.name === 'native' && kernels.info.bf16Instructions ? 'bf16' : 'fp32';
}

/** The GEMM of the gemmBf16 contract, computed at one precision. */
export type Gemm = Kernels['gemmBf16'];

/** bf16: gemmBf16. fp32: sgemm, which takes only float32 operands (a bf16 copy there is a bug). */
export function gemmFor(k: Kernels, precision: Precision): Gemm {
  if (precision === 'bf16')
    return (tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) =>
      k.gemmBf16(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  return (tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) => {
    if (!(A instanceof Float32Array && B instanceof Float32Array))
      throw new TypeError('an fp32 GEMM was given bf16 operands');
    k.sgemm(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  };
}

/** bf16 copies of a parameter buffer's tensors, at the same offsets as the float32 buffer. */
export interface Bf16Params {
  data: Uint16Array;
  get(name: string): Uint16Array;
}

/** Conversions per call of refreshBf16's loop: bounded, so a caller can interleave other work. */
const CONVERT_CHUNK = 1 << 22;

/**
 * bf16 copies of `data` (laid out by `specs`), in a SharedArrayBuffer so a learner can read the
 * serving worker's copy of the base instead of making its own.
 */
export function bf16ParamsOf(k: Kernels, specs: readonly TensorSpec[], data: Float32Array): Bf16Params {
  const copy = bf16ParamsOver(specs, new Uint16Array(new SharedArrayBuffer(data.length * 2)));
  refreshBf16(k, copy, data);
  return copy;
}

export function bf16ParamsOver(specs: readonly TensorSpec[], data: Uint16Array): Bf16Params {
  const views = new Map(specs.map((s) => [s.name, data.subarray(s.offset, s.offset + s.size)] as const));
  return {
    data,
    get(name) {
      const v = views.get(name);
      if (!v) throw new Error(`no parameter named ${name}`);
      return v;
    },
  };
}

/** Rounds `data` into `copy` again (full fine-tuning: after every optimizer step). */
export function refreshBf16(k: Kernels, copy: Bf16Params, data: Float32Array): void {
  const chunks = refreshBf16InChunks(k, copy, data);
  while (!chunks.next().done) {
    /* every chunk, at once */
  }
}

/** The same conversion one chunk per iteration, for a thread that must keep serving in between. */
export function* refreshBf16InChunks(k: Kernels, copy: Bf16Params, data: Float32Array): Generator<void> {
  if (copy.data.length !== data.length) {
    throw new RangeError(`a bf16 copy of ${copy.data.length} values cannot hold ${data.length}`);
  }
  for (let i = 0; i < data.length; i += CONVERT_CHUNK) {
    const n = Math.min(CONVERT_CHUNK, data.length - i);
    k.toBf16(copy.data.subarray(i, i + n), data.subarray(i, i + n), n);
    yield;
  }
}
