// The learner's synchronous core: one policy (a LoRA adapter over the frozen base, or a full
// copy of the weights), its optimizer, and the PPO procedure over a batch of samples. It runs
// inside the learner worker (runtime/learner-worker.ts); LocalLearner is its async face.
//
//   trainBatch(samples):  old = logprobs before any step        (the PPO ratio's anchor)
//                         for each epoch, for each mini-batch:   zeroGrad
//                           for each micro-batch:                forwardBackward (loss / B)
//                           optimStep                            (clip, AdamW, metrics)

import type { Kernels } from '../kernels/kernels.js';
import type { ModelConfig } from '../model/config.js';
import { allocateParams, type ParamStore } from '../model/weights.js';
import { type Bf16Params, bf16ParamsOf, refreshBf16, type TrainPrecision } from '../precision.js';
import {
  combineAdvantages,
  DEFAULT_POLICY_LOSS,
  policyLoss,
  topKDistillationLoss,
  type PolicyLossConfig,
} from './losses.js';
import { Lora, type LoraSpec } from './lora.js';
import { TrainModel, type TrainModelOptions, type TrainSequence } from './model.js';
import type { ForwardBackwardResult, StepMetrics, TrainingSample } from '../../types.js';
import {
  AdamW,
  DEFAULT_ADAMW,
  loraSegments,
  paramSegments,
  type AdamWConfig,
  type OptimizerState,
  type StepResult,
} from './optimizer.js';

export type LossSpec = ({ kind: 'policy' } & PolicyLossConfig) | { kind: 'topk'; entropyCoef: number };

export interface LearnerConfig {
  /** LoRA over the frozen base, or full fine-tuning of every weight. */
  mode: { kind: 'lora'; spec: LoraSpec } | { kind: 'full' };
  optimizer: AdamWConfig;
  loss: LossSpec;
  /** Samples per optimizer step; a batch of N samples makes ceil(N / miniBatchSize) steps per epoch. */
  miniBatchSize: number;
  /** Passes over each batch; more than one lets the PPO ratio and its clip act. */
  epochs: number;
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
  loss: { kind: 'policy', ...DEFAULT_POLICY_LOSS },
  miniBatchSize: 16,
  epochs: 1,
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
  /** Total ms the pause hook has waited. */
  private yieldedMs = 0;

  /**
   * pause: the yield hook for TrainModel; returns the ms it waited (StepMetrics.yieldedMs).
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
    this.model = new TrainModel(cfg, this.params, this.grads, this.lora, kernels, {
      ...opts,
      ...(policy16 ? { bf16: policy16 } : {}),
    });
    // Forward only: the shared layer buffers and a chunked head are the least memory, at no cost.
    const referenceOpts = { ...opts, checkpoint: true, chunkedHead: true, ...(base16 ? { bf16: base16 } : {}) };
    this.reference = new TrainModel(cfg, base, null, null, kernels, referenceOpts);
  }

  get steps(): number {
    return this.optimizer.steps;
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
  }

  /** The bf16 copy of the trained weights (full fine-tuning at bf16), current after each step. */
  get bf16Values(): Uint16Array | null {
    return this.policyBf16?.data ?? null;
  }

