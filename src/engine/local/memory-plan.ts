// How `serve` shares the machine's memory between the embedded engine's parts, decided once at
// startup and printed: the weights (one copy, shared by the sampler and the learner), the
// learner's own state, the prefix cache's byte budget, an allowance for the runtime, and what is
// left for one training step's activations. The longest training sample follows from that last
// share (train/memory.ts), so a long conversation is skipped as `too_long` instead of taking the
// machine down. Pure: every input is a parameter.

import type { KernelInfo } from './kernels/kernels.js';
import type { ModelConfig } from './model/config.js';
import { defaultKvCacheBytes, kvDtypeOf } from './kv-cache-budget.js';
import { loraValueCount } from './train/lora.js';
import { bf16CopyBytes, HEAD_CHUNK_ROWS, maxTrainTokens, packedWeightBytes, trainStepBytes } from './train/memory.js';
import type { Precision } from './precision.js';

/** Of the machine's memory, the share openclaw-rl plans for; the rest is the system's and other programs'. */
export const USABLE_MEMORY_SHARE = 0.75;
/** Node itself, the three threads' JavaScript heaps, the tokenizers, SQLite's cache and requests in flight. */
export const RUNTIME_ALLOWANCE_BYTES = 2 ** 30;
/**
 * Bytes per weight of the int8 copies (precision int8): a value, and a 4-byte scale per 32. Every
 * parameter is counted, an upper bound (norms and an untied embedding have none), so at int8 the
 * weights take 4 + 2 + 1.125 = 7.125 bytes per parameter: fp32, bf16 for prefill, int8 for decode.
 */
export const INT8_COPY_BYTES_PER_WEIGHT = 1 + 4 / 32;
/** The completion share of a training sample that the bound assumes (agent turns: long prompts, short answers). */
export const COMPLETION_FRACTION = 0.25;

export interface MemoryPlanInput {
  cfg: ModelConfig;
  totalBytes: number;
  /** Parameters of the model (WorkerInfo.parameters), held as float32. */
  parameters: number;
  /** LoRA rank; 0 for full fine-tuning. */
  loraRank: number;
  /** Trainable values (LoRA's A and B, or every parameter) when learning; 0 without learning. */
  trainableValues: number;
  /** --kv-cache-mb in bytes; undefined for the default. */
  kvCacheBytes?: number;
  /** --max-train-tokens; undefined to derive it. */
  maxTrainTokens?: number;
  /** The engine's resolved precision; default fp32. */
  precision?: Precision;
  /** The kernels can pack frozen weights (native, oneDNN, bf16 instructions: packed-weights.ts). */
  packable?: boolean;
}

export interface MemoryPlan {
  totalBytes: number;
  precision: Precision;
  /**
   * float32 weights, plus at bf16 and int8 their bf16 copy (made by the sampler, shared with the
   * learner), plus at int8 the int8 copies.
   */
  weightsBytes: number;
  /** The trainable copy, its gradients and AdamW's two moments; at bf16 with full fine-tuning, its bf16 copy. */
  learnerStateBytes: number;
  kvCacheBytes: number;
  runtimeAllowanceBytes: number;
  /** What one training step's buffers may take (LearnerConfig.activationBudgetBytes). */
  activationBudgetBytes: number;
  maxTrainTokens: number;
  /** The most one step takes: a sample of maxTrainTokens tokens, layers recomputed, the LM head in chunks. */
  trainBytes: number;
  /** maxTrainTokens was given and its step needs more than the budget. */
  overBudget: boolean;
  /**
   * The learner's packed copies of the frozen base (LoRA at bf16, packable kernels): 1.12x faster
   * LoRA steps for their bytes, taken only where they shorten no training sample; else 0.
   */
  packedWeightsBytes: number;
}

/** MemoryPlanInput.trainableValues for a learner: LoRA on all seven projections at loraRank, or (0) every parameter. */
export function trainableValuesOf(cfg: ModelConfig, parameters: number, loraRank: number): number {
  return loraRank === 0 ? parameters : loraValueCount(cfg, loraRank);
}

/** MemoryPlanInput.packable: the learner can pack frozen weights on oneDNN with bf16 instructions. */
export function packableOn(kernels: KernelInfo): boolean {
  return kernels.gemm === 'onednn' && kernels.bf16Instructions;
}

