// From a judged turn to at most one training sample: the per-method dispatch. Pure functions.
//
//   method   hint accepted   score +1/-1   sample
//   rl       -               yes           rl      A = wRl * score
//   opd      yes             -             opd     A_t = wOpd * (teacher_t - old_t)
//   combine  yes             yes           opd+rl  A_t = wRl * score + wOpd * (teacher_t - old_t)
//   combine  yes             no (0)        opd     A_t = wOpd * (teacher_t - old_t)
//   combine  no              yes           rl      A = wRl * score   (no fake teacher term, unlike the original)
//   any      otherwise                     nothing (or rl-zero, when kept as the session's only sample)
//   steps    (stepSampleFor)               steps or steps+opd, `waiting` for its task group: every step
//                                          of an episode, whatever its score (its advantage is set at release)
//
// old_t is the learner's own log-prob when the batch is trained, so the teacher term is only
// finished there (ppo.ts, BatchSample.opd); the sample carries the teacher log-probs and the weight.

import type { Score } from '../judge/types.js';
import type { ClosureReason, NoSampleReason, SampleDraft, Turn } from '../types.js';
import type { LearnConfig } from './config.js';
import { usesScore, usesTeacher } from './methods.js';

export type { NoSampleReason };

export interface SampleInput {
  turn: Pick<Turn, 'id' | 'policyVersion' | 'completionIds'>;
  score: Score;
  /** Whether the judgment was skipped (no next state). */
  skipped: boolean;
  /** Teacher log-probs of the completion under the hinted prompt; null without an accepted hint (or when scoring it failed). */
  teacher: { logprobs: number[]; version: number } | null;
  /** An accepted hint whose teacher scoring failed. */
  teacherFailed: boolean;
  /** The session has no sample yet (for keepZeroScorePerSession). */
  firstOfSession: boolean;
}

export function sampleFor(
  input: SampleInput,
  config: Pick<LearnConfig, 'method' | 'wRl' | 'wOpd' | 'keepZeroScorePerSession'>,
): { sample: SampleDraft } | { sample: null; reason: NoSampleReason } {
  const { method } = config;
  if (method === 'steps') throw new RangeError('sampleFor: samples of the steps method come from stepSampleFor');
  if (input.skipped) return { sample: null, reason: 'no_next_state' };
  const decisive = input.score !== 0;
  const teacher = usesTeacher(method) ? input.teacher : null;
  if (teacher && teacher.logprobs.length !== input.turn.completionIds.length) {
    throw new RangeError(
      `turn ${input.turn.id}: ${teacher.logprobs.length} teacher log-probs for ${input.turn.completionIds.length} completion tokens`,
    );
  }
  const base = { turnId: input.turn.id, policyVersion: input.turn.policyVersion, score: input.score };
  const rl = usesScore(method) && decisive;
  if (teacher) {
    return {
      sample: {
        ...base,
        source: rl ? 'opd+rl' : 'opd',
        rlAdvantage: rl ? config.wRl * input.score : 0,
        opdWeight: config.wOpd,
        teacherLogprobs: teacher.logprobs,
        teacherVersion: teacher.version,
      },
    };
  }
  if (rl)
    return {
      sample: {
        ...base,
        source: 'rl',
        rlAdvantage: config.wRl * input.score,
        opdWeight: 0,
        teacherLogprobs: null,
        teacherVersion: null,
      },
    };
  if (method === 'rl' && !decisive && config.keepZeroScorePerSession && input.firstOfSession) {
    return {
      sample: { ...base, source: 'rl-zero', rlAdvantage: 0, opdWeight: 0, teacherLogprobs: null, teacherVersion: null },
    };
  }
  if (input.teacherFailed && usesTeacher(method)) return { sample: null, reason: 'teacher_failed' };
  return { sample: null, reason: method === 'opd' ? 'no_hint' : 'abstained' };
}

export interface StepSampleInput {
  turn: Pick<Turn, 'id' | 'policyVersion' | 'completionIds' | 'sessionId'>;
  closure: ClosureReason;
  score: Score;
  /** Teacher log-probs under the hinted prompt; null without an accepted hint (or when scoring it failed). */
  teacher: { logprobs: number[]; version: number } | null;
}

/**
 * A step of an episode becomes a `waiting` sample whatever its score, with no next state too (the
 * last step before the outcome): its reward needs the outcome and its advantage the task group,
 * both set when the group is released (learn/step-release.ts). A turn without a session, or one the
 * client never kept (superseded, cancelled), is no step.
 */
export function stepSampleFor(
  input: StepSampleInput,
  config: Pick<LearnConfig, 'wOpd'>,
): { sample: SampleDraft } | { sample: null; reason: 'not_a_step' } {
  const { turn } = input;
  if (turn.sessionId === null || input.closure === 'superseded' || input.closure === 'cancelled')
    return { sample: null, reason: 'not_a_step' };
  const teacher = config.wOpd !== 0 ? input.teacher : null;
  if (teacher && teacher.logprobs.length !== turn.completionIds.length) {
    throw new RangeError(
      `turn ${turn.id}: ${teacher.logprobs.length} teacher log-probs for ${turn.completionIds.length} completion tokens`,
    );
  }
  return {
    sample: {
      turnId: turn.id,
      policyVersion: turn.policyVersion,
      score: input.score,
      source: teacher ? 'steps+opd' : 'steps',
      rlAdvantage: 0,
      opdWeight: teacher ? config.wOpd : 0,
      teacherLogprobs: teacher?.logprobs ?? null,
      teacherVersion: teacher?.version ?? null,
    },
  };
}
