import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChatTemplate, OPENCLAW_CHAT_TEMPLATE } from '../src/chat/tokenizer/chat-template.js';
import {
  builtinCorpus,
  DEFAULT_ADDED_TOKENS,
  DEFAULT_SPECIAL_TOKENS,
  trainByteLevelBpe,
} from '../src/chat/tokenizer-training/train-bpe.js';
import { TextTokenizer } from '../src/chat/tokenizer/tokenizer.js';
import { renderPrompt, toTemplateMessage } from '../src/chat/prompt.js';
import type { ChatMessage, ToolSpec } from '../src/chat/messages.js';

const ours = ChatTemplate.fromString(OPENCLAW_CHAT_TEMPLATE, 'built-in');
const render = (messages: ChatMessage[], opts: Parameters<ChatTemplate['render']>[1] = {}) =>
  ours.render(messages.map(toTemplateMessage), opts);

const READ_TOOL: ToolSpec = {
  type: 'function',
  function: {
    name: 'read',
    description: 'Read a file.',
    parameters: { type: 'object', properties: { path: { type: 'string' } } },
  },
};

test('system, user and the generation prompt', () => {
  const text = render(
    [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Hi' },
    ],
    { addGenerationPrompt: true },
  );
  assert.equal(
    text,
    '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
  );
});

test('tools, tool calls (object and string arguments), grouped tool results, reasoning, thinking off', () => {
  const text = render(
    [
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'What is in notes.txt?' }] },
      {
        role: 'assistant',
        content: null,
        reasoning_content: '\nI should read it.\n',
        tool_calls: [
          { id: 'call1', type: 'function', function: { name: 'read', arguments: '{"path":"notes.txt"}' } },
          { id: 'call2', type: 'function', function: { name: 'read', arguments: 'not json' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call1', content: 'PINEAPPLE' },
      { role: 'tool', tool_call_id: 'call2', content: 'error: bad arguments' },
    ],
    { tools: [READ_TOOL], addGenerationPrompt: true, enableThinking: false },
  );
  const expected =
    '<|im_start|>system\nBe brief.\n\n# Tools\n\n' +
    'These functions are available. Their JSON signatures are listed inside <tools></tools>:\n<tools>\n' +
    '{"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}\n' +
    '</tools>\n\n' +
    'To call functions, answer with one block per call, each holding a JSON object with the function name and its arguments:\n' +
    '<tool_call>\n{"name": <function-name>, "arguments": <arguments-as-json-object>}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\nWhat is in notes.txt?<|im_end|>\n' +
    '<|im_start|>assistant\n<think>\nI should read it.\n</think>\n\n' +
    '<tool_call>\n{"name": "read", "arguments": {"path": "notes.txt"}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "read", "arguments": not json}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\nPINEAPPLE\n</tool_response>\n<tool_response>\nerror: bad arguments\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\n<think>\n\n</think>\n\n';
  assert.equal(text, expected);
});

test('reasoning is replayed only after the last user message; content precedes tool calls', () => {
  const text = render([
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello!', reasoning_content: 'greet them' },
    { role: 'user', content: 'List files' },
    {
      role: 'assistant',
      content: 'Checking.',
      reasoning_content: 'use ls',
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'ls', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'c', content: 'a.txt' },
    { role: 'assistant', content: 'One file: a.txt.' },
  ]);
  const expected =
    '<|im_start|>user\nHi<|im_end|>\n' +
    '<|im_start|>assistant\nHello!<|im_end|>\n' +
    '<|im_start|>user\nList files<|im_end|>\n' +
    '<|im_start|>assistant\n<think>\nuse ls\n</think>\n\nChecking.\n<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\na.txt\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\nOne file: a.txt.<|im_end|>\n';
  assert.equal(text, expected);
});

test('enable_thinking unset or true leaves the generation prompt open', () => {
  for (const enableThinking of [undefined, true]) {
    assert.equal(
      render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true, enableThinking }),
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
  }
});

