// A linear layer as the trainer sees it: frozen or trainable base weight W [out, in] (Hugging
// Face layout), optional bias, optional LoRA adapter (A [r, in], B [out, r], scale alpha / r):
//   y = x W^T + b + scale * (x A^T) B^T
// Every product goes through `gemm` (precision.ts): sgemm at fp32; at bf16 gemmBf16, reading the
// base weight's bf16 copy W16 where there is one. Inputs may come already rounded to bf16
// (Operand), so that products sharing an input round it once (see TrainModel's `round`).
//
// Adapted projections of one input (q, k and v of a layer's normed input; gate and up) run their
// LoRA products on A stacked: x [A_1; ..; A_G]^T is one product G ranks wide, where oneDNN runs
// 16 columns at a fraction of its speed, and the backward's (dyB)^T x and dx += dyB A are one product
// each too (linearGroupForward, linearGroupBackward).

import type { Gemm } from '../precision.js';
import type { PackedWeight } from './packed-weights.js';

/** A GEMM input: float32, or bf16 bits rounded from it once for several products (bf16 only). */
export type Operand = Float32Array | Uint16Array;

/** An input as the GEMMs read it: at bf16 rounded once into the buffer `slot`, at fp32 itself. */
export type Round = (x: Float32Array, slot: 'dy') => Operand;

/** No rounding ahead: each product rounds its own inputs. */
export const ROUND_IN_GEMM: Round = (x) => x;

/**
 * A LoRA layer's x A^T for the backward: columns col .. col + rank of `data`, rows `ld` apart (a
 * group's projections side by side in one buffer).
 */
export interface LoraInput {
  data: Float32Array;
  ld: number;
  col: number;
}

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
 * connection); u receives x A^T for the backward.
 */
export function linearForward(
  gemm: Gemm,
  y: Float32Array,
  x: Operand,
  T: number,
  L: TrainLinear,
  u: LoraInput | null,
  beta: 0 | 1 = 0,
): void {
  baseForward(gemm, y, x, T, L, beta);
  if (L.lora && u) {
    loraInput(gemm, u, x, T, L);
    loraOutput(gemm, y, T, L, u);
  }
}

/** y = x W^T (+ b), written or added: the projection without its adapter. */
function baseForward(gemm: Gemm, y: Float32Array, x: Operand, T: number, L: TrainLinear, beta: 0 | 1): void {
  const P = L.packed?.forward;
  if (!(P && L.packed!.gemm(false, T, L.outDim, L.inDim, 1, x, L.inDim, P, beta, y, L.outDim)))
    gemm(false, true, T, L.outDim, L.inDim, 1, x, L.inDim, L.W16 ?? L.W, L.inDim, beta, y, L.outDim);
  if (L.bias) addRowVector(y, L.bias, T, L.outDim);
}

/** y += scale u B^T: the adapter's output from its input u. */
function loraOutput(gemm: Gemm, y: Float32Array, T: number, L: TrainLinear, u: LoraInput): void {
  const { B, rank, scale } = L.lora!;
  gemm(false, true, T, L.outDim, rank, scale, u.data.subarray(u.col), u.ld, B, rank, 1, y, L.outDim);
}

/** u = x A^T alone: what the backward needs of a LoRA layer whose output is already known. */
export function loraInput(gemm: Gemm, u: LoraInput, x: Operand, T: number, L: TrainLinear): void {
  if (!L.lora) return;
  const { A, rank } = L.lora;
  gemm(false, true, T, rank, L.inDim, 1, x, L.inDim, A, L.inDim, 0, u.data.subarray(u.col), u.ld);
}

/**
 * The projections Ls of one input x, each with a LoRA adapter of one rank r: ys[i] = x W_i^T (+ b_i)
 * + scale u_i B_i^T, written, with u [T, G r] = x A^T for the G adapters' A stacked in `stacked`
 * [G r, in], u_i its columns i r .. (i + 1) r.
 */
export function linearGroupForward(
  gemm: Gemm,
  ys: readonly Float32Array[],
  x: Operand,
  T: number,
  Ls: readonly TrainLinear[],
  u: Float32Array,
  stacked: Operand,
): void {
  const { rank } = Ls[0]!.lora!,
    width = Ls.length * rank,
    inDim = Ls[0]!.inDim;
  gemm(false, true, T, width, inDim, 1, x, inDim, stacked, inDim, 0, u, width);
  Ls.forEach((L, i) => {
    baseForward(gemm, ys[i]!, x, T, L, 0);
    loraOutput(gemm, ys[i]!, T, L, { data: u, ld: width, col: i * rank });
  });
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
  u: LoraInput | null,
  T: number,
  L: TrainLinear,
  beta: 0 | 1,
  scratch: Float32Array,
  round: Round = ROUND_IN_GEMM,
  dwBeta: 0 | 1 = 1,
): void {
  const lora = L.lora && u ? L.lora : null;
  const dy = roundedDy(dyIn, (L.dW ? 1 : 0) + (dx ? 1 : 0) + (lora ? 2 : 0), round);
  baseBackward(gemm, dx, dyIn, dy, x, T, L, beta, dwBeta);
  if (!lora || !u) return;
  const { A, dA, rank, scale } = lora;
  const dyB = scratch.subarray(0, T * rank); // [T, r]
  loraOutputBackward(gemm, dy, u, T, L, dyB, rank);
  gemm(true, false, rank, L.inDim, T, scale, dyB, rank, x, L.inDim, 1, dA, L.inDim);
  if (dx) gemm(false, false, T, L.inDim, rank, scale, dyB, rank, A, L.inDim, 1, dx, L.inDim);
}

