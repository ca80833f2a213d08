// The methods' per-token advantages (learn/methods.ts): rl, opd and combine, with a token whose
// teacher value is missing masked rather than read as log-prob 0.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { combineAdvantages } from '../src/learn/methods.js';

test('combineAdvantages: rl, opd and combine, without the reference defects', () => {
  const old = [-1, -2, -0.5],
    teacher = [-0.5, NaN, -1],
    mask = [1, 1, 1];
  const rl = combineAdvantages('rl', { score: -1, teacherLogprobs: teacher, oldLogprobs: old, mask });
  assert.deepEqual([...rl.advantages], [-1, -1, -1]);
  assert.deepEqual([...rl.mask], [1, 1, 1]);
  const opd = combineAdvantages('opd', { score: 1, teacherLogprobs: teacher, oldLogprobs: old, mask });
  assert.deepEqual([...opd.advantages], [0.5, 0, -0.5]);
  assert.deepEqual([...opd.mask], [1, 0, 1], 'the token without a teacher value is masked, not pushed up by -old');
  assert.equal(opd.tokensWithoutTeacher, 1);
  const both = combineAdvantages(
    'combine',
    { score: 1, teacherLogprobs: teacher, oldLogprobs: old, mask },
    { wRl: 2, wOpd: 0.5 },
  );
  assert.deepEqual([...both.advantages], [2 + 0.25, 0, 2 - 0.25]);
  // An RL-only sample in combine has no OPD term (the reference used rollout - old here).
  const rlOnly = combineAdvantages('combine', { score: -1, teacherLogprobs: null, oldLogprobs: old, mask });
  assert.deepEqual([...rlOnly.advantages], [-1, -1, -1]);
  assert.throws(
    () => combineAdvantages('opd', { score: 0, teacherLogprobs: null, oldLogprobs: old, mask }),
    /OPD samples need them/,
  );
  assert.throws(
    () => combineAdvantages('opd', { score: 0, teacherLogprobs: [0], oldLogprobs: old, mask }),
    /expected 3\): mask 3, teacherLogprobs 1/,
  );
});