test('an unknown role is a template error naming the source', () => {
  assert.throws(() => ours.render([{ role: 'robot', content: 'beep' }]), {
    message: 'chat template from built-in failed to render: unsupported message role: robot',
  });
});

// A template in the style of Qwen3's, written for this test: it finds the last real user query by
// walking the messages backwards ([::-1]) with a namespace, splits reasoning out of content, and
// wraps tool results in a user turn.
const QWEN3_STYLE = String.raw`
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
    {{- '# Tools\n<tools>' }}
    {%- for tool in tools %}{{- '\n' }}{{- tool | tojson }}{%- endfor %}
    {{- '\n</tools><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(searching=true, last_query=messages|length - 1) %}
{%- for m in messages[::-1] %}
    {%- set i = (messages|length - 1) - loop.index0 %}
    {%- if ns.searching and m.role == 'user' and not (m.content.startswith('<tool_response>') and m.content.endswith('</tool_response>')) %}
        {%- set ns.searching = false %}
        {%- set ns.last_query = i %}
    {%- endif %}
{%- endfor %}
{%- for m in messages %}
    {%- if m.role == 'user' or (m.role == 'system' and not loop.first) %}
        {{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}
    {%- elif m.role == 'assistant' %}
        {%- set content = m.content if m.content is string else '' %}
        {%- set reasoning = '' %}
        {%- if m.reasoning_content is string %}
            {%- set reasoning = m.reasoning_content %}
        {%- elif '</think>' in content %}
            {%- set reasoning = content.split('</think>')[0].split('<think>')[-1] %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query and (loop.last or reasoning) %}
            {{- '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content }}
        {%- else %}
            {{- '<|im_start|>assistant\n' + content }}
        {%- endif %}
        {%- for call in m.tool_calls or [] %}
            {{- '\n<tool_call>\n{"name": "' + call.function.name + '", "arguments": ' + (call.function.arguments | tojson) + '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif m.role == 'tool' %}
        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\n<tool_response>\n' + m.content + '\n</tool_response>' }}
        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
    {%- elif not (m.role == 'system' and loop.first) %}
        {{- raise_exception('Unexpected role: ' + m.role) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}
`;

test('a Qwen3-style template renders (namespace, [::-1], startswith, split, lstrip, tojson, tools)', () => {
  const template = ChatTemplate.fromTokenizerConfig(
    { chat_template: QWEN3_STYLE, eos_token: '<|im_end|>' },
    'qwen3-style/tokenizer_config.json',
  );
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Sys.' },
    { role: 'user', content: 'Q' },
    {
      role: 'assistant',
      content: '<think>\nr1\n</think>\n\nA1',
      tool_calls: [{ id: 'x', type: 'function', function: { name: 'read', arguments: '{"path": "ä.txt"}' } }],
    },
    { role: 'user', content: '<tool_response>\nx\n</tool_response>' },
    { role: 'assistant', content: 'A2' },
  ];
  const text = template.render(messages.map(toTemplateMessage), {
    tools: [READ_TOOL],
    addGenerationPrompt: true,
    enableThinking: false,
  });
  const expected =
    '<|im_start|>system\nSys.\n\n# Tools\n<tools>\n' +
    '{"type": "function", "function": {"name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}\n' +
    '</tools><|im_end|>\n' +
    '<|im_start|>user\nQ<|im_end|>\n' +
    '<|im_start|>assistant\n<think>\nr1\n</think>\n\nA1\n<tool_call>\n{"name": "read", "arguments": {"path": "ä.txt"}}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n' +
    '<|im_start|>assistant\n<think>\n\n</think>\n\n';
  assert.equal(text, expected);
  assert.throws(
    () =>
      template.render([
        { role: 'user', content: 'Q' },
        { role: 'robot', content: '' },
      ]),
    {
      message: 'chat template from qwen3-style/tokenizer_config.json failed to render: Unexpected role: robot',
    },
  );
});

