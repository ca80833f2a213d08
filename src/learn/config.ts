// The learning loop's settings: one typed record with named defaults, checked once at startup so
// a bad value fails with a message instead of on every batch.

import { checkGuardConfig, DEFAULT_GUARD, type GuardConfig } from './guard.js';
import { METHODS, usesTeacher, type Method } from './methods.js';
import { STEP_REWARDS, type StepReward } from './steps.js';

export { METHODS, type Method, type StepReward };

export interface LearnConfig {
  /**
   * `rl`: advantage = judge score; `opd`: teacher minus current log-prob; `combine`: the weighted
   * sum; `steps`: outcome plus process rewards, normalized per task and step index (general agents).
   */
  method: Method;
  /** The `steps` method's reward: `integrated` = outcome + mean PRM vote of the step; `outcome` = outcome alone. */
  stepReward: StepReward;
  /** Samples per training batch; a batch is trained, then published as one new version. */
  batchSize: number;
  /** Weight of the judge score in the advantage (rl and combine). */
  wRl: number;
  /** Weight of the per-token teacher term (opd and combine). */
  wOpd: number;
  /** Samples sampled more than this many versions before the serving one are dropped (counted). */
  maxStaleVersions: number;
  /** Keep a score-0 turn as its session's only sample when the session has none (the original's option; it adds no gradient). */
  keepZeroScorePerSession: boolean;
  /**
   * The policy that scores teacher log-probs: 0, the frozen base model (the original's teacher), or
   * `current`, the version serving when the turn is judged. A numbered version is not offered: it
   * would be released after the next publication and is not kept across restarts.
   */
  teacherVersion: 0 | 'current';
  /** Write a checkpoint every N batches (1: after each; a crash then retrains at most N-1 batches). */
  checkpointEvery: number;
  /** Closed turns judged at once. */
  judgeConcurrency: number;
  /** A closed turn whose judgment fails to commit this many times leaves the queue. */
  maxJudgeAttempts: number;
  /** How often the loop looks for new closed turns and ready batches when nothing woke it. */
  pollMs: number;
  /**
   * Longest sample (prompt + completion tokens) the learner takes; longer turns are judged but
   * never trained (`too_long`). null: no bound. serve derives it from the learner's memory.
   */
  maxTrainTokens: number | null;
  /**
   * Version folders kept for rollback: those within this many numbers of the newest. null: every
   * one with LoRA (adapters are small), 3 with full fine-tuning (a model's size each).
   */
  keepVersions: number | null;
  /** The automatic rollback guard (learn/guard.ts): off by default. */
  rollbackGuard: boolean;
  /** Judged turns it compares on each side. */
  guardWindow: number;
  /** How much lower (on the -1..1 score scale) the new version's mean must be, beyond noise. */
  guardMargin: number;
  /** The one-sided significance level of that test. */
  guardAlpha: number;
}

export const DEFAULT_LEARN: LearnConfig = {
  method: 'combine',
  stepReward: 'integrated',
  batchSize: 16,
  wRl: 1,
  wOpd: 1,
  maxStaleVersions: 4,
  keepZeroScorePerSession: false,
  teacherVersion: 0,
  checkpointEvery: 1,
  judgeConcurrency: 2,
  maxJudgeAttempts: 3,
  pollMs: 250,
  maxTrainTokens: null,
  keepVersions: null,
  rollbackGuard: DEFAULT_GUARD.enabled,
  guardWindow: DEFAULT_GUARD.window,
  guardMargin: DEFAULT_GUARD.margin,
  guardAlpha: DEFAULT_GUARD.alpha,
};

/** Defaults filled in and every value checked; throws RangeError naming the setting. */
export function resolveLearnConfig(partial: Partial<LearnConfig> = {}): LearnConfig {
  const c: LearnConfig = { ...DEFAULT_LEARN };
  for (const [k, v] of Object.entries(partial)) if (v !== undefined) (c as unknown as Record<string, unknown>)[k] = v;
  const check = (ok: boolean, what: string) => {
    if (!ok) throw new RangeError(`learning: ${what}`);
  };
  const int = (v: number, min: number) => Number.isSafeInteger(v) && v >= min;
  check(METHODS.includes(c.method), `method must be one of ${METHODS.join(', ')}, got ${JSON.stringify(c.method)}`);
  check(int(c.batchSize, 1), `batchSize must be an integer >= 1, got ${c.batchSize}`);
  check(
    Number.isFinite(c.wRl) && Number.isFinite(c.wOpd),
    `wRl and wOpd must be finite numbers, got ${c.wRl} and ${c.wOpd}`,
  );
  check(c.method !== 'combine' || c.wRl !== 0 || c.wOpd !== 0, 'combine needs wRl or wOpd above 0');
  check(c.method !== 'rl' || c.wRl !== 0, 'rl needs wRl above 0 (it would train nothing)');
  check(c.method !== 'opd' || c.wOpd !== 0, 'opd needs wOpd above 0 (it would train nothing)');
  check(c.method !== 'steps' || c.wRl !== 0, 'steps needs wRl above 0 (its rewards are the RL term)');
  check(
    STEP_REWARDS.includes(c.stepReward),
    `stepReward must be one of ${STEP_REWARDS.join(', ')}, got ${JSON.stringify(c.stepReward)}`,
  );
  check(int(c.maxStaleVersions, 0), `maxStaleVersions must be an integer >= 0, got ${c.maxStaleVersions}`);
  check(typeof c.keepZeroScorePerSession === 'boolean', 'keepZeroScorePerSession must be true or false');
  check(
    c.teacherVersion === 0 || c.teacherVersion === 'current',
    `teacherVersion must be 0 (the frozen base) or "current" (the serving version), got ${JSON.stringify(c.teacherVersion)}`,
  );
  check(int(c.checkpointEvery, 1), `checkpointEvery must be an integer >= 1, got ${c.checkpointEvery}`);
  check(int(c.judgeConcurrency, 1), `judgeConcurrency must be an integer >= 1, got ${c.judgeConcurrency}`);
  check(int(c.maxJudgeAttempts, 1), `maxJudgeAttempts must be an integer >= 1, got ${c.maxJudgeAttempts}`);
  check(int(c.pollMs, 1), `pollMs must be an integer >= 1, got ${c.pollMs}`);
  check(
    c.maxTrainTokens === null || int(c.maxTrainTokens, 2),
    `maxTrainTokens must be an integer >= 2 or null, got ${c.maxTrainTokens}`,
  );
  // 2 at least: a sampler in another process may still be loading the version before the newest.
  check(
    c.keepVersions === null || int(c.keepVersions, 2),
    `keepVersions must be an integer >= 2 or null, got ${c.keepVersions}`,
  );
  check(typeof c.rollbackGuard === 'boolean', 'rollbackGuard must be true or false');
  try {
    checkGuardConfig(guardConfigOf(c));
  } catch (e) {
    check(false, (e as Error).message);
  }
  return c;
}

/** The guard's settings out of the flat learning section. */
export function guardConfigOf(c: LearnConfig): GuardConfig {
  return { enabled: c.rollbackGuard, window: c.guardWindow, margin: c.guardMargin, alpha: c.guardAlpha };
}

/** Which judge prompts a method needs: hints feed the teacher, scores feed the RL term. */
export function judgeNeeds(method: Method, wOpd = 1): { hints: boolean } {
  return { hints: usesTeacher(method, wOpd) };
}