  /** Clips the accumulated gradients and applies one AdamW step. */
  optimStep(): StepResult {
    const r = this.optimizer.step();
    if (this.policyBf16 && r.applied) refreshBf16(this.kernels, this.policyBf16, this.params.data);
    return r;
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

  /** The whole PPO procedure over one batch; returns one record per optimizer step. */
  trainBatch(samples: readonly TrainingSample[]): StepMetrics[] {
    samples.forEach(checkSample);
    // The first step's time (and time yielded) includes computing the anchor.
    let since: StepStart | undefined = { t0: performance.now(), yielded0: this.yieldedMs };
    // The PPO ratio is taken against the policy as it was before this batch's first step.
    const anchored =
      this.config.loss.kind === 'policy'
        ? this.logprobs(samples).map((old, i) => ({ ...samples[i]!, oldLogprobs: old }))
        : samples;
    const metrics: StepMetrics[] = [];
    for (let epoch = 0; epoch < this.config.epochs; epoch++) {
      for (let start = 0; start < anchored.length; start += this.config.miniBatchSize) {
        metrics.push(
          this.step(anchored.slice(start, Math.min(anchored.length, start + this.config.miniBatchSize)), since),
        );
        since = undefined;
      }
    }
    return metrics;
  }

  private step(
    samples: readonly TrainingSample[],
    { t0, yielded0 }: StepStart = { t0: performance.now(), yielded0: this.yieldedMs },
  ): StepMetrics {
    this.zeroGrad();
    const acc = { loss: 0, tokens: 0, clip: 0, kl: 0, entropy: 0, tis: 0, rollout: 0 };
    for (const micro of this.microBatches(samples)) {
      const m = this.forwardBackward(micro, samples.length);
      acc.loss += m.loss;
      acc.tokens += m.tokens;
      acc.clip += m.clipFraction * m.tokens;
      acc.kl += m.approxKl * m.tokens;
      acc.entropy += m.entropy * m.tokens;
      acc.tis += m.tisMean * m.tokens;
      acc.rollout += m.rolloutAbsDiff * m.tokens;
    }
    const r = this.optimStep();
    const seconds = (performance.now() - t0) / 1000;
    const per = (x: number) => (acc.tokens > 0 ? x / acc.tokens : 0);
    const tokens = samples.reduce((a, s) => a + s.promptIds.length + s.completionIds.length, 0);
    return {
      step: r.step,
      samples: samples.length,
      tokens,
      loss: acc.loss,
      gradNorm: r.gradNorm,
      applied: r.applied,
      lr: r.lr,
      clipFraction: per(acc.clip),
      approxKl: per(acc.kl),
      entropy: per(acc.entropy),
      tisMean: per(acc.tis),
      rolloutAbsDiff: per(acc.rollout),
      seconds,
      tokensPerSecond: tokens / seconds,
      yieldedMs: this.yieldedMs - yielded0,
    };
  }

  /**
   * Forward, loss and backward of one micro-batch, adding into the gradients; the loss is
   * divided by batchSize samples (the whole mini-batch). A sample without oldLogprobs takes the
   * current ones (ratio 1), also as the anchor of its OPD term.
   */
  forwardBackward(samples: readonly TrainingSample[], batchSize = samples.length): ForwardBackwardResult {
    samples.forEach(checkSample);
    const loss = this.config.loss;
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
      if (samples.some((s) => s.opd)) throw new Error('OPD samples need the policy loss, not top-k distillation');
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
    samples.forEach((s, i) => {
      if (!s.opd) return;
      const o = offsets[i]!,
        n = lengths[i]!;
      const opd = combineAdvantages(
        'combine',
        { score: 0, teacherLogprobs: s.opd.teacherLogprobs, oldLogprobs: old[i]!, mask: mask.subarray(o, o + n) },
        { wRl: 0, wOpd: s.opd.weight },
      );
      for (let t = 0; t < n; t++) advantages[o + t] = advantages[o + t]! + opd.advantages[t]!;
      mask.set(opd.mask, o);
    });
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

interface StepStart {
  t0: number;
  yielded0: number;
}

function toSequence(s: TrainingSample): TrainSequence {
  return { tokens: [...s.promptIds, ...s.completionIds], promptLength: s.promptIds.length };
}

/** Lengths must agree before anything is computed; the message lists them all. */
export function checkSample(s: TrainingSample, index: number): void {
  const n = s.completionIds.length;
  const problems: string[] = [];
  if (s.promptIds.length === 0) problems.push('promptIds is empty');
  if (n === 0) problems.push('completionIds is empty');
  if (s.advantages.length !== n) problems.push(`advantages has ${s.advantages.length}`);
  if (s.rolloutLogprobs && s.rolloutLogprobs.length !== n)
    problems.push(`rolloutLogprobs has ${s.rolloutLogprobs.length}`);
  if (s.oldLogprobs && s.oldLogprobs.length !== n) problems.push(`oldLogprobs has ${s.oldLogprobs.length}`);
  if (s.mask && s.mask.length !== n) problems.push(`mask has ${s.mask.length}`);
  if (s.opd && s.opd.teacherLogprobs.length !== n)
    problems.push(`opd.teacherLogprobs has ${s.opd.teacherLogprobs.length}`);
  if (s.teacherTop && (s.teacherTop.ids.length !== n || s.teacherTop.logprobs.length !== n))
    problems.push(
      `teacherTop has ${s.teacherTop.ids.length} id rows and ${s.teacherTop.logprobs.length} log-prob rows`,
    );
  if (problems.length > 0)
    throw new RangeError(`sample ${index}: ${problems.join(', ')}, but completionIds has ${n} tokens`);
  if (s.opd && !Number.isFinite(s.opd.weight))
    throw new RangeError(`sample ${index}: opd.weight must be finite, got ${s.opd.weight}`);
}
