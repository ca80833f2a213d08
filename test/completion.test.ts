import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  CompletionStreamParser,
  parseCompletion,
  type CompletionParseOptions,
  type ParsedCompletion,
  type StreamDelta,
} from '../src/chat/completion.js';

/** Deterministic ids, so streamed and whole parses can be compared. */
function counterIds(): () => string {
  let n = 0;
  return () => `call_${n++}`;
}

function parse(text: string, opts: CompletionParseOptions = {}): ParsedCompletion {
  return parseCompletion(text, { newToolCallId: counterIds(), ...opts });
}

test('plain text is content, trimmed', () => {
  assert.deepEqual(parse('  Hello there.\n'), {
    content: 'Hello there.',
    reasoningContent: null,
    toolCalls: [],
    toolCallErrors: [],
  });
  assert.deepEqual(parse(''), { content: '', reasoningContent: null, toolCalls: [], toolCallErrors: [] });
});

test('a think block becomes reasoning', () => {
  const parsed = parse('<think>\nThe user greets me.\n</think>\n\nHello!');
  assert.equal(parsed.reasoningContent, 'The user greets me.');
  assert.equal(parsed.content, 'Hello!');
  assert.equal(parse('<think>\n\n</think>\n\nHi').reasoningContent, null);
});

test('thinking opened by the prompt: the text starts inside the reasoning', () => {
  const parsed = parse('Let me think.\n</think>\n\nDone.', { thinkingOpen: true });
  assert.equal(parsed.reasoningContent, 'Let me think.');
  assert.equal(parsed.content, 'Done.');
});

test('reasoning that never closed is all reasoning', () => {
  assert.deepEqual(parse('<think>\nstill thinking', {}), {
    content: '',
    reasoningContent: 'still thinking',
    toolCalls: [],
    toolCallErrors: [],
  });
  assert.equal(parse('cut off mid-thought', { thinkingOpen: true }).reasoningContent, 'cut off mid-thought');
});

test('two tool calls, arguments re-serialized as JSON text, content kept', () => {
  const text =
    'I will read both.\n<tool_call>\n{"name": "read", "arguments": {"path": "a.txt"}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "exec", "arguments": {"command": "ls -la", "timeout": 5}}\n</tool_call>';
  assert.deepEqual(parse(text), {
    content: 'I will read both.',
    reasoningContent: null,
    toolCalls: [
      { id: 'call_0', type: 'function', function: { name: 'read', arguments: '{"path":"a.txt"}' } },
      { id: 'call_1', type: 'function', function: { name: 'exec', arguments: '{"command":"ls -la","timeout":5}' } },
    ],
    toolCallErrors: [],
  });
});

test('content is null when only tool calls were generated', () => {
  const parsed = parse('<think>plan</think>\n\n<tool_call>\n{"name": "ls"}\n</tool_call>');
  assert.equal(parsed.content, null);
  assert.equal(parsed.reasoningContent, 'plan');
  assert.deepEqual(parsed.toolCalls[0]!.function, { name: 'ls', arguments: '{}' });
});

test('arguments given as a JSON string are kept as written', () => {
  const parsed = parse('<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>');
  assert.equal(parsed.toolCalls[0]!.function.arguments, '{"x": 1}');
});

test('default ids are call_ plus random hex, distinct', () => {
  const parsed = parseCompletion('<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b"}</tool_call>');
  const [a, b] = parsed.toolCalls.map((call) => call.id);
  assert.match(a!, /^call_[0-9a-f]{24}$/);
  assert.notEqual(a, b);
});

test('malformed tool calls are reported with their raw text, never thrown', () => {
  const text =
    'Trying.\n<tool_call>\n{"name": "read", "arguments": {"path": }\n</tool_call>\n' +
    '<tool_call>{"arguments": {}}</tool_call>' +
    '<tool_call>{"name": "f", "arguments": [1]}</tool_call>' +
    '<tool_call>["read"]</tool_call>' +
    '<tool_call>{"name": "ok", "arguments": {"a": 1}}</tool_call>';
  const parsed = parse(text);
  assert.equal(parsed.content, 'Trying.');
  assert.deepEqual(
    parsed.toolCalls.map((c) => [c.id, c.function.name]),
    [['call_0', 'ok']],
  );
  assert.deepEqual(
    parsed.toolCallErrors.map((e) => e.raw),
    [
      '<tool_call>\n{"name": "read", "arguments": {"path": }\n</tool_call>',
      '<tool_call>{"arguments": {}}</tool_call>',
      '<tool_call>{"name": "f", "arguments": [1]}</tool_call>',
      '<tool_call>["read"]</tool_call>',
    ],
  );
  assert.match(parsed.toolCallErrors[0]!.message, /^tool call is not valid JSON: /);
  assert.equal(parsed.toolCallErrors[1]!.message, 'tool call has no "name"');
  assert.equal(parsed.toolCallErrors[2]!.message, 'tool call "arguments" is not a JSON object');
  assert.equal(parsed.toolCallErrors[3]!.message, 'tool call is not a JSON object');
});

test('an unclosed final tool call is an error, not content', () => {
  const parsed = parse('Sure.\n<tool_call>\n{"name": "read", "argum');
  assert.equal(parsed.content, 'Sure.');
  assert.deepEqual(parsed.toolCalls, []);
  assert.deepEqual(parsed.toolCallErrors, [
    { raw: '<tool_call>\n{"name": "read", "argum', message: 'tool call never closed' },
  ]);
});

