// The judge's pure functions, table-driven: box and hint parsing (including the reference's
// section 13.5 vectors), majority, agreement, hint choice and the copy test.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { answerPart, evalVoteFrom, hintVoteFrom, parseBoxed, parseHint } from '../src/judge/parse.js';
import type { HintVote, Score } from '../src/judge/types.js';
import { agreement, chooseHint, copiesText, majority, majorityVote, overlap } from '../src/judge/vote.js';

test('parseBoxed: the last box of the answer wins; +1, 1, -1, 0 tolerated with spaces and .0; anything else is null', () => {
  const cases: [string, Score | null][] = [
    // Reference section 13.5
    ['so \\boxed{1} at first... final \\boxed{-1}', -1],
    ['\\boxed{+1}', 1],
    ['\\boxed{10}', null],
    ['\\boxed{ 1 }', 1], // the reference's Track-1 regex says none; we accept it like its Track-2 parser
    ['\\boxed{1.0}', 1],
    // Our tolerance and strictness
    ['\\boxed{-1.0}', -1],
    ['\\boxed{0}', 0],
    ['\\boxed{-0}', 0],
    ['\\boxed {1}', 1],
    ['$\\boxed{\u22121}$', -1],
    ['\\boxed{1}\n\nfinal: \\boxed{0}', 0],
    ['\\boxed{1} then \\boxed{10}', null], // the last box is the verdict, even when it is invalid
    ['\\boxed{2}', null],
    ['\\boxed{-2}', null],
    ['\\boxed{1/2}', null],
    ['\\boxed{yes}', null],
    ['\\boxed{}', null],
    ['\\boxed{\\text{1}}', null],
    ['boxed{1}', null],
    ['The answer is 1.', null],
    ['', null],
    // Thinking is not the verdict
    ['<think>maybe \\boxed{-1}</think>\\boxed{1}', 1],
    ['<think>maybe \\boxed{-1}</think>no box after thinking', null],
    ['<think>\\boxed{1} and still thinking when cut off', null],
    ['prompt opened thinking \\boxed{-1}</think> \\boxed{0}', 0],
  ];
  for (const [text, expected] of cases) assert.equal(parseBoxed(text), expected, JSON.stringify(text));
});

test('answerPart: after the last </think>; before an unclosed <think>; the whole text otherwise', () => {
  assert.equal(answerPart('<think>a</think>b'), 'b');
  assert.equal(answerPart('a</think>b</think>c'), 'c');
  assert.equal(answerPart('x<think>a'), 'x');
  assert.equal(answerPart('plain'), 'plain');
});

test('parseHint: the last closed block of the answer, trimmed; unclosed or empty is null', () => {
  const cases: [string, string | null][] = [
    ['\\boxed{1}\n[HINT_START] Ask which file. [HINT_END]', 'Ask which file.'],
    ['[HINT_START]first[HINT_END] [HINT_START]\nsecond\n[HINT_END]', 'second'],
    ['[HINT_START]multi\nline[HINT_END]', 'multi\nline'],
    ['[HINT_START]   [HINT_END]', null],
    ['[HINT_START] cut off by max tokens', null],
    ['no hint here', null],
    ['[HINT_END] before [HINT_START]', null],
    ['<think>[HINT_START]draft[HINT_END]</think>\\boxed{-1}', null],
  ];
  for (const [text, expected] of cases) assert.equal(parseHint(text), expected, JSON.stringify(text));
});

test('vote records: an answer without a valid box is an unparseable failure that keeps its raw text', () => {
  assert.deepEqual(evalVoteFrom('ok \\boxed{-1}', 1, 5), {
    score: -1,
    raw: 'ok \\boxed{-1}',
    failure: null,
    detail: null,
    attempts: 1,
    ms: 5,
  });
  const bad = evalVoteFrom('no idea', 2, 7);
  assert.equal(bad.score, null);
  assert.equal(bad.failure, 'unparseable');
  assert.equal(bad.raw, 'no idea');
  assert.equal(bad.attempts, 2);

  const hint = hintVoteFrom('\\boxed{1}[HINT_START]Give the total in \\boxed{18} form.[HINT_END]', 1, 1);
  assert.equal(hint.score, 1, 'a box inside the hint is not the decision');
  assert.equal(hint.hint, 'Give the total in \\boxed{18} form.');
  assert.equal(hintVoteFrom('\\boxed{-1}', 1, 1).hint, null);
  assert.equal(
    hintVoteFrom('\\boxed{-1} [HINT_START]ignored hint text[HINT_END]', 1, 1).hint,
    null,
    'a negative vote carries no hint',
  );
  const zero = hintVoteFrom('\\boxed{0}', 1, 1);
  assert.equal(zero.failure, 'unparseable', 'the hint prompt allows only 1 and -1');
  assert.equal(zero.score, null);
});

