// The memory of one training step: the activation and gradient buffers TrainModel allocates
// (the tape, the backward's buffers, the attention scratch, the logits rows), as a pure function
// of the model's shape and the step's size, so that TrainModel can choose per forward whether to
// recompute layers (checkpointing), and a caller can size its samples before training. Weights,
// their gradients and the optimizer's moments are not included: they do not grow with a step.
//
// Every term is linear in the tokens: attention never holds an n x n matrix (train/attention.ts),
// and with the LM head chunked the vocab-wide logits take a constant HEAD_CHUNK_ROWS rows.

import type { ModelConfig } from '../model/config.js';
import { attentionScratchSize } from './attention.js';

export interface StepSize {
  /** Tokens in the forward (all packed sequences). */
  tokens: number;
  /** Completion tokens: the rows that get logits (R x vocab floats, or one chunk of rows at a time). */
  completionTokens: number;
  /** LoRA rank; 0 for full fine-tuning. */
  loraRank: number;
  /** LoRA-adapted projections per layer (default all seven); ignored without LoRA. */
  loraTargets?: number;
  /**
   * Adapted projections of one input whose LoRA products run stacked (q, k, v; gate, up): the
   * largest group's size, 1 for none; default 3 with seven targets, else 1. Ignored without LoRA.
   */
  loraGroup?: number;
  /** Recompute each layer in the backward, keeping only its input (see TrainModel). */
  checkpoint: boolean;
  /** With checkpoint: keep each layer's attention output and lse too (the recomputation skips the attention). */
  keepAttention?: boolean;
  /** Longest packed sequence, which sizes the attention scratch; default `tokens` (one sequence). */
  longestSequence?: number;
  /** Threads running the fused bf16 attention, each with its own buffers (fusedAttentionBytes); default 0. */
  attentionThreads?: number;
  /**
   * Products at bf16: the layer inputs that only GEMMs read are kept as bf16 bits, and two more
   * buffers hold inputs rounded once for several products (TrainModel).
   */
  bf16?: boolean;
  /**
   * With the LM head chunked: the rows of logits computed at a time, recomputed in the backward
   * (see TrainModel). Undefined: every completion row's logits are kept from forward to backward.
   */
  headChunkRows?: number;
}

/**
 * Logits rows per chunk of a chunked LM head. Measured at the Qwen3-0.6B shape (D 1024, vocab
 * 151936, two threads): the head's forward GEMM runs at ~42 GFLOP/s with 128 rows, ~55 with 256,
 * ~60 with 512 and 1024; a 512-row chunk holds 311 MB of logits.
 */
export const HEAD_CHUNK_ROWS = 512;

/**
 * Floats one layer's attention output and lse take for T tokens: at bf16 the output (read only by
 * GEMMs and, widened, by the backward's dO . O) as bf16 bits, two to a float.
 */
function attentionFloats(cfg: ModelConfig, T: number, bf16: boolean): number {
  const out = T * cfg.numHeads * cfg.headDim;
  return (bf16 ? Math.ceil(out / 2) : out) + T * cfg.numHeads;
}

/**
 * Floats one layer's tape takes for T tokens, its input x and its attention's output and lse
 * excluded: h1, q, k, v, xMid, h2, gate, up, act, LoRA's x A^T. At bf16, h1, h2 and act (GEMM
 * inputs only) are kept as bf16 bits, two to a float.
 */
function layerFloats(cfg: ModelConfig, T: number, loraRank: number, loraTargets: number, bf16: boolean): number {
  const D = cfg.hiddenSize,
    F = cfg.intermediateSize,
    H = cfg.numHeads;
  const qDim = H * cfg.headDim,
    kvDim = cfg.numKvHeads * cfg.headDim;
  const qkNorm = cfg.qkNorm ? qDim + kvDim : 0; // q and k before their norms
  const inputs = bf16 ? 2 * Math.ceil((T * D) / 2) + Math.ceil((T * F) / 2) : T * (2 * D + F);
  return T * (qkNorm + qDim + 2 * kvDim + D + 2 * F + loraTargets * loraRank) + inputs;
}