test('special-token variables come from the config, as strings or {content} objects', () => {
  const template = ChatTemplate.fromTokenizerConfig(
    {
      chat_template: '{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}',
      bos_token: { content: '<s>' },
      eos_token: '</s>',
      pad_token: null,
    },
    'cfg',
  );
  assert.equal(template.render([]), '<s>|</s>|false');
});

test('template problems are errors naming the source', () => {
  assert.throws(
    () => ChatTemplate.fromString('{% if %}', 'model/tokenizer_config.json'),
    (e: Error) => e.message.startsWith('chat template from model/tokenizer_config.json does not parse: '),
  );
  assert.throws(() => ChatTemplate.fromTokenizerConfig({}, 'model/tokenizer_config.json'), {
    message: 'model/tokenizer_config.json has no chat_template',
  });
  const legacy = ChatTemplate.fromTokenizerConfig(
    {
      chat_template: [
        { name: 'tool_use', template: 'T' },
        { name: 'default', template: 'D' },
      ],
    },
    'cfg',
  );
  assert.equal(legacy.render([]), 'D');
});

test('fromModelDir prefers chat_template.jinja over the config field', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'chat-template-test-'));
  try {
    await assert.rejects(ChatTemplate.fromModelDir(dir), { message: `tokenizer_config.json not found in ${dir}` });
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: 'from config' }));
    assert.equal((await ChatTemplate.fromModelDir(dir)).render([]), 'from config');
    writeFileSync(join(dir, 'chat_template.jinja'), 'from file {{ raise_exception("no") }}');
    const fromFile = await ChatTemplate.fromModelDir(dir);
    assert.throws(() => fromFile.render([]), {
      message: `chat template from ${join(dir, 'chat_template.jinja')} failed to render: no`,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('renderPrompt normalizes messages and encodes the rendered text', () => {
  const files = trainByteLevelBpe(builtinCorpus({ targetChars: 20_000 }), {
    vocabSize: 600,
    specialTokens: DEFAULT_SPECIAL_TOKENS,
    addedTokens: DEFAULT_ADDED_TOKENS,
  });
  const tokenizer = TextTokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  const messages: ChatMessage[] = [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ],
    },
  ];
  const prompt = renderPrompt(ours, tokenizer, messages, { addGenerationPrompt: true });
  assert.equal(prompt.text, '<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n');
  assert.deepEqual(prompt.ids, tokenizer.encode(prompt.text));
  assert.equal(prompt.ids[0], files.addedTokenIds['<|im_start|>']);
  assert.equal(prompt.thinkingOpen, false);

  const opensThinking = ChatTemplate.fromString("{{- '<|im_start|>assistant\\n<think>\\n' }}", 'thinking-only');
  assert.equal(renderPrompt(opensThinking, tokenizer, messages).thinkingOpen, true);
  assert.equal(
    renderPrompt(ours, tokenizer, messages, { addGenerationPrompt: true, enableThinking: false }).thinkingOpen,
    false,
  );
});

test('toTemplateMessage: developer becomes system, arguments become objects when they are JSON objects', () => {
  assert.deepEqual(toTemplateMessage({ role: 'developer', content: null }), { role: 'system', content: '' });
  const call = (args: string) =>
    toTemplateMessage({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'i', type: 'function', function: { name: 'f', arguments: args } }],
    }).tool_calls![0]!.function.arguments;
  assert.deepEqual(call('{"a": [1]}'), { a: [1] });
  assert.equal(call('[1, 2]'), '[1, 2]');
  assert.equal(call('{broken'), '{broken');
  assert.deepEqual(toTemplateMessage({ role: 'tool', content: 'r', tool_call_id: 'i', name: 'f' }), {
    role: 'tool',
    content: 'r',
    tool_call_id: 'i',
    name: 'f',
  });
});
