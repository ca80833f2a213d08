// The learner's synchronous core: one policy (a LoRA adapter over the frozen base, or a full
// copy of the weights) and its optimizer, with the Learner contract's operations. It runs inside
// the learner worker (runtime/learner-worker.ts); LocalLearner is its async face. The training
// algorithm that calls them (the anchor, epochs, mini-batches) is learn/ppo.ts.
//
//   forwardBackward(samples, loss, B):  for each micro-batch (memory): forward, loss / B, backward
//   optimStep():                        clip, AdamW, clear the gradients

import type { Kernels } from '../kernels/kernels.js';
import type { ModelConfig } from '../model/config.js';
import { allocateParams, type ParamStore } from '../model/weights.js';
import { type Bf16Params, bf16ParamsOf, refreshBf16, type TrainPrecision } from '../precision.js';
import { policyLoss, topKDistillationLoss } from './losses.js';
import { Lora, type LoraSpec } from './lora.js';
import { TrainModel, type TrainModelOptions } from './model.js';
import { PackedWeights } from './packed-weights.js';
import type { TrainSequence } from './packing.js';
import {
  checkTrainingSample,
  type ForwardBackwardResult,
  type LossSpec,
  type OptimStepResult,
  type TrainingSample,
} from '../../learner.js';
import {
  AdamW,
  DEFAULT_ADAMW,
  loraSegments,
  paramSegments,
  type AdamWConfig,
  type OptimizerState,
} from './optimizer.js';

export interface LearnerConfig {
  /** LoRA over the frozen base, or full fine-tuning of every weight. */
  mode: { kind: 'lora'; spec: LoraSpec } | { kind: 'full' };
  optimizer: AdamWConfig;
  /** Most tokens in one forward/backward (bounds memory); mini-batches are split to fit. */
  microBatchTokens: number;
  /**
   * Bytes one forward/backward's activation and gradient buffers may take (train/memory.ts):
   * a micro-batch whose full tape would exceed it computes the LM head's logits in chunks of
   * rows and/or recomputes layers in the backward (slower, memory linear in tokens with a small
   * constant), whichever adds the least work and fits; shorter ones keep the whole tape.
   */
  activationBudgetBytes: number;
  /** Logits rows per chunk when the LM head is chunked to fit the budget; default HEAD_CHUNK_ROWS (512). */
  headChunkRows?: number;
  /**
   * fp32 (the default, the exact path) or bf16: every GEMM with bf16-rounded inputs and fp32
   * sums, as GPUs train under autocast; weights, gradients and AdamW's moments stay fp32. Not int8,
   * a serving precision only (a config read from JSON saying so is refused).
   */
  precision?: TrainPrecision;
  /**
   * At bf16 with LoRA: also copy the frozen base's bf16 weights into oneDNN's own layout, once for
   * the forward products and once for the input gradients (packed-weights.ts): 1.03-1.28x faster
   * products at the 0.6B shape, for twice the bf16 copy's bytes (packedWeightBytes, memory.ts).
   * Ignored where the kernels cannot pack. Default false.
   */
  packFrozenWeights?: boolean;
  seed: number;
}

/**
 * 4 GiB: Qwen3-0.6B with LoRA r16 keeps the whole tape up to about 1.5k tokens, and with layers
 * recomputed and the head chunked fits 13.6k (a quarter of them completion; 13.1k all completion).
 */
export const DEFAULT_ACTIVATION_BUDGET_BYTES = 4 * 2 ** 30;

export const DEFAULT_LEARNER: LearnerConfig = {
  mode: { kind: 'lora', spec: { rank: 16, alpha: 32, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } },
  optimizer: { ...DEFAULT_ADAMW, lr: 1e-4 },
  microBatchTokens: 4096,
  activationBudgetBytes: DEFAULT_ACTIVATION_BUDGET_BYTES,
  seed: 0,
};