/**
 * Floats of the backward's own buffers for T tokens (d.x, d.h, MLP, attention and LoRA gradients:
 * dy B of a group's adapters side by side); at bf16 the gate's and up's output gradients are bf16
 * bits, two to a float.
 */
function backwardFloats(cfg: ModelConfig, T: number, loraRank: number, loraGroup: number, bf16: boolean): number {
  const D = cfg.hiddenSize,
    F = cfg.intermediateSize;
  const qDim = cfg.numHeads * cfg.headDim,
    kvDim = cfg.numKvHeads * cfg.headDim;
  const qkNorm = cfg.qkNorm ? qDim + kvDim : 0;
  const mlp = bf16 ? 2 * Math.ceil((T * F) / 2) : 2 * T * F;
  return T * (2 * D + F + 2 * qDim + 2 * kvDim + qkNorm + Math.max(1, loraRank * loraGroup)) + mlp;
}

/** Bytes of TrainModel's buffers for one forward and backward of this size. */
export function trainStepBytes(cfg: ModelConfig, step: StepSize): number {
  const T = step.tokens,
    R = step.completionTokens,
    D = cfg.hiddenSize;
  const targets = step.loraRank > 0 ? (step.loraTargets ?? 7) : 0;
  const bf16 = step.bf16 ?? false;
  const group = targets > 0 ? (step.loraGroup ?? (targets === 7 ? 3 : 1)) : 1;
  // A group's A factors stacked (at bf16 rounded, as bits) and their gradient; every group reads
  // the hidden size.
  const stackedA = group > 1 ? group * step.loraRank * D : 0;
  const loraStack = group > 1 ? (bf16 ? Math.ceil(stackedA / 2) : stackedA) + stackedA : 0;
  const layer = layerFloats(cfg, T, step.loraRank, targets, bf16);
  const attention = attentionFloats(cfg, T, bf16);
  // Every layer's input and the last layer's output; then one layer's tape, or all of them; the
  // attention's output and lse of one layer, or of each where every layer's tape or they are kept.
  const keptLayers = step.checkpoint ? 1 : cfg.numLayers;
  const keptAttention = !step.checkpoint || step.keepAttention ? cfg.numLayers : 1;
  const tape = (cfg.numLayers + 1) * T * D + keptLayers * layer + keptAttention * attention;
  // The final norm's input and output and the logits, on the completion rows only (the logits of
  // one chunk of them when chunked); the backward adds two R x D buffers and writes the logits'
  // gradient over the logits.
  const logitRows = Math.min(R, step.headChunkRows ?? R);
  const head = R * 4 * D + logitRows * cfg.vocabSize;
  const backward = backwardFloats(cfg, T, step.loraRank, group, bf16) + loraStack;
  const longest = step.longestSequence ?? T;
  const scratch = attentionScratchSize(longest);
  const fused = (step.attentionThreads ?? 0) * fusedAttentionBytes(cfg, longest);
  // One slot of 2-byte values (half a float each), 'dy', for the widest output gradient kept as
  // floats (the residual stream's or q's; the MLP's are bf16 already), also holding the LM head's
  // logit gradient (one chunk's rows when chunked).
  const widest = Math.max(T * D, T * cfg.numHeads * cfg.headDim);
  const rounded = bf16 ? Math.ceil(Math.max(widest, logitRows * cfg.vocabSize) / 2) : 0;
  return 4 * (tape + head + backward + scratch + rounded) + fused;
}

/**
 * Bytes one thread of the fused bf16 attention keeps for sequences of up to `longest` tokens
 * (native/src/train_attention.c): bf16 copies of K and V, of Q and dO for each stacked query head,
 * and the fp32 sums of dK and dV (12 + 4 x stacked bytes per head dimension and row, rows padded to
 * its 64-row tiles); two fp32 and two bf16 blocks of 64 score rows per stacked head (12 bytes per
 * column, columns padded to its 512-column chunks); one such block of dQ; each stacked row's
 * dO . O (4 bytes per stacked head and row).
 */
