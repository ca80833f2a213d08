// The training losses as pure functions over per-token arrays: the PPO-clip policy loss with
// truncated importance weights, KL to the base and an entropy bonus (Binary RL, OPD, Combined),
// and top-K distillation; the methods' advantages are learn/methods.ts's. Each returns the loss,
// its gradient w.r.t. what TrainModel.forward produced (so TrainModel.backward can take it as
// is) and diagnostics.
//
// Shapes: R = completion tokens of a mini-batch (its samples concatenated, as in
// ForwardResult), B = samples, K = teacher top-K entries per token. Suffixes: _R per token,
// _RK per token and entry, _B per sample.
//
// Reduction (reference-system.md 6.1): loss = (1/B) sum_i (sum_t m_it x_it) / max(1, sum_t m_it).
// A fully masked sample adds 0 but still counts in B. Masked tokens are skipped entirely, so
// their inputs may hold anything (NaN included).

import type { PolicyLossSpec } from '../../learner.js';

/** Where each sample's tokens sit in the per-token arrays. */
export interface SampleSpans {
  /** First token of each sample [B]. Ascending, non-overlapping. */
  offsets: ArrayLike<number>;
  /** Token count of each sample [B]. */
  lengths: ArrayLike<number>;
  /**
   * Samples in the whole optimizer batch, when this input is one micro-batch of it (default:
   * this input's B). Dividing by the global count makes micro-batch gradients sum to the batch's.
   */
  batchSize?: number;
}

export interface PolicyLossInput extends SampleSpans {
  /** Current log-prob of each sampled token (differentiated) [R]. */
  logprobs: ArrayLike<number>;
  /** The trainer's log-probs before the first optimizer step on this batch [R]. */
  oldLogprobs: ArrayLike<number>;
  /** The sampler's log-probs of the same tokens, for truncated importance sampling [R]. */
  rolloutLogprobs: ArrayLike<number> | null;
  advantages: ArrayLike<number>;
  /** 1 trains the token, 0 skips it [R]. */
  mask: ArrayLike<number>;
  /** The frozen base model's log-probs, for the KL term [R]. */
  refLogprobs: ArrayLike<number> | null;
  /** Entropy of the predictive distribution at each token (differentiated) [R]. */
  entropy: ArrayLike<number>;
}

/** The policy loss's settings: the Learner contract's PolicyLossSpec. */
export type PolicyLossConfig = PolicyLossSpec;

export const DEFAULT_POLICY_LOSS: PolicyLossConfig = { eps: 0.2, epsHigh: 0.28, tisCap: 2, klCoef: 0, entropyCoef: 0 };

/** Token metrics are means over trained (mask 1) tokens; all are 0 when there are none. */
export interface PolicyLossMetrics {
  /** The PPO part of the loss, reduced like the loss. */
  pgLoss: number;
  /** The k3 KL to the base, reduced like the loss (0 without refLogprobs). */
  klLoss: number;
  /** Token entropy reduced like the loss. */
  entropyLoss: number;
  /** Fraction of tokens where the clipped branch is strictly the larger (its gradient is 0). */
  clipFraction: number;
  /** mean(old - lp): the k1 estimate of KL(old || new). */
  approxKl: number;
  /** mean(ratio - 1 - log ratio): the k3 estimate of KL(old || new), never negative. */
  approxKlK3: number;
  entropy: number;
  /** Mean importance weight applied (1 where the correction is off). */
  tisMean: number;
  /** Fraction of tokens whose weight exp(old - rollout) exceeded tisCap. */
  tisClippedFraction: number;
  /** mean |old - rollout| (0 without rollout log-probs): train/serve mismatch plus staleness. */
  rolloutAbsDiff: number;
  ratioMean: number;
  ratioMax: number;
  tokens: number;
}

export interface PolicyLossResult {
  loss: number;
  /** d loss / d logprobs [R]. */
  dLogprobs: Float32Array;
  /** d loss / d entropy [R]. */
  dEntropy: Float32Array;
  metrics: PolicyLossMetrics;
}

/**
 * PPO-clip: pg = max(-ratio A, -clip(ratio, 1-eps, 1+epsHigh) A), ratio = exp(lp - old), times
 * the constant weight min(exp(old - rollout), tisCap); per token pg + klCoef k3(ref, lp) - entropyCoef H.
 */
