// AdamW over one flat parameter buffer and its gradient buffer (the ParamStore of full
// fine-tuning, or a LoRA adapter's data/grads), with the extras a trainer needs around the
// kernel: a weight-decay mask per segment, linear warm-up to a constant learning rate,
// global-norm gradient clipping, gradient accumulation and state for checkpoints.
//
// One step: grads *= gradScale; norm = ||grads||; grads *= min(1, maxGradNorm / (norm + 1e-6));
// step += 1; then kernels.adamw on each segment, with weight decay where the segment takes it.

import type { Kernels } from '../kernels/kernels.js';
import type { TensorSpec } from '../model/weights.js';
import type { Lora } from './lora.js';

export interface AdamWConfig {
  /** Peak learning rate, held constant after the warm-up. */
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  /** Decoupled weight decay, applied only to segments with decay = true. */
  weightDecay: number;
  /** Steps of linear warm-up: step s (1-based) uses lr * min(1, s / warmupSteps). */
  warmupSteps: number;
  /** Clip the global gradient norm to this; null turns clipping off. */
  maxGradNorm: number | null;
}

/** The slime scripts' values (reference-system.md 6.9), clipping at 1.0 as slime does. */
export const DEFAULT_ADAMW: AdamWConfig = {
  lr: 1e-5,
  beta1: 0.9,
  beta2: 0.98,
  eps: 1e-8,
  weightDecay: 0.1,
  warmupSteps: 0,
  maxGradNorm: 1,
};

/** A contiguous run of the buffers that the optimizer updates, with or without weight decay. */
export interface ParamSegment {
  offset: number;
  size: number;
  decay: boolean;
}

export interface OptimizerState {
  /** First and second moments, shaped like the parameters. */
  m: Float32Array;
  v: Float32Array;
  /** Optimizer steps taken; the bias corrections continue from here. */
  step: number;
  /** The step the moments were last reset at (a rollback); the bias corrections count from it. Default 0. */
  momentsFrom?: number;
}

export interface StepResult {
  /** Global gradient norm after gradScale, before clipping (NaN or Infinity when skipped). */
  gradNorm: number;
  /** false when the gradient was not finite: nothing changed, the step is not counted. */
  applied: boolean;
  /** Learning rate used. */
  lr: number;
  /** Steps taken after this one. */
  step: number;
}

/**
 * Segments for a ParamStore: matrices and embeddings decay, norms and biases do not (they set
 * scales and offsets, and shrinking them toward 0 only hurts). Neighbours with the same flag
 * merge, so a model costs a handful of kernel calls per step instead of one per tensor.
 */
export function paramSegments(specs: readonly TensorSpec[]): ParamSegment[] {
  const segments: ParamSegment[] = [];
  for (const s of specs) {
    const decay = s.kind === 'matrix' || s.kind === 'embedding';
    const last = segments[segments.length - 1];
    if (last && last.decay === decay && last.offset + last.size === s.offset) last.size += s.size;
    else segments.push({ offset: s.offset, size: s.size, decay });
  }
  return segments;
}

/** A LoRA adapter is all matrices (A and B), and like PEFT under the HF Trainer they all decay. */
export function loraSegments(lora: Lora): ParamSegment[] {
  return [{ offset: 0, size: lora.data.length, decay: true }];
}

export class AdamW {
  readonly m: Float32Array;
  readonly v: Float32Array;
  private stepCount: number;
  private momentsFrom: number;

