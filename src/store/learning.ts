// The learning loop's tables: judgments with their votes, the durable sample queue, and training
// steps. Each method is one transaction, so a judgment, its votes, its sample and the closed
// turn's `done` mark appear together or not at all, and a batch's samples are marked trained
// together with its step rows.
//
// Training state is owned by the checkpoint: after a restart, reconcileWithCheckpoint(step)
// returns to the queue every sample whose step the checkpoint does not contain, so no sample is
// lost and none is trained twice.

import type { JudgedTurn } from '../judge/types.js';
import type { StepMetrics } from '../engine/types.js';
import type { NoSampleReason, Sample, SampleDraft, SampleSource, SampleStatus } from '../types.js';
import { holdSamples, releaseSamples } from './batch-holds.js';
import { decodeFloats, decodeIds, encodeFloats } from './records.js';
import { stmt, type SqliteDatabase } from './sqlite.js';
import { insertVersion, type VersionRecord } from './versions.js';

/** One optimizer step of a batch, as the trainer reports it. */
export interface TrainedStep extends StepMetrics {
  /** Mean judge score of the batch's samples (a step's reward for `steps` samples). */
  rewardMean: number;
  /** Samples of the batch that carried a teacher (an accepted hint). */
  hints: number;
  /** Samples dropped as stale just before this batch was taken. */
  staleDropped: number;
}

export interface LearningCounts {
  judgments: number;
  /** Judged turns that had no next state (nothing to judge). */
  skipped: number;
  samples: Record<SampleStatus, number>;
  /** Judged turns with no sample because prompt + completion exceed the learner's bound. */
  tooLongTurns: number;
  steps: number;
  /** Closed main turns waiting for (or being judged by) the judge. */
  closedPending: number;
  closedClaimed: number;
}

interface SampleRow {
  id: number;
  turn_id: string;
  session_id: string | null;
  source: string;
  policy_version: number;
  score: number;
  rl_advantage: number;
  opd_weight: number;
  teacher_logprobs: Uint8Array | null;
  teacher_version: number | null;
  status: string;
  created_at: number;
  reward: number | null;
  step_index: number | null;
  prompt_ids: Uint8Array;
  completion_ids: Uint8Array;
  logprobs: Uint8Array;
}

/** The learning queues a trained batch left behind. */
export interface StepQueues {
  /** Samples still waiting for a batch. */
  samplesQueued: number;
  /** Closed turns not judged yet (waiting or being judged). */
  turnsWaiting: number;
}

/** Samples with their turns' session and token data (SampleRow). */
const SAMPLE_WITH_TOKENS = `SELECT s.*, t.session_id, p.prompt_ids, p.completion_ids, p.logprobs
  FROM samples s JOIN turns t ON t.id = s.turn_id JOIN turn_payloads p ON p.turn_id = s.turn_id`;

export class LearningTables {
  constructor(
    private readonly db: SqliteDatabase,
    private readonly now: () => number,
  ) {}

