// int8 weights in plain TypeScript: the portable quantizeInt8 and gemmInt8 (kernels.ts), also
// the oracle the native ones are tested against. A matrix [N,K] becomes int8 values in blocks of
// INT8_BLOCK along K with one fp32 scale per block.
import { bf16Bits } from './bf16.js';
import type { Kernels } from './kernels.js';

/** Weights per scale. */
export const INT8_BLOCK = 32;

function checkBlocks(op: string, K: number): void {
  if (K % INT8_BLOCK !== 0) {
    throw new RangeError(`${op}: K = ${K} must be a multiple of ${INT8_BLOCK}, the quantization block`);
  }
}

/** Nearest integer to x, ties to even (what C's nearbyintf does in the default rounding mode). */
function roundTiesEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export const quantizeInt8: Kernels['quantizeInt8'] = (q, scales, w, N, K) => {
  checkBlocks('quantizeInt8', K);
  for (let b = 0; b < (N * K) / INT8_BLOCK; b++) {
    let max = 0;
    for (let i = 0; i < INT8_BLOCK; i++) max = Math.max(max, Math.abs(w[b * INT8_BLOCK + i]!));
    // The division in float64 rounded to float32 is the float32 division, as the C one computes.
    const scale = Math.fround(max / 127);
    scales[b] = scale;
    for (let i = 0; i < INT8_BLOCK; i++) {
      const v = scale === 0 ? 0 : roundTiesEven(Math.fround(w[b * INT8_BLOCK + i]! / scale));
      q[b * INT8_BLOCK + i] = Math.min(127, Math.max(-127, v));
    }
  }
};

/** out[i] = bf16 bits of the float32 product scales[i / 32] * q[i], for i < n (a multiple of 32). */
export const dequantizeInt8Bf16: Kernels['dequantizeInt8Bf16'] = (out, q, scales, n) => {
  checkBlocks('dequantizeInt8Bf16', n);
  if (out.length < n || q.length < n || scales.length < n / INT8_BLOCK)
    throw new RangeError(`dequantizeInt8Bf16: out, q or scales hold fewer than n = ${n} values`);
  for (let i = 0; i < n; i++) out[i] = bf16Bits(Math.fround(scales[(i / INT8_BLOCK) | 0]! * q[i]!));
};

/** The float32 values of int8 values scaled per block of 32: value = scales[i / 32] * q[i]. */
export function dequantizeInt8(q: Int8Array, scales: Float32Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = scales[(i / INT8_BLOCK) | 0]! * q[i]!;
  return out;
}

/** Each output summed in float64 (exact for these operands up to one rounding) and rounded once. */
export const gemmInt8: Kernels['gemmInt8'] = (M, N, K, x, q, scales, y) => {
  checkBlocks('gemmInt8', K);
  const blocks = K / INT8_BLOCK;
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let sum = 0;
      for (let b = 0; b < blocks; b++) {
        let dot = 0;
        for (let p = b * INT8_BLOCK; p < (b + 1) * INT8_BLOCK; p++) dot += x[i * K + p]! * q[j * K + p]!;
        sum += scales[j * blocks + b]! * dot;
      }
      y[i * N + j] = sum;
    }
  }
};

/**
 * The product gemmInt8 computes with int8Dot 'vnni': each row of x quantized as quantizeInt8
 * quantizes weights, the blocks' integer dot products exact, scaled and summed in float64 and
 * rounded once. The oracle of that variant; the portable kernels keep fp32 activations.
 */
export function gemmInt8QuantizedActivations(
  M: number,
  N: number,
  K: number,
  x: Float32Array,
  q: Int8Array,
  scales: Float32Array,
  y: Float32Array,
): void {
  checkBlocks('gemmInt8', K);
  const blocks = K / INT8_BLOCK;
  const qx = new Int8Array(M * K),
    xScales = new Float32Array(M * blocks);
  quantizeInt8(qx, xScales, x, M, K);
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let sum = 0;
      for (let b = 0; b < blocks; b++) {
        let dot = 0;
        for (let p = b * INT8_BLOCK; p < (b + 1) * INT8_BLOCK; p++) dot += qx[i * K + p]! * q[j * K + p]!;
        sum += xScales[i * blocks + b]! * scales[j * blocks + b]! * dot;
      }
      y[i * N + j] = sum;
    }
  }
}
