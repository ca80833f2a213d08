// The automatic rollback guard (off by default): once the serving version, a trained one, has
// `window` judged turns, compare their judge scores with the last `window` judged turns of the
// version it replaced. Roll back when the new one is worse by more than `margin` (on the -1..1
// score scale) at one-sided significance `alpha` (learn/welch.ts). The decision is a pure function.

import type { GuardVerdict } from '../store/versions.js';
import { mean, welchWorse } from './welch.js';

export interface GuardConfig {
  enabled: boolean;
  /** Judged turns compared on each side. */
  window: number;
  /** How much lower the new mean score must be, beyond noise, to roll back. */
  margin: number;
  /** One-sided significance level. */
  alpha: number;
}

export const DEFAULT_GUARD: GuardConfig = { enabled: false, window: 32, margin: 0.1, alpha: 0.05 };

export function checkGuardConfig(c: GuardConfig): GuardConfig {
  if (!(Number.isInteger(c.window) && c.window >= 2))
    throw new RangeError(`the guard's window must be an integer >= 2, got ${c.window}`);
  if (!(c.margin >= 0 && c.margin < 2)) throw new RangeError(`the guard's margin must be in [0, 2), got ${c.margin}`);
  if (!(c.alpha > 0 && c.alpha < 1)) throw new RangeError(`the guard's alpha must be in (0, 1), got ${c.alpha}`);
  return c;
}

/**
 * The guard's verdict on `scores` (the new version's first `window` judged turns) against
 * `previousScores` (the version before's last `window`): rolled back only when both sides are
 * full and the test rejects "no worse than the margin".
 */
export function guardVerdict(
  previous: number,
  previousScores: readonly number[],
  scores: readonly number[],
  cfg: GuardConfig,
): GuardVerdict {
  const base = {
    previous,
    previousTurns: previousScores.length,
    previousMean: previousScores.length > 0 ? mean(previousScores) : null,
    turns: scores.length,
    mean: scores.length > 0 ? mean(scores) : null,
  };
  if (previousScores.length < cfg.window)
    return {
      ...base,
      decision: 'kept',
      p: null,
      reason: `version ${previous} has ${previousScores.length} judged turns, fewer than the window (${cfg.window})`,
    };
  const w = welchWorse(previousScores, scores, cfg.margin);
  const worse = w.p < cfg.alpha;
  return {
    ...base,
    decision: worse ? 'rolled_back' : 'kept',
    p: w.p,
    reason: worse
      ? `mean score ${fmt(base.mean)} vs ${fmt(base.previousMean)}: lower by more than ${cfg.margin} (p = ${w.p.toPrecision(3)} < ${cfg.alpha})`
      : `mean score ${fmt(base.mean)} vs ${fmt(base.previousMean)}: not lower by more than ${cfg.margin} at ${cfg.alpha} (p = ${w.p.toPrecision(3)})`,
  };
}

function fmt(x: number | null): string {
  return x === null ? '-' : x.toFixed(3);
}