test('majorityVote and agreement: reference vectors; ties and no valid vote abstain', () => {
  const cases: [(Score | null)[], Score, boolean, number | null][] = [
    [[1, 1, -1], 1, false, 2 / 3],
    [[1, -1, null], 0, true, 0],
    [[1, null, null], 1, false, 1],
    [[0, 0, 1], 0, false, 2 / 3],
    [[1, 0, -1], 0, true, 1 / 3],
    [[null, null, null], 0, true, null],
    [[], 0, true, null],
    [[-1, -1, -1], -1, false, 1],
    [[1, 1, -1, -1], 0, true, 0],
    [[-1, -1, 1, 0, null], -1, false, 0.5],
  ];
  for (const [scores, score, abstained, agree] of cases) {
    const label = JSON.stringify(scores);
    assert.equal(majorityVote(scores), score, label);
    assert.deepEqual(majority(scores), { score, abstained }, label);
    assert.equal(agreement(scores, score), agree, label);
  }
});

const vote = (score: 1 | -1 | null, hint: string | null): HintVote => ({
  score,
  hint,
  raw: '',
  failure: score === null ? 'unparseable' : null,
  detail: null,
  attempts: 1,
  ms: 0,
});

test('chooseHint: positive votes only; longer than 10 characters; the longest wins, first on ties; bounded; no copies', () => {
  const next = 'No, I wanted the temperature in Celsius, not Fahrenheit. Please redo it.';
  // Reference section 13.5: a 5-character hint is rejected; of two valid hints the longest wins.
  assert.deepEqual(chooseHint([vote(1, 'short')], next), {
    hint: null,
    vote: null,
    rejections: [{ vote: 0, reason: 'too_short' }],
  });
  assert.deepEqual(
    chooseHint([vote(1, 'Use Celsius units.'), vote(1, 'Report temperatures in Celsius by default.')], next).vote,
    1,
  );

  const c = chooseHint(
    [
      vote(-1, null),
      vote(1, null),
      vote(1, 'exactly10!'),
      vote(1, 'Give temperatures in Celsius.'),
      vote(null, null),
      vote(1, 'x'.repeat(601)),
      vote(1, 'I wanted the temperature in Celsius, not Fahrenheit.'),
      vote(1, 'Give temperatures in Celsius!'),
    ],
    next,
  );
  assert.equal(c.hint, 'Give temperatures in Celsius.', 'the first of two equally long hints');
  assert.equal(c.vote, 3);
  assert.deepEqual(c.rejections, [
    { vote: 1, reason: 'missing' },
    { vote: 2, reason: 'too_short' },
    { vote: 5, reason: 'too_long' },
    { vote: 6, reason: 'copies_next_state' },
  ]);
  assert.equal(chooseHint([vote(1, 'x'.repeat(601))], next, { maxChars: 700 }).vote, 0, 'the bound is configurable');
  assert.equal(chooseHint([vote(-1, 'A hint on a negative vote.')], next).hint, null);
  assert.deepEqual(chooseHint([], next), { hint: null, vote: null, rejections: [] });
});

test('chooseHint: the positive hint votes must be a majority of the valid ones; quorum any is the reference', () => {
  const next = 'No, I wanted the temperature in Celsius, not Fahrenheit. Please redo it.';
  const hint = 'Report temperatures in Celsius by default.';
  assert.deepEqual(chooseHint([vote(1, hint), vote(-1, null), vote(-1, null)], next), {
    hint: null,
    vote: null,
    rejections: [{ vote: 0, reason: 'outvoted' }],
  });
  assert.equal(chooseHint([vote(1, hint), vote(-1, null), vote(-1, null)], next, { quorum: 'any' }).hint, hint);
  const two = chooseHint([vote(-1, null), vote(1, null), vote(1, hint)], next);
  assert.deepEqual(
    [two.hint, two.vote, two.rejections],
    [hint, 2, [{ vote: 1, reason: 'missing' }]],
    'two positive votes of three carry it, even when one has no hint',
  );
  assert.equal(
    chooseHint([vote(1, hint), vote(null, null), vote(-1, null)], next).hint,
    null,
    'one of two valid votes is a tie',
  );
  assert.equal(
    chooseHint([vote(1, hint), vote(null, null), vote(null, null)], next).hint,
    hint,
    'failed votes do not count against it',
  );
});

test('copy test: word-trigram containment in the next state, case and punctuation blind', () => {
  const tool = "Error: ENOENT: no such file or directory, open '/home/u/notes.txt'";
  const cases: [string, string, boolean][] = [
    ['Please answer in French, not English.', 'please answer in FRENCH -- not english!!', true],
    ['Answer in French from the first message.', 'Please answer in French, not English.', false],
    ['The user wants the answer in French, not English.', 'Please answer in French, not English.', false],
    ['ENOENT: no such file or directory', tool, true],
    ['Check that the file exists (list the folder) before opening it.', tool, false],
    ['French', 'Please answer in French.', true], // under three words: unigram containment
    ['Prefer Celsius', 'Please answer in French.', false],
    ['', 'anything', false],
  ];
  for (const [hint, source, copies] of cases)
    assert.equal(copiesText(hint, source), copies, `${hint} <- ${source}: ${overlap(hint, source)}`);
  assert.equal(overlap('a b c d', 'a b c x'), 0.5);
  assert.equal(copiesText('a b c d', 'a b c x', 0.5), true, 'the threshold is a parameter');
});
