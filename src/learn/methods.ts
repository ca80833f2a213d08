// The learning methods, defined once: what each trains on and its per-token advantage.
//
//   rl       A_t = wRl * score                               (the judge's score on every token)
//   opd      A_t = wOpd * (teacher_t - old_t)                (old: the learner's own log-probs before the batch)
//   combine  A_t = wRl * score + wOpd * (teacher_t - old_t)
//   steps    A_t = wRl * A_step [+ wOpd * (teacher_t - old_t) when a hint was accepted]
//            A_step: the step's reward (outcome, plus the mean PRM vote with `integrated`)
//            normalized among the steps with the same index across the task's rollouts (steps.ts)
//
// A token whose teacher value is not finite is masked. The OPD term needs the learner's old
// log-probs, so it is finished when the batch is trained (ppo.ts); samples.ts decides which terms a
// judged turn gets.

export type Method = 'rl' | 'opd' | 'combine' | 'steps';

export const METHODS: readonly Method[] = ['rl', 'opd', 'combine', 'steps'];

/** The methods for a personal agent (judged conversations without outcomes; the personalization benchmark). */
export type PersonalMethod = Exclude<Method, 'steps'>;

export const PERSONAL_METHODS: readonly PersonalMethod[] = ['rl', 'opd', 'combine'];

/** Whether a method can train on the teacher's log-probs (needs hints); `steps` only with wOpd above 0. */
export function usesTeacher(method: Method, wOpd = 1): boolean {
  return method !== 'rl' && !(method === 'steps' && wOpd === 0);
}

/** Whether a method trains on the judge's score. */
export function usesScore(method: Method): boolean {
  return method !== 'opd';
}

export interface AdvantageWeights {
  wRl: number;
  wOpd: number;
}

export interface AdvantageInput {
  /** The turn's majority PRM score (-1, 0 or +1). */
  score: number;
  /**
   * Teacher (hint in context) log-prob of each completion token, NaN where it gave none; null for
   * an RL-only sample [R].
   */
  teacherLogprobs: ArrayLike<number> | null;
  oldLogprobs: ArrayLike<number>;
  mask: ArrayLike<number>;
}

export interface Advantages {
  advantages: Float64Array;
  /** The input mask, minus the tokens whose teacher term is missing. */
  mask: Float64Array;
  tokensWithoutTeacher: number;
}

/**
 * A_t = wRl score + wOpd (teacher_t - old_t). `rl` uses wOpd = 0 and `opd` wRl = 0; `combine`
 * takes both weights. A sample without a teacher gets no OPD term (the original substituted the
 * rollout log-probs, training on the serve/train mismatch); a token without a teacher value is
 * masked (the original read it as log-prob 0 and pushed it up).
 */
export function combineAdvantages(
  method: Method,
  input: AdvantageInput,
  weights: AdvantageWeights = { wRl: 1, wOpd: 1 },
): Advantages {
  const { oldLogprobs: old_R, teacherLogprobs: teacher_R } = input;
  const R = old_R.length;
  const lengths = { mask: input.mask.length, ...(teacher_R ? { teacherLogprobs: teacher_R.length } : {}) };
  if (Object.values(lengths).some((n) => n !== R)) {
    const listed = Object.entries(lengths).map(([name, n]) => `${name} ${n}`);
    throw new RangeError(
      `combineAdvantages(${method}): per-token arrays differ in length (expected ${R}): ${listed.join(', ')}`,
    );
  }
  if (!Number.isFinite(input.score))
    throw new RangeError(`combineAdvantages: score must be finite, got ${input.score}`);
  const wRl = method === 'opd' ? 0 : weights.wRl;
  const wOpd = method === 'rl' ? 0 : weights.wOpd;
  if (method === 'opd' && !teacher_R)
    throw new RangeError('combineAdvantages(opd): the sample has no teacher log-probs; OPD samples need them');
  const teacherTerm_R = wOpd !== 0 ? teacher_R : null;
  const advantages = new Float64Array(R),
    mask = Float64Array.from(input.mask);
  let tokensWithoutTeacher = 0;
  for (let t = 0; t < R; t++) {
    let A = wRl * input.score;
    if (teacherTerm_R) {
      const teacher = teacherTerm_R[t]!;
      if (!Number.isFinite(teacher)) {
        if (mask[t] !== 0) tokensWithoutTeacher++;
        mask[t] = 0;
        continue;
      }
      A += wOpd * (teacher - old_R[t]!);
    }
    advantages[t] = A;
  }
  return { advantages, mask, tokensWithoutTeacher };
}
