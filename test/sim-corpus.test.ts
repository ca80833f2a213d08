// The sim base policy's pre-training data: the first replies sample the base style mix (a
// minority in each user's preferred style), corrections and hints are mostly followed, and a
// conversation becomes one sample whose trained tokens are exactly the assistant's, with the
// prompt ids serving would produce.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderPrompt } from '../src/chat/prompt.js';
import { ChatTemplate, OPENCLAW_CHAT_TEMPLATE } from '../src/chat/tokenizer/chat-template.js';
import { TextTokenizer } from '../src/chat/tokenizer/tokenizer.js';
import { DEFAULT_SPECIAL_TOKENS, trainByteLevelBpe } from '../src/chat/tokenizer-training/train-bpe.js';
import { HINT_HEADER } from '../src/learn/teacher.js';
import { buildCorpus, DEFAULT_CORPUS, GRADING_MIX, HOMEWORK_MIX } from '../src/sim/corpus.js';
import { VAGUE_HINTS } from '../src/sim/hints.js';
import { loadProblems } from '../src/sim/problems.js';
import { STUDENT_RUBRIC, TEACHER_RUBRIC } from '../src/sim/rubrics.js';
import { conversationSample } from '../src/sim/samples.js';

const problems = loadProblems().train;
const corpus = buildCorpus(problems, { ...DEFAULT_CORPUS, conversations: 3000 });
const rubricOf = (opener: string) =>
  opener.includes('grading') || opener.includes('grade') ? TEACHER_RUBRIC : STUDENT_RUBRIC;

test('first replies follow the base mix: the preferred style is a minority as set for each user', () => {
  const firsts: Record<'student' | 'teacher', [number, number]> = { student: [0, 0], teacher: [0, 0] };
  for (const c of corpus) {
    const opener = c[0]!.content as string;
    if (opener.includes(HINT_HEADER)) continue;
    const who = rubricOf(opener) === TEACHER_RUBRIC ? 'teacher' : 'student';
    firsts[who][1]++;
    if (rubricOf(opener).judge(c[1]!.content as string).accepted) firsts[who][0]++;
  }
  const share = (x: number[]) => x[0]! / x[1]!;
  assert.ok(Math.abs(share(firsts.student) - HOMEWORK_MIX.natural) < 0.04, `student ${share(firsts.student)}`);
  assert.ok(Math.abs(share(firsts.teacher) - GRADING_MIX.warm) < 0.04, `teacher ${share(firsts.teacher)}`);
});

test('a reply after a correction or a hint is mostly in the preferred style', () => {
  let followed = 0,
    total = 0;
  for (const c of corpus) {
    const rubric = rubricOf(c[0]!.content as string);
    for (let i = 1; i < c.length; i += 2) {
      const asked = c[i - 1]!.content as string;
      const hinted = asked.includes(HINT_HEADER) && !VAGUE_HINTS.some((h) => asked.includes(h));
      const guided = hinted || (i >= 3 && !rubric.judge(c[i - 2]!.content as string).accepted);
      if (!guided || /saved|added it|appended|glad|welcome|happy to help/i.test(c[i]!.content as string)) continue;
      total++;
      if (rubric.judge(c[i]!.content as string).accepted) followed++;
    }
  }
  assert.ok(total > 500 && followed / total > 0.88, `${followed}/${total}`);
});

test('a vague hint leaves the first reply to the base mix', () => {
  let preferred = 0,
    total = 0;
  for (const c of corpus) {
    const opener = c[0]!.content as string;
    if (!VAGUE_HINTS.some((h) => opener.includes(h))) continue;
    total++;
    if (rubricOf(opener).judge(c[1]!.content as string).accepted) preferred++;
  }
  assert.ok(total > 50 && preferred / total < 0.3, `${preferred}/${total}`);
});

test('a conversation trains exactly the assistant tokens, after the prompt serving renders', () => {
  const files = trainByteLevelBpe(
    corpus.slice(0, 200).map((c) => c.map((m) => m.content).join('\n')),
    {
      vocabSize: 600,
      specialTokens: DEFAULT_SPECIAL_TOKENS,
      addedTokens: [],
    },
  );
  const tokenizer = TextTokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  const template = ChatTemplate.fromString(OPENCLAW_CHAT_TEMPLATE, 'test');
  const end = tokenizer.tokenToId('<|im_end|>')!;
  for (const c of corpus.slice(0, 50)) {
    const s = conversationSample(c, { tokenizer, template });
    assert.deepEqual(s.promptIds, renderPrompt(template, tokenizer, c.slice(0, 1), { addGenerationPrompt: true }).ids);
    assert.equal(s.completionIds.length, s.mask!.length);
    // The trained runs of tokens, decoded, are the replies, each closed by <|im_end|>.
    const runs: number[][] = [];
    s.completionIds.forEach((id, t) => {
      if (!s.mask![t]) return;
      if (t === 0 || !s.mask![t - 1]) runs.push([]);
      runs[runs.length - 1]!.push(id);
    });
    const replies = c.filter((m) => m.role === 'assistant').map((m) => m.content);
    assert.deepEqual(
      runs.map((r) => r[r.length - 1]),
      replies.map(() => end),
    );
    assert.deepEqual(
      runs.map((r) => tokenizer.decode(r.slice(0, -1))),
      replies,
    );
  }
});