/**
 * The backward of linearGroupForward: dx written (beta 0) or added (beta 1), each B's gradient, and
 * the A's: (dyB)^T x and dx += scale dyB A with dyB [T, G r] (in `scratch`) the adapters' dy_i B_i
 * side by side, against `stacked` (the forward's) and into dStacked [G r, in], then added to each dA.
 */
export function linearGroupBackward(
  gemm: Gemm,
  dx: Float32Array | null,
  dys: readonly Operand[],
  x: Operand,
  u: Float32Array,
  T: number,
  Ls: readonly TrainLinear[],
  beta: 0 | 1,
  scratch: Float32Array,
  stacked: Operand,
  dStacked: Float32Array,
  round: Round = ROUND_IN_GEMM,
  dwBeta: 0 | 1 = 1,
): void {
  const { rank, scale } = Ls[0]!.lora!,
    width = Ls.length * rank,
    inDim = Ls[0]!.inDim;
  const dyB = scratch.subarray(0, T * width);
  Ls.forEach((L, i) => {
    const dy = roundedDy(dys[i]!, (L.dW ? 1 : 0) + (dx ? 1 : 0) + 2, round);
    baseBackward(gemm, dx, dys[i]!, dy, x, T, L, i === 0 ? beta : 1, dwBeta);
    loraOutputBackward(gemm, dy, { data: u, ld: width, col: i * rank }, T, L, dyB.subarray(i * rank), width);
  });
  gemm(true, false, width, inDim, T, scale, dyB, width, x, inDim, 0, dStacked, inDim);
  Ls.forEach((L, i) => {
    const { dA } = L.lora!,
      from = i * rank * inDim;
    for (let j = 0; j < dA.length; j++) dA[j] = dA[j]! + dStacked[from + j]!;
  });
  if (dx) gemm(false, false, T, inDim, width, scale, dyB, width, stacked, inDim, 1, dx, inDim);
}

/** dy as the products read it: rounded once (slot 'dy') when more than one reads a float32 dy. */
function roundedDy(dy: Operand, uses: number, round: Round): Operand {
  return uses > 1 && dy instanceof Float32Array ? round(dy, 'dy') : dy;
}

/** dW (+)= dy^T x, the bias's gradient, dx (+)= dy W: the projection's backward without its adapter. */
function baseBackward(
  gemm: Gemm,
  dx: Float32Array | null,
  dyIn: Operand,
  dy: Operand,
  x: Operand,
  T: number,
  L: TrainLinear,
  beta: 0 | 1,
  dwBeta: 0 | 1,
): void {
  if (L.dW) gemm(true, false, L.outDim, L.inDim, T, 1, dy, L.outDim, x, L.inDim, dwBeta, L.dW, L.inDim);
  if (L.dBias) {
    if (!(dyIn instanceof Float32Array)) throw new TypeError('a layer with a bias takes its dy as float32');
    for (let t = 0; t < T; t++) for (let o = 0; o < L.outDim; o++) L.dBias[o] = L.dBias[o]! + dyIn[t * L.outDim + o]!;
  }
  const P = L.packed?.backward;
  if (dx && !(P && L.packed!.gemm(false, T, L.inDim, L.outDim, 1, dy, L.outDim, P, beta, dx, L.inDim)))
    gemm(false, false, T, L.inDim, L.outDim, 1, dy, L.outDim, L.W16 ?? L.W, L.inDim, beta, dx, L.inDim);
}

/** dyB [T, r] (rows ld apart) = dy B and dB += scale dy^T u: the adapter's output side. */
function loraOutputBackward(
  gemm: Gemm,
  dy: Operand,
  u: LoraInput,
  T: number,
  L: TrainLinear,
  dyB: Float32Array,
  ld: number,
): void {
  const { B, dB, rank, scale } = L.lora!;
  gemm(false, false, T, rank, L.outDim, 1, dy, L.outDim, B, rank, 0, dyB, ld);
  gemm(true, false, L.outDim, rank, T, scale, dy, L.outDim, u.data.subarray(u.col), u.ld, 1, dB, rank);
}

function addRowVector(y: Float32Array, b: Float32Array, rows: number, cols: number): void {
  for (let t = 0; t < rows; t++) {
    const o = t * cols;
    for (let i = 0; i < cols; i++) y[o + i] = y[o + i]! + b[i]!;
  }
}
