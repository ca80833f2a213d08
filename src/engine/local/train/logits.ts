// From logits rows to what the losses need (log-prob of the target, entropy, log-probs of other
// chosen ids) and back: the gradient w.r.t. the logits from gradients w.r.t. those quantities.
//
// With p = softmax(z), lp_j = z_j - lse, H = lse - sum_i p_i z_i:
//   d lp_j / dz = e_j - p;   dH / dz_i = -p_i (log p_i + H)
// The dense part runs in the kernels (logitsStats, logitsBackward); the one-hot part here.
//
// Both work on a block of rows r0 .. r0 + n - 1 whose logits are given [n, V], against per-row
// arrays over all rows, so that a chunked LM head can hold one block's logits at a time.

import type { Kernels } from '../kernels/kernels.js';

export interface RowStats {
  /** log-sum-exp of each row. */
  lse: Float32Array;
  /** Entropy of each row's distribution. */
  entropy: Float32Array;
}

/** Fills rows r0 .. r0 + n - 1 of stats from those rows' logits [n, V]. */
export function rowStats(k: Kernels, logits: Float32Array, r0: number, n: number, V: number, stats: RowStats): void {
  k.logitsStats(stats.lse.subarray(r0, r0 + n), stats.entropy.subarray(r0, r0 + n), logits, n, V);
}

/** Gradients flowing into the logits rows: per target log-prob, per entropy, per extra id. */
export interface LogitGrads {
  /** d loss / d lp(target) per row. */
  dTarget: Float32Array;
  /** d loss / d entropy per row (zeros when no entropy term). */
  dEntropy: Float32Array;
  /** Optional extra ids per row (top-k distillation): ids [rows * K], d loss / d lp(id). */
  extra?: { K: number; ids: Int32Array; dLogprob: Float32Array };
}

/** Overwrites the logits [n, V] of rows r0 .. r0 + n - 1 with d loss / d logits. */
export function logitsBackward(
  k: Kernels,
  logits: Float32Array,
  r0: number,
  n: number,
  V: number,
  targets: Int32Array,
  stats: RowStats,
  g: LogitGrads,
): void {
  const gSum = g.dTarget.slice(r0, r0 + n);
  const extra = g.extra;
  if (extra) {
    for (let r = 0; r < n; r++) {
      for (let j = 0; j < extra.K; j++) gSum[r] = gSum[r]! + extra.dLogprob[(r0 + r) * extra.K + j]!;
    }
  }
  const rows = (a: Float32Array) => a.subarray(r0, r0 + n);
  k.logitsBackward(logits, n, V, rows(stats.lse), rows(stats.entropy), gSum, rows(g.dEntropy));
  for (let r = 0; r < n; r++) {
    const o = r * V,
      row = r0 + r;
    logits[o + targets[row]!] = logits[o + targets[row]!]! + g.dTarget[row]!;
    if (extra) {
      for (let j = 0; j < extra.K; j++) {
        const id = extra.ids[row * extra.K + j]!;
        logits[o + id] = logits[o + id]! + extra.dLogprob[row * extra.K + j]!;
      }
    }
  }
}
