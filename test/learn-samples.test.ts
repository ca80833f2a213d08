// The learning loop's pure parts: the per-method sample dispatch (every row of the table in
// src/learn/samples.ts), the hinted prompt, config checking and the progress line.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import type { Score } from '../src/judge/types.js';
import { DEFAULT_LEARN, judgeNeeds, resolveLearnConfig, type LearnConfig, type Method } from '../src/learn/config.js';
import { sampleFor, type SampleInput } from '../src/learn/samples.js';
import { judgeHealth } from '../src/judge/health.js';
import { progressLine, type LearningStatus } from '../src/learn/status.js';
import { HINT_HEADER, hintedMessages } from '../src/learn/teacher.js';

const TEACHER = { logprobs: [-0.5, -1.25, -Infinity], version: 0 };
const turn = { id: 'turn_x', policyVersion: 7, completionIds: [11, 12, 13] };

function input(over: Partial<SampleInput> = {}): SampleInput {
  return { turn, score: 1, skipped: false, teacher: null, teacherFailed: false, firstOfSession: false, ...over };
}

function config(method: Method, over: Partial<LearnConfig> = {}) {
  return { method, wRl: 1, wOpd: 1, keepZeroScorePerSession: false, ...over };
}

const noTeacherTerm = { opdWeight: 0, teacherLogprobs: null, teacherVersion: null };

test('sampleFor: rl uses the decisive score alone and never the teacher', () => {
  for (const score of [1, -1] as Score[]) {
    for (const teacher of [null, TEACHER]) {
      assert.deepEqual(
        sampleFor(input({ score, teacher }), config('rl', { wRl: 0.5, wOpd: 3 })),
        {
          sample: {
            turnId: 'turn_x',
            policyVersion: 7,
            score,
            source: 'rl',
            rlAdvantage: 0.5 * score,
            ...noTeacherTerm,
          },
        },
        `score ${score}, teacher ${teacher !== null}`,
      );
    }
  }
  // A teacher of the wrong length is ignored by rl rather than refused.
  assert.equal(sampleFor(input({ teacher: { logprobs: [-1], version: 0 } }), config('rl')).sample?.source, 'rl');
  assert.deepEqual(sampleFor(input({ score: 0 }), config('rl')), { sample: null, reason: 'abstained' });
  assert.deepEqual(sampleFor(input({ score: 0, teacher: TEACHER }), config('rl')), {
    sample: null,
    reason: 'abstained',
  });
  assert.deepEqual(
    sampleFor(input({ score: 0, teacherFailed: true }), config('rl')),
    { sample: null, reason: 'abstained' },
    'rl asks no teacher: no teacher failure',
  );
});

test('sampleFor: opd uses the teacher alone, whatever the score', () => {
  for (const score of [1, 0, -1] as Score[]) {
    assert.deepEqual(
      sampleFor(
        input({ score, teacher: { logprobs: TEACHER.logprobs, version: 2 } }),
        config('opd', { wRl: 5, wOpd: 0.25 }),
      ),
      {
        sample: {
          turnId: 'turn_x',
          policyVersion: 7,
          score,
          source: 'opd',
          rlAdvantage: 0,
          opdWeight: 0.25,
          teacherLogprobs: TEACHER.logprobs,
          teacherVersion: 2,
        },
      },
      `score ${score}`,
    );
    assert.deepEqual(
      sampleFor(input({ score }), config('opd')),
      { sample: null, reason: 'no_hint' },
      'no hint: nothing, even with a decisive score',
    );
    assert.deepEqual(sampleFor(input({ score, teacherFailed: true }), config('opd')), {
      sample: null,
      reason: 'teacher_failed',
    });
  }
});

test('sampleFor: combine adds both terms, falls back to either one, and never fakes a teacher', () => {
  const c = config('combine', { wRl: 0.5, wOpd: 2 });
  const withTeacher = { opdWeight: 2, teacherLogprobs: TEACHER.logprobs, teacherVersion: 0 };
  // hint + decisive score: opd+rl
  for (const score of [1, -1] as Score[]) {
    assert.deepEqual(sampleFor(input({ score, teacher: TEACHER }), c), {
      sample: { turnId: 'turn_x', policyVersion: 7, score, source: 'opd+rl', rlAdvantage: 0.5 * score, ...withTeacher },
    });
  }
  // hint + abstaining score: opd
  assert.deepEqual(sampleFor(input({ score: 0, teacher: TEACHER }), c), {
    sample: { turnId: 'turn_x', policyVersion: 7, score: 0, source: 'opd', rlAdvantage: 0, ...withTeacher },
  });
  // no hint + decisive score: rl, with no teacher term at all
  for (const score of [1, -1] as Score[]) {
    assert.deepEqual(sampleFor(input({ score }), c), {
      sample: { turnId: 'turn_x', policyVersion: 7, score, source: 'rl', rlAdvantage: 0.5 * score, ...noTeacherTerm },
    });
    // a failed teacher with a decisive score still gives the rl sample
    assert.deepEqual(sampleFor(input({ score, teacherFailed: true }), c), {
      sample: { turnId: 'turn_x', policyVersion: 7, score, source: 'rl', rlAdvantage: 0.5 * score, ...noTeacherTerm },
    });
  }
  // neither
  assert.deepEqual(sampleFor(input({ score: 0 }), c), { sample: null, reason: 'abstained' });
  assert.deepEqual(sampleFor(input({ score: 0, teacherFailed: true }), c), { sample: null, reason: 'teacher_failed' });
});