export class LearnerCore {
  readonly lora: Lora | null;
  /** The trained weights: the base itself with LoRA (frozen), a private copy when full. */
  readonly params: ParamStore;
  private readonly grads: ParamStore | null;
  private readonly model: TrainModel;
  /** The frozen base, for the KL term's reference log-probs. */
  private readonly reference: TrainModel;
  private readonly optimizer: AdamW;
  private readonly kernels: Kernels;
  /** bf16 copies of the trained weights (full fine-tuning at bf16), rounded again after every step. */
  private readonly policyBf16: Bf16Params | null = null;
  /** The frozen base (full fine-tuning starts from, and a rollback to version 0 returns to, its values). */
  private readonly base: ParamStore;
  /** Bytes of the frozen weights' packed copies (LearnerConfig.packFrozenWeights); 0 without. */
  readonly packedBytes: number;
  /** Total ms the pause hook has waited. */
  private yieldedMs = 0;
  /** yieldedMs at the last optimizer step. */
  private yieldedAtStep = 0;

  /**
   * pause: the yield hook for TrainModel; returns the ms it waited (OptimStepResult.yieldedMs).
   * baseBf16: the base's bf16 copy where one exists already (the serving engine's), at bf16.
   */
  constructor(
    readonly cfg: ModelConfig,
    base: ParamStore,
    readonly config: LearnerConfig,
    kernels: Kernels,
    restore?: { values: Float32Array; optimizer: OptimizerState },
    pause?: () => number,
    baseBf16?: Bf16Params,
  ) {
    this.kernels = kernels;
    this.base = base;
    if (config.mode.kind === 'lora') {
      this.params = base;
      this.grads = null;
      this.lora = new Lora(cfg, config.mode.spec, restore?.values);
      if (!restore) this.lora.initialise(config.seed);
      this.optimizer = new AdamW(
        this.lora.data,
        this.lora.grads,
        loraSegments(this.lora),
        config.optimizer,
        kernels,
        restore?.optimizer,
      );
    } else {
      this.params = allocateParams(base.specs);
      this.params.data.set(restore?.values ?? base.data);
      this.grads = allocateParams(base.specs);
      this.lora = null;
      this.optimizer = new AdamW(
        this.params.data,
        this.grads.data,
        paramSegments(base.specs),
        config.optimizer,
        kernels,
        restore?.optimizer,
      );
    }
    const hook = pause
      ? () => {
          this.yieldedMs += pause();
        }
      : undefined;
    const opts: TrainModelOptions = {
      pause: hook,
      activationBudgetBytes: config.activationBudgetBytes,
      headChunkRows: config.headChunkRows,
    };
    // At bf16 the frozen base is rounded once; a full fine-tuning's own copy after every step.
    if (!['fp32', 'bf16', undefined].includes(config.precision)) {
      throw new RangeError(
        `a learner trains at fp32 or bf16, not ${String(config.precision)} (int8 is for serving only)`,
      );
    }
    const bf16 = (config.precision ?? 'fp32') === 'bf16';
    const base16 = bf16 ? (baseBf16 ?? bf16ParamsOf(kernels, base.specs, base.data)) : undefined;
    if (bf16 && !this.lora) this.policyBf16 = bf16ParamsOf(kernels, base.specs, this.params.data);
    const policy16 = this.policyBf16 ?? base16;
    const packed = bf16 && this.lora && config.packFrozenWeights ? PackedWeights.of(kernels) : null;
    this.model = new TrainModel(cfg, this.params, this.grads, this.lora, kernels, {
      ...opts,
      ...(policy16 ? { bf16: policy16 } : {}),
      ...(packed ? { pack: { weights: packed, directions: 'both' as const } } : {}),
    });
    // Forward only: the shared layer buffers and a chunked head are the least memory, at no cost
    // (kept attention would only serve a backward).
    const referenceOpts = {
      ...opts,
      checkpoint: true,
      keepAttention: false,
      chunkedHead: true,
      ...(base16 ? { bf16: base16 } : {}),
      ...(packed ? { pack: { weights: packed, directions: 'forward' as const } } : {}),
    };
    this.reference = new TrainModel(cfg, base, null, null, kernels, referenceOpts);
    this.packedBytes = packed?.bytes ?? 0;
    // The gradients start as zeros (freshly allocated).
    this.model.gradientsCleared();
  }

  get steps(): number {
    return this.optimizer.steps;
  }

