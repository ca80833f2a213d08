// The training steps for the dashboard's charts, each with what the judge did since the step
// before it: turns judged, their mean agreement, hints accepted and hint votes rejected.

import { stmt, type SqliteDatabase } from './sqlite.js';

/** One optimizer step and what the judge did since the step before it. */
export interface StepPoint {
  step: number;
  batch: number;
  version: number;
  /** Epoch ms the step was committed. */
  at: number;
  samples: number;
  tokens: number;
  loss: number;
  rewardMean: number;
  clipFraction: number;
  approxKl: number;
  /** Samples of the step that carried a teacher (an accepted hint). */
  hints: number;
  staleDropped: number;
  seconds: number;
  tokensPerSecond: number;
  /** Queues the step's batch left behind (null on steps recorded before schema 6 kept them). */
  samplesQueued: number | null;
  turnsWaiting: number | null;
  /** Turns judged since the previous step (skipped ones excluded) and their mean agreement. */
  judged: number;
  agreementMean: number | null;
  /** Judged turns whose hint was accepted, and hint votes rejected, since the previous step. */
  hintsAccepted: number;
  hintsRejected: number;
}

interface StepRow {
  step: number;
  batch: number;
  version: number;
  created_at: number;
  prev_at: number;
  samples: number;
  tokens: number;
  loss: number;
  reward_mean: number;
  clip_fraction: number;
  approx_kl: number;
  hints: number;
  stale_dropped: number;
  seconds: number;
  tokens_per_second: number;
  samples_queued: number | null;
  turns_waiting: number | null;
}

/** Steps after `after`, oldest first, at most `limit`. */
export function stepHistory(db: SqliteDatabase, after: number, limit: number): StepPoint[] {
  const rows = stmt(
    db,
    `SELECT * FROM (SELECT *, lag(created_at, 1, 0) OVER (ORDER BY step) AS prev_at FROM train_steps)
    WHERE step > ? ORDER BY step LIMIT ?`,
  ).all(after, limit) as StepRow[];
  if (rows.length === 0) return [];
  // One pass over the judgments in the steps' time span, bucketed by the step that followed them.
  const judged = stmt(
    db,
    `SELECT finished_at AS at, agreement, hint IS NOT NULL AS accepted, json_array_length(hint_rejections) AS rejected
    FROM judgments WHERE skipped IS NULL AND finished_at > ? AND finished_at <= ? ORDER BY finished_at`,
  ).all(rows[0]!.prev_at, rows[rows.length - 1]!.created_at) as {
    at: number;
    agreement: number | null;
    accepted: 0 | 1;
    rejected: number;
  }[];
  let j = 0;
  return rows.map((r) => {
    let n = 0;
    let agreementSum = 0;
    let agreementN = 0;
    let accepted = 0;
    let rejected = 0;
    while (j < judged.length && judged[j]!.at <= r.prev_at) j++;
    while (j < judged.length && judged[j]!.at <= r.created_at) {
      const x = judged[j++]!;
      n++;
      if (x.agreement !== null) {
        agreementSum += x.agreement;
        agreementN++;
      }
      accepted += x.accepted;
      rejected += x.rejected;
    }
    return {
      step: r.step,
      batch: r.batch,
      version: r.version,
      at: r.created_at,
      samples: r.samples,
      tokens: r.tokens,
      loss: r.loss,
      rewardMean: r.reward_mean,
      clipFraction: r.clip_fraction,
      approxKl: r.approx_kl,
      hints: r.hints,
      staleDropped: r.stale_dropped,
      seconds: r.seconds,
      tokensPerSecond: r.tokens_per_second,
      samplesQueued: r.samples_queued,
      turnsWaiting: r.turns_waiting,
      judged: n,
      agreementMean: agreementN > 0 ? agreementSum / agreementN : null,
      hintsAccepted: accepted,
      hintsRejected: rejected,
    };
  });
}