test('sampleFor: a skipped turn (no next state) gives nothing for every method, whatever else is set', () => {
  for (const method of ['rl', 'opd', 'combine'] as Method[]) {
    for (const extra of [
      {},
      { teacher: TEACHER },
      { teacher: { logprobs: [-1], version: 0 } },
      { teacherFailed: true },
      { score: 0 as Score, firstOfSession: true },
    ]) {
      assert.deepEqual(
        sampleFor(input({ skipped: true, ...extra }), config(method, { keepZeroScorePerSession: true })),
        { sample: null, reason: 'no_next_state' },
        `${method} ${JSON.stringify(extra)}`,
      );
    }
  }
});

test("sampleFor: keepZeroScorePerSession keeps a score-0 turn as rl-zero only for rl, only as the session's first", () => {
  const keep = config('rl', { keepZeroScorePerSession: true, wRl: 3 });
  assert.deepEqual(sampleFor(input({ score: 0, firstOfSession: true }), keep), {
    sample: { turnId: 'turn_x', policyVersion: 7, score: 0, source: 'rl-zero', rlAdvantage: 0, ...noTeacherTerm },
  });
  assert.deepEqual(sampleFor(input({ score: 0, firstOfSession: false }), keep), { sample: null, reason: 'abstained' });
  assert.deepEqual(
    sampleFor(input({ score: 0, firstOfSession: true }), config('rl')),
    { sample: null, reason: 'abstained' },
    'option off',
  );
  assert.equal(
    sampleFor(input({ score: -1, firstOfSession: true }), keep).sample?.source,
    'rl',
    'a decisive score is an ordinary rl sample',
  );
  assert.deepEqual(
    sampleFor(input({ score: 0, firstOfSession: true }), config('combine', { keepZeroScorePerSession: true })),
    { sample: null, reason: 'abstained' },
  );
  assert.deepEqual(
    sampleFor(input({ score: 0, firstOfSession: true }), config('opd', { keepZeroScorePerSession: true })),
    { sample: null, reason: 'no_hint' },
  );
});

test('sampleFor: teacher log-probs of the wrong length are an error naming the turn (opd, combine)', () => {
  for (const method of ['opd', 'combine'] as Method[]) {
    for (const logprobs of [[-1, -2], [-1, -2, -3, -4], []]) {
      assert.throws(
        () => sampleFor(input({ teacher: { logprobs, version: 0 } }), config(method)),
        (e: Error) =>
          e instanceof RangeError &&
          e.message === `turn turn_x: ${logprobs.length} teacher log-probs for 3 completion tokens`,
        `${method} ${logprobs.length}`,
      );
    }
  }
});

test("sampleFor: the sample carries the teacher log-probs as given and the turn's own policy version", () => {
  const r = sampleFor(input({ teacher: TEACHER }), config('combine'));
  assert.ok(r.sample);
  assert.equal(r.sample.teacherLogprobs, TEACHER.logprobs);
  assert.equal(r.sample.policyVersion, 7, "the version that sampled the turn, not the teacher's");
});

test('hintedMessages: the last user message ends with the hint; the rest is unchanged', () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'sys' },
    { role: 'user', content: 'first' },
    { role: 'assistant', content: 'reply' },
    { role: 'user', content: 'second  ' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{}' } }],
    },
    { role: 'tool', content: 'file text', tool_call_id: 'c1' },
  ];
  const before = structuredClone(messages);
  const out = hintedMessages(messages, 'Use metric units.');
  assert.deepEqual(messages, before, 'the input is not mutated');
  assert.equal(out.length, messages.length);
  assert.equal(out[3]!.content, `second  \n\n${HINT_HEADER}\nUse metric units.`);
  assert.equal(out[3]!.role, 'user');
  for (const i of [0, 1, 2, 4, 5]) assert.deepEqual(out[i], messages[i], `message ${i}`);
  for (const i of out.keys()) assert.notEqual(out[i], messages[i], 'copies, not the same objects');
  out[4]!.tool_calls = [];
  out[5]!.content = 'changed';
  assert.deepEqual(messages, before, 'changing the copy does not change the input');
});