  /** Bytes the step buffers hold now: the policy's and the KL reference's (train/memory.ts). */
  get stepBufferBytes(): number {
    return this.model.bufferBytes + this.reference.bufferBytes;
  }

  /** The trainable values (adapter or full weights), live. */
  get values(): Float32Array {
    return this.lora ? this.lora.data : this.params.data;
  }

  /** Gradients accumulated since the last zeroGrad, shaped like `values`. */
  get gradients(): Float32Array {
    return this.lora ? this.lora.grads : this.grads!.data;
  }

  optimizerState(): OptimizerState {
    return this.optimizer.state();
  }

  zeroGrad(): void {
    this.optimizer.zeroGrad();
    this.model.gradientsCleared();
  }

  /**
   * Replaces the trained weights (a rollback): with `values`, a published version's; with null,
   * the start of training (the seeded LoRA initialisation, or the base). AdamW's moments belong to
   * the abandoned weights and are reset; the step count goes on.
   */
  restore(values: Float32Array | null): void {
    if (values && values.length !== this.values.length)
      throw new RangeError(
        `the restored weights hold ${values.length} values, this learner trains ${this.values.length}`,
      );
    if (values) this.values.set(values);
    else if (this.lora) this.lora.initialise(this.config.seed);
    else this.params.data.set(this.base.data);
    if (this.policyBf16) refreshBf16(this.kernels, this.policyBf16, this.params.data);
    this.optimizer.resetMoments();
    this.zeroGrad();
  }

  /** The bf16 copy of the trained weights (full fine-tuning at bf16), current after each step. */
  get bf16Values(): Uint16Array | null {
    return this.policyBf16?.data ?? null;
  }

  /** Clips the accumulated gradients, applies one AdamW step and clears them. */
  optimStep(): OptimStepResult {
    // The step refreshes the bf16 copy and clears the gradients as it goes; one not applied does neither.
    const r = this.optimizer.step(1, this.policyBf16?.data ?? null);
    if (r.applied) this.model.gradientsCleared();
    else this.zeroGrad();
    const yieldedMs = this.yieldedMs - this.yieldedAtStep;
    this.yieldedAtStep = this.yieldedMs;
    return { gradNorm: r.gradNorm, applied: r.applied, lr: r.lr, step: r.step, yieldedMs };
  }

  /** Current log-probs of each sample's completion, without gradients. */
  logprobs(samples: readonly TrainingSample[], model: TrainModel = this.model): Float32Array[] {
    const out: Float32Array[] = [];
    for (const micro of this.microBatches(samples)) {
      const r = model.forward(micro.map(toSequence));
      micro.forEach((s, i) => out.push(r.logprobs.slice(r.offsets[i]!, r.offsets[i]! + s.completionIds.length)));
    }
    return out;
  }

  /**
   * Forward, loss and backward of `samples`, adding into the gradients; the loss is divided by
   * batchSize samples (the whole mini-batch). Metrics are token-weighted over the micro-batches.
   */
  forwardBackward(
    samples: readonly TrainingSample[],
    loss: LossSpec,
    batchSize = samples.length,
  ): ForwardBackwardResult {
    samples.forEach(checkTrainingSample);
    const acc = { loss: 0, tokens: 0, clip: 0, kl: 0, entropy: 0, tis: 0, rollout: 0 };
    for (const micro of this.microBatches(samples)) {
      const m = this.forwardBackwardMicro(micro, loss, batchSize);
      acc.loss += m.loss;
      acc.tokens += m.tokens;
      acc.clip += m.clipFraction * m.tokens;
      acc.kl += m.approxKl * m.tokens;
      acc.entropy += m.entropy * m.tokens;
      acc.tis += m.tisMean * m.tokens;
      acc.rollout += m.rolloutAbsDiff * m.tokens;
    }
    const per = (x: number) => (acc.tokens > 0 ? x / acc.tokens : 0);
    return {
      loss: acc.loss,
      tokens: acc.tokens,
      clipFraction: per(acc.clip),
      approxKl: per(acc.kl),
      entropy: per(acc.entropy),
      tisMean: per(acc.tis),
      rolloutAbsDiff: per(acc.rollout),
    };
  }