export function policyLoss(input: PolicyLossInput, cfg: PolicyLossConfig = DEFAULT_POLICY_LOSS): PolicyLossResult {
  const {
    logprobs: lp_R,
    oldLogprobs: old_R,
    rolloutLogprobs: rollout_R,
    advantages: adv_R,
    refLogprobs: ref_R,
    entropy: H_R,
  } = input;
  const R = lp_R.length;
  checkLengths('policyLoss', R, {
    oldLogprobs: old_R,
    advantages: adv_R,
    mask: input.mask,
    entropy: H_R,
    ...(rollout_R ? { rolloutLogprobs: rollout_R } : {}),
    ...(ref_R ? { refLogprobs: ref_R } : {}),
  });
  if (cfg.klCoef !== 0 && !ref_R)
    throw new RangeError(`policyLoss: klCoef is ${cfg.klCoef} but no refLogprobs were given`);
  if (cfg.tisCap !== null && !(cfg.tisCap > 0))
    throw new RangeError(`policyLoss: tisCap must be positive or null, got ${cfg.tisCap}`);
  const weight_R = tokenWeights('policyLoss', input.mask, input, R);
  const lo = 1 - cfg.eps,
    hi = 1 + cfg.epsHigh;
  const dLogprobs = new Float32Array(R),
    dEntropy = new Float32Array(R);
  let loss = 0,
    pgLoss = 0,
    klLoss = 0,
    entropyLoss = 0;
  let tokens = 0,
    clipped = 0,
    logRatioSum = 0,
    k3Sum = 0,
    entropySum = 0,
    tisSum = 0,
    tisCapped = 0,
    rolloutDiffSum = 0;
  let ratioSum = 0,
    ratioMax = 0;
  for (let t = 0; t < R; t++) {
    const w = weight_R[t]!;
    if (w === 0) continue;
    const A = adv_R[t]!,
      lp = lp_R[t]!,
      old = old_R[t]!,
      H = H_R[t]!;
    const ratio = Math.exp(lp - old);
    const unclippedLoss = -ratio * A;
    const clippedLoss = -Math.min(Math.max(ratio, lo), hi) * A;
    // The max picks the clipped branch only when it is strictly larger; on a tie (ratio inside
    // the range, or A = 0) both branches have the same value and the same slope -ratio A.
    const isClipped = clippedLoss > unclippedLoss;
    let tis = 1;
    if (rollout_R) {
      const rawTis = Math.exp(old - rollout_R[t]!);
      if (cfg.tisCap !== null) {
        tis = Math.min(rawTis, cfg.tisCap);
        if (rawTis > cfg.tisCap) tisCapped++;
      }
      rolloutDiffSum += Math.abs(old - rollout_R[t]!);
    }
    const pg = tis * (isClipped ? clippedLoss : unclippedLoss);
    let term = pg - cfg.entropyCoef * H;
    let dTerm = isClipped ? 0 : tis * unclippedLoss; // d(-ratio A)/d lp = -ratio A
    if (ref_R) {
      // k3 = exp(ref - lp) - (ref - lp) - 1: unbiased for KL(new || ref) and never negative.
      const eRef = Math.exp(ref_R[t]! - lp);
      const kl = eRef - (ref_R[t]! - lp) - 1;
      klLoss += w * kl;
      // Left out when the coefficient is 0, so an overflowing exp cannot turn 0 * Inf into NaN.
      if (cfg.klCoef !== 0) {
        term += cfg.klCoef * kl;
        dTerm += cfg.klCoef * (1 - eRef);
      }
    }
    loss += w * term;
    pgLoss += w * pg;
    entropyLoss += w * H;
    dLogprobs[t] = w * dTerm;
    dEntropy[t] = -w * cfg.entropyCoef;

    tokens++;
    if (isClipped) clipped++;
    logRatioSum += old - lp;
    k3Sum += ratio - 1 - (lp - old);
    entropySum += H;
    tisSum += tis;
    ratioSum += ratio;
    ratioMax = Math.max(ratioMax, ratio);
  }
  const mean = (x: number) => (tokens > 0 ? x / tokens : 0);
  return {
    loss,
    dLogprobs,
    dEntropy,
    metrics: {
      pgLoss,
      klLoss,
      entropyLoss,
      clipFraction: mean(clipped),
      approxKl: mean(logRatioSum),
      approxKlK3: mean(k3Sum),
      entropy: mean(entropySum),
      tisMean: mean(tisSum),
      tisClippedFraction: mean(tisCapped),
      rolloutAbsDiff: mean(rolloutDiffSum),
      ratioMean: mean(ratioSum),
      ratioMax,
      tokens,
    },
  };
}

