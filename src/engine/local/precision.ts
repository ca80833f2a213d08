// The arithmetic precision of the engine's matrix products. fp32 is the exact reference path
// (sgemm everywhere). bf16 computes as GPUs do under autocast: every GEMM input rounded to
// bfloat16, products summed in fp32, outputs kept in fp32; everything else (master weights,
// gradients, optimizer state, norms, softmax, losses) stays fp32. Weights that many GEMMs read
// are kept as bf16 copies (Uint16Array, the same layout as the float32 parameter buffer) so
// they are rounded once, not on every call, and decoding reads half the bytes. int8 serves as bf16
// does, except that the linear layers' products over a few rows (decode steps) read int8 copies
// of the weights (kernels/int8.ts: 1.125 bytes a weight); prefill stays on the bf16 copies.
// Training has no int8: it runs at fp32 or bf16, and a learner behind an int8 engine at bf16.

import type { Kernels } from './kernels/kernels.js';
import { INT8_BLOCK } from './kernels/int8.js';
import type { TensorSpec } from './model/weights.js';

export type Precision = 'fp32' | 'bf16' | 'int8';
export type PrecisionSetting = Precision | 'auto';
/** The precisions a learner computes at. */
export type TrainPrecision = Exclude<Precision, 'int8'>;

export const PRECISION_SETTINGS: readonly PrecisionSetting[] = ['fp32', 'bf16', 'int8', 'auto'];

/** The precision a learner behind an engine serving at `p` trains at: int8's prefill precision, bf16. */
export function trainPrecisionOf(p: Precision): TrainPrecision {
  return p === 'int8' ? 'bf16' : p;
}

/** A --precision value, checked: a clear error for anything but fp32, bf16, int8 or auto. */
export function parsePrecision(value: string): PrecisionSetting {
  if ((PRECISION_SETTINGS as readonly string[]).includes(value)) return value as PrecisionSetting;
  throw new RangeError(`precision must be one of ${PRECISION_SETTINGS.join(', ')}, got "${value}"`);
}

/**
 * auto = int8 where the native kernels have bf16 instructions and gemmInt8 runs on AVX512-VNNI:
 * decode then reads 1.125 bytes a weight instead of bf16's 2 and measured 1.5-1.7x bf16's tokens per
 * second at the Qwen3-0.6B shape, its logits 3x further from fp32's than bf16's (KL 5e-5 nats a
 * token; docs/cpu-performance.md, int8 decode). Else bf16 where gemmBf16 runs on bf16
 * instructions (faster than sgemm, half the weight bytes a decode step reads); elsewhere bf16
 * would be an fp32 GEMM plus rounding, slower than fp32 and less exact, so fp32. int8 without
 * VNNI dequantizes the weights on the fly and does not pay enough to be a default.
 */
export function resolvePrecision(setting: PrecisionSetting, kernels: Pick<Kernels, 'name' | 'info'>): Precision {
  if (setting !== 'auto') return setting;
  if (kernels.name !== 'native' || !kernels.info.bf16Instructions) return 'fp32';
  return kernels.info.int8Dot === 'vnni' ? 'int8' : 'bf16';
}

/** The GEMM of the gemmBf16 contract, computed at one precision. */
export type Gemm = Kernels['gemmBf16'];

/** bf16 (and int8, whose GEMMs over many rows are bf16): gemmBf16. fp32: sgemm, which takes only float32 operands (a bf16 copy there is a bug). */
export function gemmFor(k: Kernels, precision: Precision): Gemm {
  if (precision !== 'fp32')
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

/** A weight's int8 copy for gemmInt8: values [N,K] and one scale per block of 32 along K. */
export interface Int8Weight {
  q: Int8Array;
  scales: Float32Array;
}

/** int8 copies of the 2-D tensors a parameter buffer holds that `include` names. */
export interface Int8Params {
  /** The copy of a tensor, or null when it has none (not included, or K not a multiple of 32). */
  get(name: string): Int8Weight | null;
  /** Bytes of all the copies. */
  readonly bytes: number;
  /** Quantizes `data` into the copies, one chunk of rows per iteration (see refreshBf16InChunks). */
  refreshInChunks(k: Kernels, data: Float32Array): Generator<void>;
}

/** Empty int8 copies of the tensors of `specs` that `include` accepts; fill them with refreshInChunks. */
export function int8ParamsFor(specs: readonly TensorSpec[], include: (s: TensorSpec) => boolean): Int8Params {
  const chosen = specs.filter((s) => include(s) && s.shape.length === 2 && s.shape[1]! % INT8_BLOCK === 0);
  const values = chosen.reduce((a, s) => a + s.size, 0);
  const q = new Int8Array(values),
    scales = new Float32Array(values / INT8_BLOCK);
  const copies = new Map<string, { spec: TensorSpec; weight: Int8Weight }>();
  let at = 0;
  for (const spec of chosen) {
    const end = at + spec.size;
    const weight = { q: q.subarray(at, end), scales: scales.subarray(at / INT8_BLOCK, end / INT8_BLOCK) };
    copies.set(spec.name, { spec, weight });
    at += spec.size;
  }
  return {
    get: (name) => copies.get(name)?.weight ?? null,
    bytes: q.byteLength + scales.byteLength,
    *refreshInChunks(k, data) {
      for (const { spec, weight } of copies.values()) {
        const K = spec.shape[1]!,
          N = spec.shape[0]!,
          rows = Math.max(1, Math.floor(CONVERT_CHUNK / K));
        for (let r = 0; r < N; r += rows) {
          const n = Math.min(rows, N - r),
            w = data.subarray(spec.offset + r * K, spec.offset + (r + n) * K);
          const q = weight.q.subarray(r * K, (r + n) * K);
          k.quantizeInt8(q, weight.scales.subarray((r * K) / INT8_BLOCK, ((r + n) * K) / INT8_BLOCK), w, n, K);
          yield;
        }
      }
    },
  };
}

/** int8 copies of `data` (laid out by `specs`), made at once. */
export function int8ParamsOf(
  k: Kernels,
  specs: readonly TensorSpec[],
  data: Float32Array,
  include: (s: TensorSpec) => boolean,
): Int8Params {
  const copy = int8ParamsFor(specs, include);
  const chunks = copy.refreshInChunks(k, data);
  while (!chunks.next().done) {
    /* every chunk, at once */
  }
  return copy;
}