test('hintedMessages: no user message: the last message; none at all: one user message', () => {
  const noUser: ChatMessage[] = [
    { role: 'system', content: 'sys' },
    { role: 'assistant', content: 'hello' },
  ];
  const out = hintedMessages(noUser, 'hint');
  assert.deepEqual(out, [
    { role: 'system', content: 'sys' },
    { role: 'assistant', content: `hello\n\n${HINT_HEADER}\nhint` },
  ]);
  assert.deepEqual(noUser, [
    { role: 'system', content: 'sys' },
    { role: 'assistant', content: 'hello' },
  ]);
  assert.deepEqual(hintedMessages([], 'the hint'), [{ role: 'user', content: `${HINT_HEADER}\nthe hint` }]);
  assert.deepEqual(
    hintedMessages([{ role: 'user', content: null }], 'h'),
    [{ role: 'user', content: `${HINT_HEADER}\nh` }],
    'empty content: no leading blank lines',
  );
});

test('hintedMessages: array content is flattened to text, the parts left intact in the input', () => {
  const parts = [
    { type: 'text' as const, text: 'part one' },
    { type: 'text' as const, text: 'part two' },
  ];
  const messages: ChatMessage[] = [{ role: 'user', content: parts }];
  const out = hintedMessages(messages, 'hint');
  assert.equal(out[0]!.content, `part one\npart two\n\n${HINT_HEADER}\nhint`);
  assert.equal(messages[0]!.content, parts);
  assert.deepEqual(parts, [
    { type: 'text', text: 'part one' },
    { type: 'text', text: 'part two' },
  ]);
});

test('resolveLearnConfig: defaults, overrides, undefined keeps the default', () => {
  assert.deepEqual(resolveLearnConfig(), DEFAULT_LEARN);
  assert.notEqual(resolveLearnConfig(), DEFAULT_LEARN, 'a copy');
  const c = resolveLearnConfig({ method: 'rl', batchSize: 2, wRl: 0.5, pollMs: undefined });
  assert.equal(c.method, 'rl');
  assert.equal(c.batchSize, 2);
  assert.equal(c.wRl, 0.5);
  assert.equal(c.pollMs, DEFAULT_LEARN.pollMs);
  assert.equal(resolveLearnConfig({ method: 'combine', wRl: 0, wOpd: 1 }).wRl, 0, 'one weight may be 0');
  assert.equal(resolveLearnConfig({ maxStaleVersions: 0, teacherVersion: 0 }).maxStaleVersions, 0);
  assert.equal(resolveLearnConfig({ teacherVersion: 'current' }).teacherVersion, 'current');
  assert.deepEqual(judgeNeeds('rl'), { hints: false });
  assert.deepEqual(judgeNeeds('opd'), { hints: true });
  assert.deepEqual(judgeNeeds('combine'), { hints: true });
});

test('resolveLearnConfig: each bad value is a RangeError naming the setting', () => {
  const bad: [Partial<LearnConfig>, RegExp][] = [
    [{ method: 'ppo' as Method }, /^learning: method must be one of rl, opd, combine, steps, got "ppo"$/],
    [{ batchSize: 0 }, /^learning: batchSize must be an integer >= 1, got 0$/],
    [{ batchSize: 1.5 }, /^learning: batchSize .* got 1\.5$/],
    [{ wRl: Number.NaN }, /^learning: wRl and wOpd must be finite numbers, got NaN and 1$/],
    [{ wOpd: Infinity }, /^learning: wRl and wOpd .* got 1 and Infinity$/],
    [{ method: 'combine', wRl: 0, wOpd: 0 }, /^learning: combine needs wRl or wOpd above 0$/],
    [{ maxStaleVersions: -1 }, /^learning: maxStaleVersions must be an integer >= 0, got -1$/],
    [
      { keepZeroScorePerSession: 'yes' as unknown as boolean },
      /^learning: keepZeroScorePerSession must be true or false$/,
    ],
    [{ method: 'rl', wRl: 0 }, /^learning: rl needs wRl above 0 \(it would train nothing\)$/],
    [{ method: 'opd', wOpd: 0 }, /^learning: opd needs wOpd above 0 \(it would train nothing\)$/],
    [
      { teacherVersion: -1 as 0 },
      /^learning: teacherVersion must be 0 \(the frozen base\) or "current" \(the serving version\), got -1$/,
    ],
    [
      { teacherVersion: 3 as 0 },
      /^learning: teacherVersion must be 0 \(the frozen base\) or "current" \(the serving version\), got 3$/,
    ],
    [{ checkpointEvery: 0 }, /^learning: checkpointEvery must be an integer >= 1, got 0$/],
    [{ judgeConcurrency: 0 }, /^learning: judgeConcurrency must be an integer >= 1, got 0$/],
    [{ maxJudgeAttempts: 0 }, /^learning: maxJudgeAttempts must be an integer >= 1, got 0$/],
    [{ pollMs: 0 }, /^learning: pollMs must be an integer >= 1, got 0$/],
    [{ pollMs: 2.5 }, /^learning: pollMs .* got 2\.5$/],
  ];
  for (const [partial, message] of bad) {
    assert.throws(
      () => resolveLearnConfig(partial),
      (e: Error) => e instanceof RangeError && message.test(e.message),
      JSON.stringify(partial),
    );
  }
});