export interface TopKDistillationInput extends SampleSpans {
  /** Teacher entries per token. */
  K: number;
  /** Student log-prob of the teacher's k-th id at each token (differentiated) [R*K]. */
  studentLogprobs: ArrayLike<number>;
  /** Teacher log-probs of its top-K ids [R*K]; NaN where the teacher gave no entry. */
  teacherLogprobs: ArrayLike<number>;
  mask: ArrayLike<number>;
}

export interface TopKDistillationConfig {
  /** Weight of the student's entropy over the K+1 bins, subtracted from the loss. */
  entropyCoef: number;
}

/** Means over the tokens that train (mask 1 and some teacher data); 0 when there are none. */
export interface TopKDistillationMetrics {
  /** Reverse KL over the K+1 bins. */
  kl: number;
  /** Student entropy over the K+1 bins. */
  entropy: number;
  /** Student probability outside the teacher's top-K. */
  studentTailMass: number;
  teacherTailMass: number;
  tokens: number;
  /** Tokens with mask 1 but no teacher entry at all: skipped, never read as log-prob 0. */
  tokensWithoutTeacher: number;
}

export interface TopKDistillationResult {
  loss: number;
  /** d loss / d studentLogprobs [R*K] (0 at entries without teacher data). */
  dStudentLogprobs: Float32Array;
  metrics: TopKDistillationMetrics;
}

// log-sum-exp of a top-K set is clamped below 0 so the tail bin log(1 - exp(S)) stays finite.
const TAIL_LSE_CAP = -1e-7;

/**
 * Reverse KL from the student to the teacher over the teacher's top-K ids plus one tail bin
 * holding the rest of the mass: sum_b p_s(b) (log p_s(b) - log p_t(b)), b in top-K and tail.
 * Entries with a NaN teacher value leave the top-K set (their mass joins the tail).
 */
export function topKDistillationLoss(
  input: TopKDistillationInput,
  cfg: TopKDistillationConfig = { entropyCoef: 0 },
): TopKDistillationResult {
  const { K, studentLogprobs: s_RK, teacherLogprobs: t_RK } = input;
  if (!(Number.isInteger(K) && K > 0))
    throw new RangeError(`topKDistillationLoss: K must be a positive integer, got ${K}`);
  const R = input.mask.length;
  checkLengths('topKDistillationLoss', R * K, { studentLogprobs: s_RK, teacherLogprobs: t_RK });
  // A token trains only if the teacher said something about it.
  const trains_R = new Float64Array(R);
  let tokensWithoutTeacher = 0;
  for (let r = 0; r < R; r++) {
    if (input.mask[r] === 0) continue;
    let any = false;
    for (let k = 0; k < K && !any; k++) any = Number.isFinite(t_RK[r * K + k]!);
    if (any) trains_R[r] = 1;
    else tokensWithoutTeacher++;
  }
  const weight_R = tokenWeights('topKDistillationLoss', input.mask, input, R, trains_R);
  // Per bin the loss is p_s (a s - t) with a = 1 + entropyCoef (KL minus coef times entropy).
  const a = 1 + cfg.entropyCoef;
  const dStudentLogprobs = new Float32Array(R * K);
  let loss = 0,
    tokens = 0,
    klSum = 0,
    entropySum = 0,
    studentTail = 0,
    teacherTail = 0;
  for (let r = 0; r < R; r++) {
    if (trains_R[r] === 0) continue;
    const w = weight_R[r]!,
      o = r * K;
    const sLse = logSumExpFinite(s_RK, t_RK, o, K),
      tLse = logSumExpFinite(t_RK, t_RK, o, K);
    const sTail = Math.log(-Math.expm1(Math.min(sLse, TAIL_LSE_CAP)));
    const tTail = Math.log(-Math.expm1(Math.min(tLse, TAIL_LSE_CAP)));
    const pTail = Math.exp(sTail);
    let kl = pTail * (sTail - tTail),
      negEntropy = pTail * sTail;
    for (let k = 0; k < K; k++) {
      const t = t_RK[o + k]!;
      if (!Number.isFinite(t)) continue;
      const s = s_RK[o + k]!,
        p = Math.exp(s);
      kl += p * (s - t);
      negEntropy += p * s;
      // Through the tail (d s_tail / d s_k = -p_k / p_tail) unless the clamp holds it constant.
      const g = sLse <= TAIL_LSE_CAP ? p * (a * (s - sTail) - t + tTail) : p * (a * s - t + a);
      dStudentLogprobs[o + k] = w * g;
    }
    loss += w * (kl + cfg.entropyCoef * negEntropy);
    tokens++;
    klSum += kl;
    entropySum -= negEntropy;
    studentTail += pTail;
    teacherTail += Math.exp(tTail);
  }
  const mean = (x: number) => (tokens > 0 ? x / tokens : 0);
  return {
    loss,
    dStudentLogprobs,
    metrics: {
      kl: mean(klSum),
      entropy: mean(entropySum),
      studentTailMass: mean(studentTail),
      teacherTailMass: mean(teacherTail),
      tokens,
      tokensWithoutTeacher,
    },
  };
}

