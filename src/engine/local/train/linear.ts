// A linear layer as the trainer sees it: frozen or trainable base weight W [out, in] (Hugging
// Face layout), optional bias, optional LoRA adapter (A [r, in], B [out, r], scale alpha / r):
//   y = x W^T + b + scale * (x A^T) B^T
// Every product goes through `gemm` (precision.ts): sgemm at fp32; at bf16 gemmBf16, reading the
// base weight's bf16 copy W16 where there is one. Inputs may come already rounded to bf16
// (Operand), so that products sharing an input round it once (see TrainModel's `round`).

import type { Gemm } from '../precision.js';
import type { PackedWeight } from './packed-weights.js';

/** A GEMM input: float32, or bf16 bits rounded from it once for several products (bf16 only). */
export type Operand = Float32Array | Uint16Array;

/** An input as the GEMMs read it: at bf16 rounded once into the buffer `slot`, at fp32 itself. */
export type Round = (x: Float32Array, slot: 'dy') => Operand;

/** No rounding ahead: each product rounds its own inputs. */
export const ROUND_IN_GEMM: Round = (x) => x;

export interface LoraPair {
  A: Float32Array;
  B: Float32Array;
  dA: Float32Array;
  dB: Float32Array;
  rank: number;
  scale: number;
}

export interface TrainLinear {
  inDim: number;
  outDim: number;
  W: Float32Array;
  /** W rounded to bf16 once (training and serving at bf16), read instead of W by the GEMMs. */
  W16: Uint16Array | null;
  /** W16 in oneDNN's layout (a frozen weight, packed-weights.ts), read instead of W16 where it can be. */
  packed: PackedWeight | null;
  bias: Float32Array | null;
  /** Gradient buffers when the base weight (and bias) train; null when frozen. */
  dW: Float32Array | null;
  dBias: Float32Array | null;
  lora: LoraPair | null;
}

/**
 * y[T, out] = x[T, in] W^T (+ b) (+ LoRA), written (beta 0) or added (beta 1, a residual
 * connection); u[T, r] receives x A^T for the backward.
 */
export function linearForward(
  gemm: Gemm,
  y: Float32Array,
  x: Operand,
  T: number,
  L: TrainLinear,
  u: Float32Array | null,
  beta: 0 | 1 = 0,
): void {
  const P = L.packed?.forward;
  if (!(P && L.packed!.gemm(false, T, L.outDim, L.inDim, 1, x, L.inDim, P, beta, y, L.outDim)))
    gemm(false, true, T, L.outDim, L.inDim, 1, x, L.inDim, L.W16 ?? L.W, L.inDim, beta, y, L.outDim);
  if (L.bias) addRowVector(y, L.bias, T, L.outDim);
  if (L.lora && u) {
    loraInput(gemm, u, x, T, L);
    const { B, rank, scale } = L.lora;
    gemm(false, true, T, L.outDim, rank, scale, u, rank, B, rank, 1, y, L.outDim);
  }
}

/** u[T, r] = x A^T alone: what the backward needs of a LoRA layer whose output is already known. */
export function loraInput(gemm: Gemm, u: Float32Array, x: Operand, T: number, L: TrainLinear): void {
  if (!L.lora) return;
  const { A, rank } = L.lora;
  gemm(false, true, T, rank, L.inDim, 1, x, L.inDim, A, L.inDim, 0, u, rank);
}

/**
 * Accumulates parameter gradients and writes (beta 0) or adds (beta 1) dx[T, in].
 * dx = dy W (+ scale (dy B) A); dW += dy^T x (dW = dy^T x with dwBeta 0, when dW is known to
 * hold zeros: the same values, without reading it); dB += scale dy^T u; dA += scale (dy B)^T x.
 * dy goes into up to three products, so `round` rounds it once (slot 'dy'); a dy given as bf16
 * bits was rounded by the caller (a layer with a bias needs it as float32).
 */
export function linearBackward(
  gemm: Gemm,
  dx: Float32Array | null,
  dyIn: Operand,
  x: Operand,
  u: Float32Array | null,
  T: number,
  L: TrainLinear,
  beta: 0 | 1,
  scratch: Float32Array,
  round: Round = ROUND_IN_GEMM,
  dwBeta: 0 | 1 = 1,
): void {
  const uses = (L.dW ? 1 : 0) + (dx ? 1 : 0) + (L.lora && u ? 2 : 0);
  const dy = uses > 1 && dyIn instanceof Float32Array ? round(dyIn, 'dy') : dyIn;
  if (L.dW) gemm(true, false, L.outDim, L.inDim, T, 1, dy, L.outDim, x, L.inDim, dwBeta, L.dW, L.inDim);
  if (L.dBias) {
    if (!(dyIn instanceof Float32Array)) throw new TypeError('a layer with a bias takes its dy as float32');
    for (let t = 0; t < T; t++) for (let o = 0; o < L.outDim; o++) L.dBias[o] = L.dBias[o]! + dyIn[t * L.outDim + o]!;
  }
  const P = L.packed?.backward;
  if (dx && !(P && L.packed!.gemm(false, T, L.inDim, L.outDim, 1, dy, L.outDim, P, beta, dx, L.inDim)))
    gemm(false, false, T, L.inDim, L.outDim, 1, dy, L.outDim, L.W16 ?? L.W, L.inDim, beta, dx, L.inDim);
  if (L.lora && u) {
    const { A, B, dA, dB, rank, scale } = L.lora;
    const dyB = scratch.subarray(0, T * rank); // [T, r]
    gemm(false, false, T, rank, L.outDim, 1, dy, L.outDim, B, rank, 0, dyB, rank);
    gemm(true, false, L.outDim, rank, T, scale, dy, L.outDim, u, rank, 1, dB, rank);
    gemm(true, false, rank, L.inDim, T, scale, dyB, rank, x, L.inDim, 1, dA, L.inDim);
    if (dx) gemm(false, false, T, L.inDim, rank, scale, dyB, rank, A, L.inDim, 1, dx, L.inDim);
  }
}

function addRowVector(y: Float32Array, b: Float32Array, rows: number, cols: number): void {
  for (let t = 0; t < rows; t++) {
    const o = t * cols;
    for (let i = 0; i < cols; i++) y[o + i] = y[o + i]! + b[i]!;
  }
}