function status(over: Partial<LearningStatus> = {}): LearningStatus {
  const feed = {
    samples: 0,
    no_next_state: 0,
    abstained: 0,
    no_hint: 0,
    teacher_failed: 0,
    too_long: 0,
    not_a_step: 0,
    step_groups: 0,
    'teacher/prompt_not_reproducible': 0,
    'teacher/too_long': 0,
    'teacher/scoring_failed': 0,
    commit_failed: 0,
    excluded_after_failures: 0,
  };
  return {
    method: 'combine',
    version: 4,
    steps: 12,
    batches: 6,
    batchSize: 16,
    trainer: { state: 'waiting', error: null },
    turns: { main: 40, side: 9, open: 2 },
    queues: { closedTurns: 3, judging: 2, samples: 5 },
    samples: { waiting: 0, queued: 5, trained: 96, stale: 1, too_long: 0 },
    tooLong: { maxTrainTokens: 8192, turns: 0 },
    judge: {
      name: 'double',
      judged: 35,
      skipped: 2,
      recent: { turns: 35, scoreMean: 0.4285714, agreementMean: 0.9, hints: 10 },
      counters: {},
      health: judgeHealth([]),
    },
    feed,
    lastBatch: null,
    uptimeSeconds: 60,
    ...over,
  };
}

test('progressLine: turns, judged with waiting, samples, step, version, signed reward, trainer state', () => {
  assert.equal(
    progressLine(status()),
    '[openclaw-rl] turns 40 main/9 side · judged 35 (5 waiting) · samples 5/16 queued, 96 trained · step 12 · version 4 · reward +0.43',
  );
  const judge = status().judge;
  assert.match(
    progressLine(status({ judge: { ...judge, recent: { ...judge.recent, scoreMean: -1 / 3 } } })),
    / reward -0\.33$/,
  );
  assert.match(
    progressLine(status({ judge: { ...judge, recent: { ...judge.recent, scoreMean: 0 } } })),
    / reward \+0\.00$/,
  );
  assert.match(
    progressLine(status({ judge: { ...judge, recent: { turns: 0, scoreMean: 0, agreementMean: null, hints: 0 } } })),
    / reward -$/,
    'nothing judged yet',
  );
  assert.match(progressLine(status({ trainer: { state: 'training', error: null } })), / reward \+0\.43 · training$/);
  assert.match(
    progressLine(status({ trainer: { state: 'failed', error: 'boom' } })),
    / reward \+0\.43 · TRAINER FAILED \(see log\)$/,
  );
  assert.doesNotMatch(
    progressLine(status({ trainer: { state: 'failed', error: 'secret detail' } })),
    /secret detail/,
    'the error text stays in the log',
  );
  assert.match(progressLine(status({ trainer: { state: 'closed', error: null } })), / reward \+0\.43$/);
  const failing = judgeHealth(Array.from({ length: 20 }, (_, i) => (i < 18 ? 'unparseable' : 'ok')));
  assert.match(
    progressLine(status({ judge: { ...judge, health: failing } })),
    / reward \+0\.43 · JUDGE FAILING: 18 of 20 recent judge votes failed \(unparseable 18\)$/,
  );
  const tooLong = status({
    tooLong: { maxTrainTokens: 8192, turns: 2 },
    samples: { waiting: 0, queued: 5, trained: 96, stale: 1, too_long: 1 },
  });
  assert.match(progressLine(tooLong), / 96 trained, 3 too long \(> 8192 tokens\) · step 12 /);
});