  constructor(
    private readonly params: Float32Array,
    private readonly grads: Float32Array,
    private readonly segments: readonly ParamSegment[],
    readonly cfg: AdamWConfig,
    private readonly kernels: Kernels,
    state?: OptimizerState,
  ) {
    if (grads.length !== params.length)
      throw new RangeError(`AdamW: ${params.length} parameters but ${grads.length} gradients`);
    let end = 0;
    for (const [i, s] of segments.entries()) {
      if (
        !(
          Number.isInteger(s.offset) &&
          Number.isInteger(s.size) &&
          s.size >= 0 &&
          s.offset >= end &&
          s.offset + s.size <= params.length
        )
      ) {
        throw new RangeError(
          `AdamW: segment ${i} [${s.offset}, ${s.offset + s.size}) must be ascending, non-overlapping and inside ${params.length} parameters (previous ended at ${end})`,
        );
      }
      end = s.offset + s.size;
    }
    if (
      !(
        cfg.lr >= 0 &&
        cfg.beta1 >= 0 &&
        cfg.beta1 < 1 &&
        cfg.beta2 >= 0 &&
        cfg.beta2 < 1 &&
        cfg.eps > 0 &&
        cfg.weightDecay >= 0 &&
        cfg.warmupSteps >= 0
      )
    ) {
      throw new RangeError(`AdamW: invalid config ${JSON.stringify(cfg)}`);
    }
    if (cfg.maxGradNorm !== null && !(cfg.maxGradNorm > 0))
      throw new RangeError(`AdamW: maxGradNorm must be positive or null, got ${cfg.maxGradNorm}`);
    if (state) {
      if (state.m.length !== params.length || state.v.length !== params.length) {
        throw new RangeError(
          `AdamW: saved moments hold ${state.m.length} and ${state.v.length} values, the parameters ${params.length}`,
        );
      }
      if (!(Number.isInteger(state.step) && state.step >= 0))
        throw new RangeError(`AdamW: saved step must be a non-negative integer, got ${state.step}`);
      const from = state.momentsFrom ?? 0;
      if (!(Number.isInteger(from) && from >= 0 && from <= state.step))
        throw new RangeError(`AdamW: momentsFrom must be an integer in [0, ${state.step}], got ${from}`);
    }
    this.m = state?.m ?? new Float32Array(params.length);
    this.v = state?.v ?? new Float32Array(params.length);
    this.stepCount = state?.step ?? 0;
    this.momentsFrom = state?.momentsFrom ?? 0;
  }

  /** Optimizer steps taken. */
  get steps(): number {
    return this.stepCount;
  }

  /** The moments and step count, for a checkpoint (live views, not copies). */
  state(): OptimizerState {
    return { m: this.m, v: this.v, step: this.stepCount, momentsFrom: this.momentsFrom };
  }

  /**
   * Forgets the moments (the weights were replaced, by a rollback): the next step is like a first
   * one, bias corrections counted from here, while the step count (and the warmup) go on.
   */
  resetMoments(): void {
    this.m.fill(0);
    this.v.fill(0);
    this.momentsFrom = this.stepCount;
  }

  /** Learning rate of 1-based step `step`. */
  lrAt(step: number): number {
    const { lr, warmupSteps } = this.cfg;
    return warmupSteps > 0 ? lr * Math.min(1, step / warmupSteps) : lr;
  }

  /** Clears the gradients before accumulating the next batch (backward adds into them). */
  zeroGrad(): void {
    for (const s of this.segments) this.grads.fill(0, s.offset, s.offset + s.size);
  }

  /**
   * One update from the accumulated gradients. gradScale multiplies them first (1 / micro-batches
   * when each micro-batch loss was a mean over its own samples), then clipping. One pass per
   * segment reads each gradient once, updates the weights and moments, writes the new weights'
   * bf16 bits into `bf16` (a copy laid out like the parameters, when given) and clears the
   * gradients. A step not applied (a non-finite gradient) leaves them as they were: call zeroGrad.
   */
  step(gradScale = 1, bf16: Uint16Array | null = null): StepResult {
    const { params, grads, m, v, cfg } = this;
    let sumSq = 0;
    for (const s of this.segments)
      sumSq += this.kernels.sumSquares(grads.subarray(s.offset, s.offset + s.size), s.size);
    const gradNorm = Math.abs(gradScale) * Math.sqrt(sumSq);
    if (!Number.isFinite(gradNorm)) return { gradNorm, applied: false, lr: 0, step: this.stepCount };
    // Same clip coefficient as torch.nn.utils.clip_grad_norm_.
    const clip = cfg.maxGradNorm === null ? 1 : Math.min(1, cfg.maxGradNorm / (gradNorm + 1e-6));
    const factor = gradScale * clip;
    const step = ++this.stepCount;
    const lr = this.lrAt(step);
    const bc1 = 1 - cfg.beta1 ** (step - this.momentsFrom),
      bc2 = 1 - cfg.beta2 ** (step - this.momentsFrom);
    for (const s of this.segments) {
      if (s.size === 0) continue;
      const end = s.offset + s.size;
      this.kernels.adamw(
        params.subarray(s.offset, end),
        grads.subarray(s.offset, end),
        m.subarray(s.offset, end),
        v.subarray(s.offset, end),
        s.size,
        lr,
        cfg.beta1,
        cfg.beta2,
        cfg.eps,
        s.decay ? cfg.weightDecay : 0,
        bc1,
        bc2,
        factor,
        bf16?.subarray(s.offset, end) ?? null,
        true,
      );
    }
    return { gradNorm, applied: true, lr, step };
  }
}