export function memoryPlan(input: MemoryPlanInput): MemoryPlan {
  const { cfg, totalBytes, loraRank } = input;
  const precision = input.precision ?? 'fp32';
  // Behind an int8 engine the learner trains at bf16 (precision.ts).
  const bf16 = precision !== 'fp32';
  const int8Bytes = precision === 'int8' ? INT8_COPY_BYTES_PER_WEIGHT * input.parameters : 0;
  const weightsBytes = 4 * input.parameters + (bf16 ? bf16CopyBytes(input.parameters) : 0) + int8Bytes;
  const fullFineTuning = loraRank === 0 && input.trainableValues > 0;
  const learnerStateBytes =
    4 * 4 * input.trainableValues + (bf16 && fullFineTuning ? bf16CopyBytes(input.trainableValues) : 0);
  const kvCacheBytes = input.kvCacheBytes ?? defaultKvCacheBytes(cfg, kvDtypeOf(precision), totalBytes);
  const fixed = weightsBytes + learnerStateBytes + kvCacheBytes + RUNTIME_ALLOWANCE_BYTES;
  const unpackedBudget = Math.max(0, Math.floor(USABLE_MEMORY_SHARE * totalBytes - fixed));
  const limitOptions = { loraRank, completionFraction: COMPLETION_FRACTION };
  const derived = maxTrainTokens(cfg, unpackedBudget, limitOptions);
  const tokens = input.maxTrainTokens ?? derived;
  // Packed weights are a speed-up, never worth a shorter longest sample.
  const packCandidate =
    input.packable && bf16 && loraRank > 0 && input.trainableValues > 0 ? packedWeightBytes(cfg) : 0;
  const withPacked = unpackedBudget - packCandidate;
  const packs =
    packCandidate > 0 &&
    withPacked > 0 &&
    (input.maxTrainTokens !== undefined
      ? stepBytes(cfg, tokens, loraRank) <= withPacked
      : maxTrainTokens(cfg, withPacked, limitOptions) >= derived);
  const packedWeightsBytes = packs ? packCandidate : 0;
  const activationBudgetBytes = unpackedBudget - packedWeightsBytes;
  const trainBytes = stepBytes(cfg, tokens, loraRank);
  return {
    totalBytes,
    precision,
    weightsBytes,
    learnerStateBytes,
    kvCacheBytes,
    runtimeAllowanceBytes: RUNTIME_ALLOWANCE_BYTES,
    activationBudgetBytes,
    maxTrainTokens: tokens,
    trainBytes,
    overBudget: trainBytes > activationBudgetBytes,
    packedWeightsBytes,
  };
}

function stepBytes(cfg: ModelConfig, tokens: number, loraRank: number): number {
  if (tokens < 2) return 0;
  return trainStepBytes(cfg, {
    tokens,
    completionTokens: Math.ceil(COMPLETION_FRACTION * tokens),
    loraRank,
    checkpoint: true,
    headChunkRows: HEAD_CHUNK_ROWS,
  });
}

/**
 * Whether `train` (a process that only trains, at bf16 with LoRA) can afford the packed copies:
 * the float32 weights, their bf16 copy, the packed copies, the runtime and the step's activation
 * budget all within the usable share of the machine's memory.
 */
export function trainingAffordsPacking(
  cfg: ModelConfig,
  parameters: number,
  activationBudgetBytes: number,
  totalBytes: number,
): boolean {
  const needed =
    4 * parameters +
    bf16CopyBytes(parameters) +
    packedWeightBytes(cfg) +
    RUNTIME_ALLOWANCE_BYTES +
    activationBudgetBytes;
  return needed <= USABLE_MEMORY_SHARE * totalBytes;
}

/** One line for the startup banner and log. */
export function describeMemoryPlan(p: MemoryPlan): string {
  const mb = (b: number) => `${Math.round(b / 2 ** 20)} MB`;
  return (
    `weights ${mb(p.weightsBytes)}${p.packedWeightsBytes > 0 ? ` (+ ${mb(p.packedWeightsBytes)} packed for training)` : ''}, ` +
    `prefix cache ${mb(p.kvCacheBytes)}, training samples up to ${p.maxTrainTokens} tokens` +
    ` (a step takes up to ${mb(p.trainBytes)} of ${mb(p.activationBudgetBytes)} for activations${p.overBudget ? ': OVER BUDGET' : ''})`
  );
}