export function fusedAttentionBytes(cfg: ModelConfig, longest: number): number {
  const tile = 64,
    rows = Math.ceil(longest / tile) * tile,
    columns = Math.ceil(longest / 512) * 512,
    stack = stackedHeads(cfg.numHeads / cfg.numKvHeads);
  return (
    rows * (12 + 4 * stack) * cfg.headDim +
    12 * tile * stack * columns +
    4 * tile * stack * cfg.headDim +
    4 * stack * rows
  );
}

/** Query heads of one KV head that the fused attention stacks into one block: the largest divisor of the group up to 4. */
function stackedHeads(group: number): number {
  for (let s = 4; s > 1; s--) if (group % s === 0) return s;
  return 1;
}

/**
 * Bytes of a bf16 copy of `values` weights (precision bf16): the frozen base's, made once, or
 * a full fine-tuning's own, refreshed after each step. Not part of a step: it does not grow with
 * the tokens, so it belongs with the weights and the learner's state (memory-plan.ts).
 */
export function bf16CopyBytes(values: number): number {
  return 2 * values;
}

/**
 * Bytes of the frozen weights' packed copies (LearnerConfig.packFrozenWeights): every projection of
 * every layer and the LM head, in bf16, once for the forward products and once for the input
 * gradients, each padded as oneDNN's bf16 matmul lays weights out (the inner dimension in blocks of
 * 32, the outer in blocks of 64; no padding at the 0.6B shapes), each after a 64-byte header.
 */
export function packedWeightBytes(cfg: ModelConfig): number {
  const D = cfg.hiddenSize,
    q = cfg.numHeads * cfg.headDim,
    kv = cfg.numKvHeads * cfg.headDim;
  const up = (n: number, block: number) => Math.ceil(n / block) * block;
  // A weight [out, in] read as x W^T (inner in, outer out) and as dy W (inner out, outer in), each
  // after packBf16's 64-byte header.
  const both = (out: number, inDim: number) =>
    bf16CopyBytes(up(inDim, 32) * up(out, 64) + up(out, 32) * up(inDim, 64)) + 2 * 64;
  const perLayer =
    both(q, D) + 2 * both(kv, D) + both(D, q) + 2 * both(cfg.intermediateSize, D) + both(D, cfg.intermediateSize);
  return cfg.numLayers * perLayer + both(cfg.vocabSize, D);
}

export interface SampleLimitOptions {
  /** LoRA rank; 0 for full fine-tuning. */
  loraRank: number;
  loraTargets?: number;
  /**
   * The share of a sample's tokens that are completion; default 0.25. With the LM head chunked
   * each completion token costs only 4 x hidden floats more than a prompt token, so a sample
   * with a longer completion needs only slightly more than the budget.
   */
  completionFraction?: number;
  /** Rows per chunk of the LM head (LearnerConfig.headChunkRows); default HEAD_CHUNK_ROWS. */
  headChunkRows?: number;
}

/**
 * The most tokens one training sample (alone in its micro-batch, layers recomputed, LM head
 * chunked) may have for its step to fit `budgetBytes`, capped at the model's context; 0 when not
 * even 2 fit.
 */
export function maxTrainTokens(cfg: ModelConfig, budgetBytes: number, opts: SampleLimitOptions): number {
  const fraction = opts.completionFraction ?? 0.25;
  const fits = (tokens: number) =>
    trainStepBytes(cfg, {
      tokens,
      completionTokens: Math.max(1, Math.ceil(fraction * tokens)),
      loraRank: opts.loraRank,
      ...(opts.loraTargets !== undefined ? { loraTargets: opts.loraTargets } : {}),
      checkpoint: true,
      headChunkRows: opts.headChunkRows ?? HEAD_CHUNK_ROWS,
    }) <= budgetBytes;
  // The bytes grow with the tokens, so the largest fitting length is found by bisection.
  let lo = 1,
    hi = cfg.maxPositionEmbeddings;
  if (fits(hi)) return hi;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid;
  }
  return lo >= 2 && fits(lo) ? lo : 0;
}
