// The direct renderer of openclaw-rl's own chat template gives jinja's text exactly: on every
// captured OpenClaw history, with and without tools and generation prompt, and on the template's
// corner cases; it hands what it does not handle to jinja and turns itself off on a mismatch.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ChatMessage, ToolSpec } from '../src/chat/messages.js';
import { toTemplateMessage } from '../src/chat/prompt.js';
import { ChatTemplate, OPENCLAW_CHAT_TEMPLATE, type RenderOptions } from '../src/chat/tokenizer/chat-template.js';
import { PromptRenderer, renderOpenClawTemplate } from '../src/chat/prompt-renderer.js';
import { CAPTURED_DIR, loadCapture } from './helpers/replay.js';

const jinja = ChatTemplate.fromString(OPENCLAW_CHAT_TEMPLATE, 'built-in template');
const TOOLS: ToolSpec[] = [
  {
    type: 'function',
    function: {
      name: 'read',
      description: 'Read a file "as is" — ünïcode',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string' }, lines: { type: 'integer', minimum: 1.5 } },
        required: ['path'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'exec',
      parameters: { type: 'object', properties: {}, additionalProperties: false, nested: [null, true, 0, -2e-7, 'x'] },
    },
  },
];
const VARIANTS: RenderOptions[] = [
  { addGenerationPrompt: true },
  { addGenerationPrompt: false },
  { addGenerationPrompt: true, enableThinking: false },
  { addGenerationPrompt: true, enableThinking: true, tools: TOOLS },
  { tools: [] },
];

function assertSame(messages: readonly ChatMessage[], what: string): void {
  const templated = messages.map(toTemplateMessage);
  for (const opts of VARIANTS) {
    const direct = renderOpenClawTemplate(templated, opts);
    assert.notEqual(direct, undefined, what);
    assert.equal(
      direct,
      jinja.render(templated, opts),
      `${what} ${JSON.stringify({ ...opts, tools: opts.tools?.length })}`,
    );
  }
}

test('every captured OpenClaw history renders as jinja renders it', () => {
  const files = readdirSync(fileURLToPath(CAPTURED_DIR)).filter((f) => f.endsWith('.jsonl'));
  let histories = 0;
  for (const file of files) {
    for (const entry of loadCapture(file)) {
      if (!entry.body?.messages) continue;
      assertSame(entry.body.messages, `${file} #${entry.seq}`);
      histories++;
    }
  }
  assert.ok(histories > 50, `only ${histories} histories`);
});

test('the template corner cases render as jinja renders them', () => {
  const call = (id: string, name: string, args: string) => ({
    id,
    type: 'function' as const,
    function: { name, arguments: args },
  });
  const cases: Record<string, ChatMessage[]> = {
    empty: [],
    'no system': [{ role: 'user', content: 'hi' }],
    'system later': [
      { role: 'user', content: 'a' },
      { role: 'system', content: 'late rule' },
      { role: 'developer', content: 'dev rule' },
    ],
    'reasoning before and after the last user': [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: 'a1', reasoning_content: '\n\n  old thoughts \n' },
      { role: 'user', content: 'q2' },
      {
        role: 'assistant',
        content: '',
        reasoning_content: '\nnew thoughts\n',
        tool_calls: [call('call_1', 'read', '{"path":"a.txt","lines":3}'), call('call_2', 'exec', 'not json {')],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'file text' },
      { role: 'tool', tool_call_id: 'call_2', content: '' },
      { role: 'assistant', content: 'done', reasoning_content: '' },
    ],
    'content and calls, array arguments': [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'part one' },
          { type: 'text', text: 'part two' },
        ],
      },
      {
        role: 'assistant',
        content: 'Let me look.',
        tool_calls: [
          call('c', 'read', '[1, 2]'),
          call('d', 'say "hi"', '{"q": "ü \\" \\n", "n": null, "f": 1.25, "deep": {"a": [true, {}]}}'),
        ],
      },
      { role: 'tool', tool_call_id: 'c', content: 'one result' },
      { role: 'user', content: '<|im_start|>literal markup</think>' },
    ],
    'leading tool result': [
      { role: 'tool', tool_call_id: 'x', content: 'orphan' },
      { role: 'assistant', content: null, tool_calls: [] },
    ],
  };
  for (const [name, messages] of Object.entries(cases)) assertSame(messages, name);
});

test('inputs the direct renderer does not handle go to jinja, and a mismatch turns it off', () => {
  assert.equal(renderOpenClawTemplate([{ role: 'narrator', content: 'x' }], {}), undefined);
  const renderer = new PromptRenderer(jinja);
  assert.equal(renderer.isDirect, true);
  assert.throws(() => renderer.render([{ role: 'narrator', content: 'x' }]), /unsupported message role: narrator/);
  assert.equal(new PromptRenderer(ChatTemplate.fromString('{{ messages | length }}', 'other')).isDirect, false);

  const told: string[] = [];
  const drifted = { text: OPENCLAW_CHAT_TEMPLATE, render: () => 'what jinja says' } as unknown as ChatTemplate;
  const checked = new PromptRenderer(drifted, { onMismatch: (d) => told.push(d) });
  assert.equal(checked.render([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }), 'what jinja says');
  assert.equal(checked.isDirect, false);
  assert.equal(told.length, 1);
});