/** log sum exp of x[o .. o+K) over the entries where `valid` is finite. */
function logSumExpFinite(x: ArrayLike<number>, valid: ArrayLike<number>, o: number, K: number): number {
  let max = -Infinity;
  for (let k = 0; k < K; k++) if (Number.isFinite(valid[o + k]!)) max = Math.max(max, x[o + k]!);
  let sum = 0;
  for (let k = 0; k < K; k++) if (Number.isFinite(valid[o + k]!)) sum += Math.exp(x[o + k]! - max);
  return max + Math.log(sum);
}

/** Throws one message listing every length when any array differs from `expected`. */
function checkLengths(what: string, expected: number, arrays: Record<string, ArrayLike<number>>): void {
  const entries = Object.entries(arrays);
  if (entries.every(([, a]) => a.length === expected)) return;
  throw new RangeError(
    `${what}: per-token arrays differ in length (expected ${expected}): ${entries.map(([n, a]) => `${n} ${a.length}`).join(', ')}`,
  );
}

/**
 * Per-token weight of the sample-mean reduction: mask_t / max(1, tokens of its sample) / B, so
 * that loss = sum_t weight_t term_t. `trains` (default: the mask) says which tokens count.
 */
function tokenWeights(
  what: string,
  mask: ArrayLike<number>,
  spans: SampleSpans,
  R: number,
  trains: ArrayLike<number> = mask,
): Float64Array {
  const { offsets, lengths } = spans;
  const B = offsets.length;
  if (lengths.length !== B) throw new RangeError(`${what}: ${B} offsets but ${lengths.length} lengths`);
  const batchSize = spans.batchSize ?? B;
  if (!(Number.isInteger(batchSize) && batchSize >= B))
    throw new RangeError(`${what}: batchSize ${batchSize} is below this input's ${B} samples`);
  for (let t = 0; t < R; t++) {
    if (mask[t] !== 0 && mask[t] !== 1) throw new RangeError(`${what}: mask[${t}] is ${mask[t]}; masks hold 0 or 1`);
  }
  const weight_R = new Float64Array(R);
  let end = 0;
  for (let i = 0; i < B; i++) {
    const start = offsets[i]!,
      n = lengths[i]!;
    if (!(Number.isInteger(start) && Number.isInteger(n) && n >= 0 && start >= end && start + n <= R)) {
      throw new RangeError(
        `${what}: sample ${i} spans [${start}, ${start + n}) but samples must be ascending, non-overlapping and inside ${R} tokens (previous ended at ${end})`,
      );
    }
    end = start + n;
    let count = 0;
    for (let t = start; t < end; t++) count += trains[t]!;
    const w = 1 / Math.max(1, count) / batchSize;
    for (let t = start; t < end; t++) weight_R[t] = trains[t]! * w;
  }
  return weight_R;
}
