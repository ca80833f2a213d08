// From logits rows to what the losses need (log-prob of the target, entropy, log-probs of other
// chosen ids) and back: the gradient w.r.t. the logits from gradients w.r.t. those quantities.
//
// With p = softmax(z), lp_j = z_j - lse, H = lse - sum_i p_i z_i:
//   d lp_j / dz = e_j - p;   dH / dz_i = -p_i (log p_i + H)
// The dense part runs in the kernels (logitsStats, logitsBackward); the one-hot part here.

import type { Kernels } from '../kernels/kernels.js';

export interface RowStats {
  /** log-sum-exp of each row. */
  lse: Float32Array;
  /** Entropy of each row's distribution. */
  entropy: Float32Array;
}

export function rowStats(k: Kernels, logits: Float32Array, rows: number, V: number): RowStats {
  const lse = new Float32Array(rows), entropy = new Float32Array(rows);
  k.logitsStats(lse, entropy, logits, rows, V);
  return { lse, entropy };
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

/** Overwrites logits with d loss / d logits, row by row. */
export function logitsBackward(k: Kernels, logits: Float32Array, rows: number, V: number, targets: Int32Array, stats: RowStats, g: LogitGrads): void {
  const gSum = Float32Array.from(g.dTarget);
  if (g.extra) {
    for (let r = 0; r < rows; r++) for (let j = 0; j < g.extra.K; j++) gSum[r] = gSum[r]! + g.extra.dLogprob[r * g.extra.K + j]!;
  }
  k.logitsBackward(logits, rows, V, stats.lse, stats.entropy, gSum, g.dEntropy);
  for (let r = 0; r < rows; r++) {
    const o = r * V;
    logits[o + targets[r]!] = logits[o + targets[r]!]! + g.dTarget[r]!;
    if (g.extra) {
      for (let j = 0; j < g.extra.K; j++) {
        const id = g.extra.ids[r * g.extra.K + j]!;
        logits[o + id] = logits[o + id]! + g.extra.dLogprob[r * g.extra.K + j]!;
      }
    }
  }
}
