// bfloat16 in plain TypeScript: the rounding every bf16 path shares, and the portable gemmBf16
// (also the oracle the native one is tested against). A bf16 value is the upper 16 bits of a
// float32, stored in a Uint16Array.
import type { Kernels } from './kernels.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The bf16 bits nearest to x (ties to even); NaN stays a quiet NaN of the same sign. */
export function bf16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x007fffff) !== 0) return (bits >>> 16) | 0x0040;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** The float32 value of bf16 bits. */
export function bf16Value(bits: number): number {
  u32[0] = bits << 16;
  return f32[0]!;
}

export function toBf16(out: Uint16Array, x: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = bf16Bits(x[i]!);
}

/** The float32 values of the first n bf16 values of x. */
export function widenBf16(x: Uint16Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = bf16Value(x[i]!);
  return out;
}

/** A float32 copy of the first n values of an operand, each rounded to bf16. */
function roundedCopy(x: Float32Array | Uint16Array, n: number): Float32Array {
  if (x instanceof Uint16Array) return widenBf16(x, n);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = bf16Value(bf16Bits(x[i]!));
  return out;
}

/** The portable gemmBf16: the inputs rounded to bf16, then the exact-sum portable sgemm. */
export function portableGemmBf16(sgemm: Kernels['sgemm']): Kernels['gemmBf16'] {
  return (transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) => {
    const aRows = transA ? K : M,
      aCols = transA ? M : K;
    const bRows = transB ? N : K,
      bCols = transB ? K : N;
    const a = aRows === 0 ? new Float32Array(0) : roundedCopy(A, (aRows - 1) * lda + aCols);
    const b = bRows === 0 ? new Float32Array(0) : roundedCopy(B, (bRows - 1) * ldb + bCols);
    sgemm(transA, transB, M, N, K, alpha, a, lda, b, ldb, beta, C, ldc);
  };
}