  /** One micro-batch of forwardBackward. A sample without oldLogprobs takes the current ones (ratio 1). */
  private forwardBackwardMicro(
    samples: readonly TrainingSample[],
    loss: LossSpec,
    batchSize: number,
  ): ForwardBackwardResult {
    const offsets: number[] = [],
      lengths: number[] = [];
    let R = 0;
    for (const s of samples) {
      offsets.push(R);
      lengths.push(s.completionIds.length);
      R += s.completionIds.length;
    }
    const concat = (pick: (s: TrainingSample, i: number) => ArrayLike<number>) => {
      const out = new Float64Array(R);
      samples.forEach((s, i) => out.set(pick(s, i) as ArrayLike<number>, offsets[i]!));
      return out;
    };
    const mask = concat((s) => s.mask ?? new Float64Array(s.completionIds.length).fill(1));
    if (loss.kind === 'topk') {
      const K = samples[0]?.teacherTop?.ids[0]?.length ?? 0;
      const ids = new Int32Array(R * K),
        teacher = new Float64Array(R * K);
      samples.forEach((s, i) => {
        if (!s.teacherTop) throw new Error('the top-k loss needs teacherTop on every sample');
        s.teacherTop.ids.forEach((row, t) => {
          if (row.length !== K) throw new RangeError(`teacherTop rows must all have ${K} ids`);
          ids.set(row, (offsets[i]! + t) * K);
          teacher.set(s.teacherTop!.logprobs[t]!, (offsets[i]! + t) * K);
        });
      });
      const fwd = this.model.forward(samples.map(toSequence), { K, ids });
      const r = topKDistillationLoss(
        { K, studentLogprobs: fwd.extraLogprobs!, teacherLogprobs: teacher, mask, offsets, lengths, batchSize },
        { entropyCoef: loss.entropyCoef },
      );
      this.model.backward(new Float32Array(R), new Float32Array(R), r.dStudentLogprobs);
      return {
        loss: r.loss,
        tokens: r.metrics.tokens,
        clipFraction: 0,
        approxKl: r.metrics.kl,
        entropy: r.metrics.entropy,
        tisMean: 1,
        rolloutAbsDiff: 0,
      };
    }
    const ref = loss.klCoef > 0 ? this.logprobs(samples, this.reference) : null;
    const fwd = this.model.forward(samples.map(toSequence));
    const hasRollout = samples.every((s) => s.rolloutLogprobs);
    const old = samples.map((s, i) => s.oldLogprobs ?? fwd.logprobs.slice(offsets[i]!, offsets[i]! + lengths[i]!));
    const advantages = concat((s) => s.advantages);
    const r = policyLoss(
      {
        logprobs: fwd.logprobs,
        oldLogprobs: concat((_, i) => old[i]!),
        rolloutLogprobs: hasRollout ? concat((s) => s.rolloutLogprobs!) : null,
        advantages,
        mask,
        refLogprobs: ref ? concat((_, i) => ref[i]!) : null,
        entropy: fwd.entropy,
        offsets,
        lengths,
        batchSize,
      },
      loss,
    );
    this.model.backward(r.dLogprobs, r.dEntropy);
    const m = r.metrics;
    return {
      loss: r.loss,
      tokens: m.tokens,
      clipFraction: m.clipFraction,
      approxKl: m.approxKl,
      entropy: m.entropy,
      tisMean: m.tisMean,
      rolloutAbsDiff: m.rolloutAbsDiff,
    };
  }

  /** Consecutive runs of samples holding at most microBatchTokens tokens (at least one sample). */
  private *microBatches(samples: readonly TrainingSample[]): Generator<TrainingSample[]> {
    let batch: TrainingSample[] = [],
      tokens = 0;
    for (const s of samples) {
      const n = s.promptIds.length + s.completionIds.length;
      if (batch.length > 0 && tokens + n > this.config.microBatchTokens) {
        yield batch;
        batch = [];
        tokens = 0;
      }
      batch.push(s);
      tokens += n;
    }
    if (batch.length > 0) yield batch;
  }
}

function toSequence(s: TrainingSample): TrainSequence {
  return { tokens: [...s.promptIds, ...s.completionIds], promptLength: s.promptIds.length };
}