  /**
   * Commits a judged turn: the judgment, every vote's raw answer, the sample (if any) and the
   * closed turn's `done` mark. Returns the sample's id, or null when there is none.
   */
  recordJudgment(j: JudgedTurn, sample: SampleDraft | null, noSample: NoSampleReason | null = null): number | null {
    if (sample && noSample)
      throw new Error(`turn ${j.turnId}: a judgment with a sample has no no-sample reason (${noSample})`);
    return this.db.transaction(() => {
      const now = this.now();
      stmt(
        this.db,
        `INSERT INTO judgments (turn_id, next_turn_id, judge, skipped, score, agreement, hint, hint_vote, hint_rejections, started_at, finished_at, no_sample)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        j.turnId,
        j.nextTurnId,
        j.judge,
        j.skipped,
        j.score,
        j.agreement,
        j.hint,
        j.hintVote,
        JSON.stringify(j.hintRejections),
        j.startedAt,
        j.finishedAt,
        noSample,
      );
      const vote = stmt(
        this.db,
        `INSERT INTO judge_votes (turn_id, kind, idx, score, hint, raw, failure, detail, attempts, ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      );
      j.evalVotes.forEach((v, i) =>
        vote.run(j.turnId, 'eval', i, v.score, null, v.raw, v.failure, v.detail, v.attempts, Math.round(v.ms)),
      );
      j.hintVotes.forEach((v, i) =>
        vote.run(j.turnId, 'hint', i, v.score, v.hint, v.raw, v.failure, v.detail, v.attempts, Math.round(v.ms)),
      );
      let id: number | null = null;
      if (sample) {
        if (sample.turnId !== j.turnId)
          throw new Error(`sample of turn ${sample.turnId} recorded with the judgment of ${j.turnId}`);
        const r = stmt(
          this.db,
          `INSERT INTO samples (turn_id, source, policy_version, score, rl_advantage, opd_weight, teacher_logprobs, teacher_version, status, created_at)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          sample.turnId,
          sample.source,
          sample.policyVersion,
          sample.score,
          sample.rlAdvantage,
          sample.opdWeight,
          sample.teacherLogprobs ? encodeFloats(sample.teacherLogprobs) : null,
          sample.teacherVersion,
          // A step of an episode waits for its task group (store/step-groups.ts releases it).
          sample.source === 'steps' || sample.source === 'steps+opd' ? 'waiting' : 'queued',
          now,
        );
        id = Number(r.lastInsertRowid);
      }
      const done = stmt(
        this.db,
        `UPDATE closed_turns SET status = 'done', updated_at = ? WHERE turn_id = ? AND status = 'claimed'`,
      ).run(now, j.turnId);
      if (done.changes !== 1) throw new Error(`turn ${j.turnId} is not claimed for judging (deleted, or judged twice)`);
      return id;
    })();
  }

  /**
   * Gives back a claimed closed turn whose judgment could not be committed: to the queue, or out
   * of it (`excluded`) once it has been claimed maxAttempts times, so one bad turn cannot loop forever.
   */
  releaseClaimedTurn(turnId: string, maxAttempts: number): 'pending' | 'excluded' {
    const status =
      ((
        stmt(this.db, 'SELECT attempts FROM closed_turns WHERE turn_id = ?').get(turnId) as
          | { attempts: number }
          | undefined
      )?.attempts ?? 0) >= maxAttempts
        ? 'excluded'
        : 'pending';
    stmt(this.db, `UPDATE closed_turns SET status = ?, updated_at = ? WHERE turn_id = ? AND status = 'claimed'`).run(
      status,
      this.now(),
      turnId,
    );
    return status;
  }

  /** True when the session already has a sample (for the keep-one-per-session option). */
  sessionHasSample(sessionId: string): boolean {
    return (
      stmt(this.db, 'SELECT 1 FROM samples s JOIN turns t ON t.id = s.turn_id WHERE t.session_id = ? LIMIT 1').get(
        sessionId,
      ) !== undefined
    );
  }

  /** Marks queued samples sampled before `minVersion` as stale; returns how many. */
  dropStale(minVersion: number): number {
    return stmt(this.db, `UPDATE samples SET status = 'stale' WHERE status = 'queued' AND policy_version < ?`).run(
      minVersion,
    ).changes;
  }

  /**
   * Marks queued samples whose turn has more than `maxTokens` prompt + completion tokens as
   * `too_long` (queued under a higher bound); returns how many.
   */
  dropTooLong(maxTokens: number): number {
    return stmt(
      this.db,
      `UPDATE samples SET status = 'too_long' WHERE status = 'queued'
      AND turn_id IN (SELECT id FROM turns WHERE prompt_tokens + completion_tokens > ?)`,
    ).run(maxTokens).changes;
  }

  queuedCount(): number {
    return (stmt(this.db, `SELECT count(*) AS n FROM samples WHERE status = 'queued'`).get() as { n: number }).n;
  }

  /** The oldest `limit` queued samples with their turns' token data. */
  queuedSamples(limit: number): Sample[] {
    const rows = stmt(
      this.db,
      `${SAMPLE_WITH_TOKENS}
      WHERE s.status = 'queued' ORDER BY s.id LIMIT ?`,
    ).all(limit) as SampleRow[];
    return rows.map(rowToSample);
  }

  /**
   * The oldest `limit` queued samples, held for a training batch (batch_holds) until recordBatch
   * commits them or releaseBatch gives them up: retention and deletion leave them alone meanwhile.
   */
  takeBatch(limit: number): Sample[] {
    return this.db.transaction(() => {
      const samples = this.queuedSamples(limit);
      holdSamples(
        this.db,
        samples.map((s) => s.id),
        this.now(),
      );
      return samples;
    })();
  }

  /** Gives up the holds of a batch that will not be committed (failed or stopped). */
  releaseBatch(sampleIds: readonly number[]): void {
    if (this.db.open) this.db.transaction(() => releaseSamples(this.db, sampleIds))();
  }

  /**
   * Marks the batch's samples trained and records its steps, with the queues the batch left behind:
   * samples still queued and closed turns not judged yet (returned too, for the log). Releases the
   * samples' holds and records the version it was published as, all in the same transaction.
   */
  recordBatch(
    sampleIds: readonly number[],
    steps: readonly TrainedStep[],
    batch: number,
    version: number,
    published?: VersionRecord,
  ): StepQueues {
    if (steps.length === 0) throw new Error('a trained batch has at least one step');
    const lastStep = steps[steps.length - 1]!.step;
    return this.db.transaction(() => {
      const now = this.now();
      const mark = stmt(
        this.db,
        `UPDATE samples SET status = 'trained', trained_step = ?, trained_at = ? WHERE id = ? AND status = 'queued'`,
      );
      for (const id of sampleIds) {
        if (mark.run(lastStep, now, id).changes !== 1)
          throw new Error(`sample ${id} is not queued: it was trained, dropped or deleted meanwhile`);
      }
      releaseSamples(this.db, sampleIds);
      const n = (sql: string) => (stmt(this.db, sql).get() as { n: number }).n;
      const queues: StepQueues = {
        samplesQueued: n(`SELECT count(*) AS n FROM samples WHERE status = 'queued'`),
        turnsWaiting: n(`SELECT count(*) AS n FROM closed_turns WHERE status IN ('pending', 'claimed')`),
      };
      const insert = stmt(
        this.db,
        `INSERT INTO train_steps (step, batch, version, samples, tokens, loss, grad_norm, applied, lr, clip_fraction, approx_kl, entropy,
        tis_mean, rollout_abs_diff, reward_mean, hints, stale_dropped, seconds, yielded_ms, tokens_per_second, created_at, samples_queued, turns_waiting)
        VALUES (@step, @batch, @version, @samples, @tokens, @loss, @grad_norm, @applied, @lr, @clip_fraction, @approx_kl, @entropy,
        @tis_mean, @rollout_abs_diff, @reward_mean, @hints, @stale_dropped, @seconds, @yielded_ms, @tokens_per_second, @created_at, @samples_queued, @turns_waiting)`,
      );
      for (const s of steps) {
        insert.run({
          step: s.step,
          batch,
          version,
          samples: s.samples,
          tokens: s.tokens,
          loss: s.loss,
          grad_norm: s.gradNorm,
          applied: s.applied ? 1 : 0,
          lr: s.lr,
          clip_fraction: s.clipFraction,
          approx_kl: s.approxKl,
          entropy: s.entropy,
          tis_mean: s.tisMean,
          rollout_abs_diff: s.rolloutAbsDiff,
          reward_mean: s.rewardMean,
          hints: s.hints,
          stale_dropped: s.staleDropped,
          seconds: s.seconds,
          yielded_ms: s.yieldedMs ?? 0,
          tokens_per_second: s.tokensPerSecond,
          created_at: now,
          samples_queued: queues.samplesQueued,
          turns_waiting: queues.turnsWaiting,
        });
      }
      if (published) insertVersion(this.db, published);
      return queues;
    })();
  }

  /**
   * Forgets training the checkpoint does not contain (a crash between the store's commit and the
   * checkpoint's): samples trained after `checkpointStep` go back to the queue and their step rows
   * are deleted. Returns how many samples were requeued.
   */
  reconcileWithCheckpoint(checkpointStep: number): number {
    return this.db.transaction(() => {
      const n = stmt(
        this.db,
        `UPDATE samples SET status = 'queued', trained_step = NULL, trained_at = NULL WHERE status = 'trained' AND trained_step > ?`,
      ).run(checkpointStep).changes;
      stmt(this.db, 'DELETE FROM train_steps WHERE step > ?').run(checkpointStep);
      return n;
    })();
  }

  /** The highest policy version any turn, step or version row mentions: a restarted learner numbers above it. */
  maxVersion(): number {
    const r = stmt(
      this.db,
      `SELECT max(coalesce((SELECT max(policy_version) FROM turns), 0), coalesce((SELECT max(version) FROM train_steps), 0),
        coalesce((SELECT max(version) FROM policy_versions), 0)) AS v`,
    ).get() as { v: number };
    return r.v;
  }

  /** The last optimizer step committed (0: none). */
  lastStep(): number {
    return (stmt(this.db, 'SELECT coalesce(max(step), 0) AS s FROM train_steps').get() as { s: number }).s;
  }

  lastBatch(): number {
    return (stmt(this.db, 'SELECT coalesce(max(batch), 0) AS b FROM train_steps').get() as { b: number }).b;
  }

  /** Step rows, oldest first (status, tests). */
  steps(limit = 1000): (TrainedStep & { batch: number; version: number })[] {
    const rows = stmt(
      this.db,
      'SELECT * FROM (SELECT * FROM train_steps ORDER BY step DESC LIMIT ?) ORDER BY step',
    ).all(limit) as Record<string, number>[];
    return rows.map((r) => ({
      step: r.step!,
      batch: r.batch!,
      version: r.version!,
      samples: r.samples!,
      tokens: r.tokens!,
      loss: r.loss!,
      gradNorm: r.grad_norm!,
      applied: r.applied === 1,
      lr: r.lr!,
      clipFraction: r.clip_fraction!,
      approxKl: r.approx_kl!,
      entropy: r.entropy!,
      tisMean: r.tis_mean!,
      rolloutAbsDiff: r.rollout_abs_diff!,
      rewardMean: r.reward_mean!,
      hints: r.hints!,
      staleDropped: r.stale_dropped!,
      seconds: r.seconds!,
      yieldedMs: r.yielded_ms!,
      tokensPerSecond: r.tokens_per_second!,
    }));
  }

  counts(): LearningCounts {
    const n = (sql: string, ...p: unknown[]) => (stmt(this.db, sql).get(...p) as { n: number }).n;
    const samples = { waiting: 0, queued: 0, trained: 0, stale: 0, too_long: 0 } as Record<SampleStatus, number>;
    for (const r of stmt(this.db, 'SELECT status, count(*) AS n FROM samples GROUP BY status').all() as {
      status: SampleStatus;
      n: number;
    }[])
      samples[r.status] = r.n;
    return {
      judgments: n('SELECT count(*) AS n FROM judgments'),
      skipped: n('SELECT count(*) AS n FROM judgments WHERE skipped IS NOT NULL'),
      samples,
      tooLongTurns: n(`SELECT count(*) AS n FROM judgments WHERE no_sample = 'too_long'`),
      steps: n('SELECT count(*) AS n FROM train_steps'),
      closedPending: n(`SELECT count(*) AS n FROM closed_turns WHERE status = 'pending'`),
      closedClaimed: n(`SELECT count(*) AS n FROM closed_turns WHERE status = 'claimed'`),
    };
  }

  /** Mean judge score and agreement over the last `limit` decisive-or-not judged turns (skipped ones excluded). */
  recentJudgments(limit: number): { turns: number; scoreMean: number; agreementMean: number | null; hints: number } {
    const r = stmt(
      this.db,
      `SELECT count(*) AS n, avg(score) AS s, avg(agreement) AS a, sum(hint IS NOT NULL) AS h
      FROM (SELECT score, agreement, hint FROM judgments WHERE skipped IS NULL ORDER BY finished_at DESC LIMIT ?)`,
    ).get(limit) as { n: number; s: number | null; a: number | null; h: number | null };
    return { turns: r.n, scoreMean: r.s ?? 0, agreementMean: r.a, hints: r.h ?? 0 };
  }

  /** Samples by id (tests and audits). */
  sample(id: number): Sample | undefined {
    const row = stmt(this.db, `${SAMPLE_WITH_TOKENS} WHERE s.id = ?`).get(id) as SampleRow | undefined;
    return row && rowToSample(row);
  }

  sampleOfTurn(turnId: string): (Sample & { trainedStep: number | null }) | undefined {
    const row = stmt(this.db, `${SAMPLE_WITH_TOKENS} WHERE s.turn_id = ?`).get(turnId) as
      | (SampleRow & { trained_step: number | null })
      | undefined;
    return row && { ...rowToSample(row), trainedStep: row.trained_step };
  }
}

function rowToSample(r: SampleRow): Sample {
  return {
    id: r.id,
    turnId: r.turn_id,
    sessionId: r.session_id,
    reward: r.reward,
    stepIndex: r.step_index,
    source: r.source as SampleSource,
    policyVersion: r.policy_version,
    score: r.score as Sample['score'],
    rlAdvantage: r.rl_advantage,
    opdWeight: r.opd_weight,
    teacherLogprobs: r.teacher_logprobs ? decodeFloats(r.teacher_logprobs) : null,
    teacherVersion: r.teacher_version,
    promptIds: decodeIds(r.prompt_ids),
    completionIds: decodeIds(r.completion_ids),
    rolloutLogprobs: decodeFloats(r.logprobs),
    status: r.status as SampleStatus,
    createdAt: r.created_at,
  };
}