test('garbage inside markup', () => {
  // Markup inside a tool call is part of its (invalid) body.
  const inCall = parse('<tool_call><think>{"name": "x"}</think></tool_call>after');
  assert.deepEqual([inCall.content, inCall.reasoningContent, inCall.toolCalls.length], ['after', null, 0]);
  assert.equal(inCall.toolCallErrors[0]!.raw, '<tool_call><think>{"name": "x"}</think></tool_call>');
  // Inside reasoning, tags other than </think> are just reasoning text.
  const inThink = parse('<think>maybe <tool_call>{"name": "x"}</tool_call></think>no');
  assert.deepEqual(
    [inThink.reasoningContent, inThink.content, inThink.toolCalls.length],
    ['maybe <tool_call>{"name": "x"}</tool_call>', 'no', 0],
  );
  // Other angle brackets, stray closing tags and unfinished tag prefixes stay content.
  assert.equal(parse('a <b>bold</b> </think> x < y <tool').content, 'a <b>bold</b> </think> x < y <tool');
  assert.equal(parse('<tool_cal>').content, '<tool_cal>');
});

const CASES: [string, CompletionParseOptions][] = [
  ['  Hello there.\n', {}],
  ['<think>\nThe user greets me.\n</think>\n\nHello!', {}],
  ['Let me think.\n</think>\n\nDone.', { thinkingOpen: true }],
  ['<think>\nstill thinking  ', {}],
  [
    'I will read both.\n<tool_call>\n{"name": "read", "arguments": {"path": "a.txt"}}\n</tool_call>\n<tool_call>\n{"name": "exec", "arguments": {"command": "ls"}}\n</tool_call>',
    {},
  ],
  ['<think>plan</think>\n\n<tool_call>\n{"name": "ls"}\n</tool_call>\n', {}],
  [
    'Trying.\n<tool_call>\n{"name": "read", "arguments": {"path": }\n</tool_call>\n<tool_call>{"arguments": {}}</tool_call> tail ',
    {},
  ],
  ['Sure.\n<tool_call>\n{"name": "read", "argum', {}],
  ['<tool_call><think>{"name": "x"}</think></tool_call>after', {}],
  ['<think>maybe <tool_call>{"name": "x"}</tool_call></think>no', {}],
  ['a <b>bold</b> </think> x < y <tool', {}],
  ['A\n<tool_call>{"name": "f"}</tool_call>\n  \nB \n', {}],
  ['<think>a</think> mid <think> b </think> end', {}],
  ['Zürich 🎉 <<tool_call>{"name": "é"}</tool_call>>', {}],
];

/** Streams `chunks` and folds the deltas into the shape parseCompletion returns. */
function stream(chunks: string[], opts: CompletionParseOptions): { folded: ParsedCompletion; deltas: StreamDelta[] } {
  const parser = new CompletionStreamParser({ newToolCallId: counterIds(), ...opts });
  const deltas = [...chunks.flatMap((chunk) => parser.push(chunk)), ...parser.finish()];
  const folded: ParsedCompletion = { content: '', reasoningContent: '', toolCalls: [], toolCallErrors: [] };
  for (const d of deltas) {
    if (d.type === 'content') folded.content += d.text;
    else if (d.type === 'reasoning') folded.reasoningContent += d.text;
    else if (d.type === 'tool_call') {
      assert.equal(d.index, folded.toolCalls.length);
      folded.toolCalls.push({ id: d.id, type: 'function', function: { name: d.name, arguments: d.arguments } });
    } else folded.toolCallErrors.push({ raw: d.raw, message: d.message });
  }
  if (folded.content === '' && folded.toolCalls.length > 0) folded.content = null;
  if (folded.reasoningContent === '') folded.reasoningContent = null;
  return { folded, deltas };
}

test('streaming agrees with parseCompletion for every split point and char by char', () => {
  for (const [text, opts] of CASES) {
    const whole = parse(text, opts);
    for (let at = 0; at <= text.length; at++) {
      assert.deepEqual(
        stream([text.slice(0, at), text.slice(at)], opts).folded,
        whole,
        `${JSON.stringify(text)} split at ${at}`,
      );
    }
    assert.deepEqual(stream(Array.from(text), opts).folded, whole, `${JSON.stringify(text)} char by char`);
  }
});

test('streamed content never carries partial markup', () => {
  const text = 'Hi <tool_call>{"name": "f"}</tool_call> and <think>hidden</think> bye';
  const { deltas } = stream(Array.from(text), {});
  const content = deltas.filter((d) => d.type === 'content').map((d) => (d as { text: string }).text);
  assert.equal(content.join(''), 'Hi  and  bye');
  for (const piece of content) assert.ok(!piece.includes('<'), `leaked ${JSON.stringify(piece)}`);
});

test('a tool call is emitted as soon as it closes', () => {
  const parser = new CompletionStreamParser({ newToolCallId: counterIds() });
  assert.deepEqual(parser.push('<tool_call>{"name": "f", "arguments": {"a": 1}}'), []);
  assert.deepEqual(parser.push('</tool_'), []);
  assert.deepEqual(parser.push('call>more'), [
    { type: 'tool_call', index: 0, id: 'call_0', name: 'f', arguments: '{"a":1}' },
    { type: 'content', text: 'more' },
  ]);
  assert.deepEqual(parser.finish(), []);
});
