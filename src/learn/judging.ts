// Closed turns to committed judgments: claims pending closed turns from the store as the judge
// queue has room, judges them, scores the teacher when a hint was accepted, builds the sample and
// commits judgment + votes + sample + `done` in one transaction. With `steps` the sample waits for
// its task group, and every pump and commit releases the groups that are complete. A turn whose
// commit fails goes back to the queue (and out of it after maxJudgeAttempts); one interrupted by
// shutdown stays claimed and returns to pending when the store is reopened.

import { JudgeQueue, type JudgeClient, type JudgedTurn, type JudgeLog, type JudgeTurnOptions } from '../judge/index.js';
import type { Store } from '../store/store.js';
import type { ClosedTurn } from '../types.js';
import type { LearnConfig } from './config.js';
import { usesTeacher } from './methods.js';
import { sampleFor, stepSampleFor, type NoSampleReason } from './samples.js';
import { releaseStepGroups } from './step-release.js';
import { teacherLogprobs, type TeacherModel } from './teacher.js';

export interface JudgingFeedOptions {
  store: Store;
  client: JudgeClient;
  /** judgeTurn settings (votes, timeouts, retries...); hint votes are turned off for `rl`. */
  judge: Partial<Omit<JudgeTurnOptions, 'signal'>>;
  config: LearnConfig;
  teacher: TeacherModel;
  /** The version serving now (the teacher when `teacherVersion` is `current`). */
  servingVersion(): number;
  log: JudgeLog;
  /** Called after a sample is committed (wakes the trainer). */
  onSample(): void;
}

export type FeedCounter =
  | 'samples'
  | NoSampleReason
  | 'teacher/prompt_not_reproducible'
  | 'teacher/too_long'
  | 'teacher/scoring_failed'
  | 'commit_failed'
  | 'excluded_after_failures'
  | 'step_groups';

export class JudgingFeed {
  readonly queue: JudgeQueue;
  readonly counters: Record<FeedCounter, number> = {
    samples: 0,
    no_next_state: 0,
    abstained: 0,
    no_hint: 0,
    teacher_failed: 0,
    too_long: 0,
    'teacher/prompt_not_reproducible': 0,
    'teacher/too_long': 0,
    'teacher/scoring_failed': 0,
    commit_failed: 0,
    excluded_after_failures: 0,
    not_a_step: 0,
    step_groups: 0,
  };
  private readonly capacity: number;

  constructor(private readonly opts: JudgingFeedOptions) {
    const { config } = opts;
    const hintVotes = usesTeacher(config.method, config.wOpd) ? (opts.judge.hintVotes ?? opts.judge.votes) : 0;
    this.capacity = config.judgeConcurrency * 2;
    this.queue = new JudgeQueue({
      client: opts.client,
      judge: { ...opts.judge, ...(hintVotes !== undefined ? { hintVotes } : {}) },
      concurrency: config.judgeConcurrency,
      maxWaiting: this.capacity - config.judgeConcurrency,
      log: opts.log,
      onJudged: (judged, closed) => this.commit(judged, closed),
    });
  }

  /** Claims as many pending closed turns as the judge queue has room for; returns how many. */
  pump(): number {
    const room = this.capacity - this.queue.waiting - this.queue.running;
    if (room <= 0) return 0;
    const claimed = this.opts.store.claimClosedTurns(room);
    for (const closed of claimed) {
      if (!this.queue.offer(closed)) this.opts.store.finishClosedTurns([closed.turn.id], 'pending');
    }
    this.releaseGroups();
    return claimed.length;
  }

  /** `steps`: moves the complete task groups' samples to the training queue with their advantages. */
  private releaseGroups(): void {
    const { store, config } = this.opts;
    if (config.method !== 'steps' || !store.isOpen) return;
    const released = releaseStepGroups(store.steps, config);
    for (const group of released) {
      this.counters.step_groups += 1;
      this.opts.log('step_group_released', { ...group });
    }
    if (released.length > 0) this.opts.onSample();
  }

  close(): Promise<void> {
    return this.queue.close();
  }

  private async commit(judged: JudgedTurn, closed: ClosedTurn): Promise<void> {
    await this.commitJudgment(judged, closed);
    // Apart from the judgment's error handling: the judgment is committed whatever the release does.
    this.releaseGroups();
  }

  private async commitJudgment(judged: JudgedTurn, closed: ClosedTurn): Promise<void> {
    const { store, config } = this.opts;
    try {
      // A turn the learner could never take: keep the judgment, skip the teacher's long scoring.
      const tokens = closed.turn.promptIds.length + closed.turn.completionIds.length;
      const tooLong = judged.skipped === null && config.maxTrainTokens !== null && tokens > config.maxTrainTokens;
      // A step too long to train still waits for its group (its reward counts in the group's
      // statistics); the trainer drops it as too_long once the group is released.
      if (tooLong && config.method !== 'steps') {
        store.learning.recordJudgment(judged, null, 'too_long');
        this.counters.too_long += 1;
        this.opts.log('sample_too_long', { turnId: closed.turn.id, tokens, maxTrainTokens: config.maxTrainTokens });
        return;
      }
      let teacher: { logprobs: number[]; version: number } | null = null;
      let teacherFailed = false;
      if (!tooLong && usesTeacher(config.method, config.wOpd) && judged.hint !== null) {
        const version = () => (config.teacherVersion === 'current' ? this.opts.servingVersion() : 0);
        let r = await teacherLogprobs(this.opts.teacher, closed.turn, judged.hint, version());
        // The serving version can be replaced (and released) between reading it and scoring: once more on the new one.
        if (!r.ok && r.reason === 'scoring_failed' && config.teacherVersion === 'current')
          r = await teacherLogprobs(this.opts.teacher, closed.turn, judged.hint, version());
        if (r.ok) teacher = { logprobs: r.logprobs, version: r.version };
        else {
          teacherFailed = true;
          this.counters[`teacher/${r.reason}`] += 1;
          this.opts.log('teacher_failed', { turnId: closed.turn.id, reason: r.reason, detail: r.detail });
        }
      }
      if (config.method === 'steps') {
        const step = stepSampleFor(
          { turn: closed.turn, closure: closed.closure, score: judged.score, teacher },
          config,
        );
        store.learning.recordJudgment(judged, step.sample, step.sample ? null : step.reason);
        if (step.sample) this.counters.samples += 1;
        else this.counters[step.reason] += 1;
        return;
      }
      const sessionId = closed.turn.sessionId;
      const firstOfSession =
        config.keepZeroScorePerSession && sessionId !== null && !store.learning.sessionHasSample(sessionId);
      const result = sampleFor(
        {
          turn: closed.turn,
          score: judged.score,
          skipped: judged.skipped !== null,
          teacher,
          teacherFailed,
          firstOfSession,
        },
        config,
      );
      const id = store.learning.recordJudgment(judged, result.sample, result.sample ? null : result.reason);
      if (result.sample) {
        this.counters.samples += 1;
        this.opts.log('sample_queued', {
          turnId: closed.turn.id,
          sampleId: id,
          source: result.sample.source,
          score: result.sample.score,
          policyVersion: result.sample.policyVersion,
        });
        this.opts.onSample();
      } else {
        this.counters[result.reason] += 1;
      }
    } catch (e) {
      this.counters.commit_failed += 1;
      if (store.isOpen && store.learning.releaseClaimedTurn(closed.turn.id, config.maxJudgeAttempts) === 'excluded')
        this.counters.excluded_after_failures += 1;
      throw e;
    }
  }
}
