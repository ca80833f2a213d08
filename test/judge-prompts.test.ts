// The judge prompts: what they contain (the user request, the reply with its tool calls, the next
// state with its role named, the output format) and how long inputs are cut, with markers.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hintVoteFrom } from '../src/judge/parse.js';
import { chooseHint } from '../src/judge/vote.js';
import {
  buildEvalPrompt,
  buildHintPrompt,
  clip,
  DEFAULT_PROMPT_LIMITS,
  EVAL_SYSTEM,
  HINT_SYSTEM,
  nextStateText,
} from '../src/judge/prompts.js';
import { makeClosedTurn } from './helpers/judge-double.js';

const call = {
  id: 'call_1',
  type: 'function' as const,
  function: { name: 'read', arguments: '{"path": "notes.txt"}' },
};

test('eval prompt: system rules, then the user request, the reply and a user next state, then the question', () => {
  const closed = makeClosedTurn({
    prompt: [
      { role: 'system', content: 'You are a helpful agent.' },
      { role: 'user', content: 'Old question' },
      { role: 'assistant', content: 'Old answer' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Convert 20 C' },
          { type: 'text', text: 'to Fahrenheit.' },
        ],
      },
    ],
    reply: '20 C is 68 F.',
    next: [{ role: 'user', content: 'No, I wanted Kelvin.' }],
  });
  const [system, user] = buildEvalPrompt(closed.turn, closed.nextState!);
  assert.equal(system!.role, 'system');
  assert.equal(system!.content, EVAL_SYSTEM);
  for (const phrase of ['USER:', 'TOOL:', '\\boxed{1}', '\\boxed{-1}', '\\boxed{0}', 'negative feedback'])
    assert.ok(EVAL_SYSTEM.includes(phrase), phrase);
  assert.equal(user!.role, 'user');
  assert.equal(
    user!.content,
    [
      '## User request\nConvert 20 C\nto Fahrenheit.',
      '## Assistant reply\n20 C is 68 F.',
      '## Next state (a user message)\n[USER]\nNo, I wanted Kelvin.',
      'Is the next state (a) progress, (b) a correction, redo, rephrased request or error, or (c) unclear? End with \\boxed{1}, \\boxed{-1} or \\boxed{0}.',
    ].join('\n\n'),
  );
  assert.ok(!String(user!.content).includes('Old question'), 'only the request this turn answered');
});

test('tool turns: calls rendered readably, results named after their call, steps already taken counted', () => {
  const closed = makeClosedTurn({
    prompt: [
      { role: 'user', content: 'Summarize my notes' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ ...call, id: 'call_0', function: { name: 'ls', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_0', content: 'notes.txt' },
    ],
    reply: null,
    toolCalls: [call, { ...call, id: 'call_2', function: { name: 'stat', arguments: '{"path": "notes.txt"}' } }],
    next: [
      { role: 'tool', tool_call_id: 'call_1', content: 'buy milk' },
      { role: 'tool', tool_call_id: 'call_2', name: 'stat', content: 'Error: permission denied' },
    ],
  });
  const user = String(buildHintPrompt(closed.turn, closed.nextState!)[1]!.content);
  assert.ok(
    user.includes(
      'Summarize my notes\n[The assistant already took 1 step on this request; the reply below is the next one.]',
    ),
    user,
  );
  assert.ok(
    user.includes(
      '## Assistant reply\n[calls tool read] {"path": "notes.txt"}\n[calls tool stat] {"path": "notes.txt"}',
    ),
    user,
  );
  assert.ok(
    user.includes('## Next state (tool outputs)\n[TOOL read]\nbuy milk\n[TOOL stat]\nError: permission denied'),
    user,
  );
  assert.ok(user.endsWith('Give your decision, and the hint between [HINT_START] and [HINT_END] if it is \\boxed{1}.'));

  const mixed = makeClosedTurn({
    reply: 'Done',
    toolCalls: [call],
    next: [
      { role: 'tool', tool_call_id: 'call_1', content: 'ok' },
      { role: 'user', content: 'thanks' },
    ],
  });
  assert.ok(
    String(buildEvalPrompt(mixed.turn, mixed.nextState!)[1]!.content).includes(
      '## Next state (tool output, then a user message)\n[TOOL read]\nok\n[USER]\nthanks',
    ),
  );
  assert.ok(
    HINT_SYSTEM.includes('[HINT_START]') && HINT_SYSTEM.includes('\\boxed{-1}') && HINT_SYSTEM.includes('do not copy'),
  );
});

test('long inputs are cut with explicit markers; the prompt stays within its budget', () => {
  const huge = 'x'.repeat(200_000);
  const closed = makeClosedTurn({
    request: `Start of request ${'r'.repeat(10_000)} end of request`,
    reply: `Reply start ${'y'.repeat(50_000)}`,
    toolCalls: [{ ...call, function: { name: 'write', arguments: JSON.stringify({ text: 'z'.repeat(10_000) }) } }],
    next: [
      { role: 'tool', tool_call_id: 'call_1', content: `HEAD${huge}TAIL` },
      { role: 'user', content: 'short' },
    ],
  });
  const user = String(buildEvalPrompt(closed.turn, closed.nextState!)[1]!.content);
  const l = DEFAULT_PROMPT_LIMITS;
  const budget = l.requestChars + l.responseChars + l.toolArgumentChars + l.nextStateChars + 1000;
  assert.ok(user.length < budget, `prompt is ${user.length} characters, budget ${budget}`);
  assert.ok(user.includes('Start of request') && user.includes('end of request'), 'both ends of the request survive');
  assert.ok(user.includes('HEAD') && user.includes('TAIL'), 'both ends of the tool output survive');
  assert.equal(
    user.match(/\[\.\.\. \d+ characters cut \.\.\.\]/g)!.length,
    4,
    'request, reply, arguments, tool output',
  );
  assert.ok(user.includes('[USER]\nshort'));
  assert.equal(
    nextStateText(closed.nextState!).length,
    'HEAD'.length + huge.length + 'TAIL'.length + 1 + 'short'.length,
    'the copy check sees everything',
  );
});

test('clip keeps two thirds of the budget from the start and one third from the end', () => {
  assert.equal(clip('abcdef', 6), 'abcdef');
  assert.equal(clip('abcdefghij', 6), 'abcd\n[... 4 characters cut ...]\nij');
  assert.equal(clip('abcdefghij', 1), 'a\n[... 9 characters cut ...]\n');
});

test('edge cases: no user message, empty reply, empty next-state message', () => {
  const closed = makeClosedTurn({
    prompt: [{ role: 'system', content: 'sys' }],
    reply: '',
    next: [{ role: 'user', content: '' }],
  });
  const user = String(buildEvalPrompt(closed.turn, closed.nextState!)[1]!.content);
  assert.ok(user.includes('## User request\n(the conversation has no user message)'));
  assert.ok(user.includes('## Assistant reply\n(empty reply)'));
  assert.ok(user.includes('[USER]\n(empty)'));
});

test('a judge that parrots the hint format line teaches nothing: the placeholder is too short to accept', () => {
  const formatLines = HINT_SYSTEM.slice(
    HINT_SYSTEM.indexOf('\\boxed{1}\n'),
    HINT_SYSTEM.indexOf('[HINT_END]') + '[HINT_END]'.length,
  );
  const parrot = hintVoteFrom(formatLines, 1, 0);
  assert.deepEqual([parrot.score, parrot.hint], [1, 'your hint']);
  assert.deepEqual(chooseHint([parrot], '').rejections, [{ vote: 0, reason: 'too_short' }]);
});
