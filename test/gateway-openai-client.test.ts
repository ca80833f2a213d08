// The official `openai` npm client against the running gateway: non-streaming and streaming, with
// tools, tool calls, reasoning and log-probs; against the real tiny engine and, where a tool call
// must be generated, a ScriptedSampler. Errors surface as the client's typed errors.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { engineBackend, scriptedBackend, startGateway } from './helpers/gateway.js';
import { replyIds } from './helpers/scripted-sampler.js';

const KEY = 'sk-client-test';
const tools: ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'read',
      description: 'Read a file',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
  },
];
const client = (url: string, headers: Record<string, string> = {}) =>
  new OpenAI({ apiKey: KEY, baseURL: `${url}/v1`, maxRetries: 0, defaultHeaders: headers });

test('real engine: create, stream with usage, tools offered, log-probs; every main turn recorded', async () => {
  const backend = await engineBackend();
  const gw = await startGateway(backend, { apiKeys: [KEY] });
  try {
    const c = client(gw.url, { 'X-Session-Id': 'client-1', 'X-Turn-Type': 'main' });
    const models = await c.models.list();
    assert.deepEqual(
      models.data.map((m) => m.id),
      ['tiny'],
    );

    const done = await c.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'Say hi' }],
      max_completion_tokens: 6,
      seed: 3,
      logprobs: true,
      top_logprobs: 2,
    });
    assert.equal(done.object, 'chat.completion');
    assert.equal(done.choices[0]!.message.role, 'assistant');
    assert.ok(['stop', 'length'].includes(done.choices[0]!.finish_reason));
    assert.ok(done.usage!.prompt_tokens > 0 && done.usage!.completion_tokens > 0 && done.usage!.completion_tokens <= 6);
    assert.equal(done.choices[0]!.logprobs!.content!.length, done.usage!.completion_tokens);
    assert.equal(done.choices[0]!.logprobs!.content![0]!.top_logprobs.length, 2);

    const stream = await c.chat.completions.create({
      model: 'tiny',
      stream: true,
      stream_options: { include_usage: true },
      tools,
      tool_choice: 'auto',
      max_tokens: 5,
      temperature: 0.5,
      messages: [
        { role: 'user', content: 'Say hi' },
        { role: 'assistant', content: done.choices[0]!.message.content },
        { role: 'user', content: 'Again' },
      ],
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.ok(finish === 'stop' || finish === 'length' || finish === 'tool_calls');
    assert.ok(usage && usage.completion_tokens <= 5);
    const lines = [...gw.store.exportLines()];
    assert.equal(lines.length, 2);
    assert.equal(lines[0]!.closure_reason, 'next_state', 'the second request extended the first');
    assert.equal(lines[1]!.completion_ids.length, usage!.completion_tokens);
    assert.equal(lines[1]!.sampling.temperature, 0.5);
    assert.equal(typeof text, 'string');
  } finally {
    await gw.close();
    await backend.close();
  }
});

test('scripted tool calls through the client: JSON and streamed (the client assembles the deltas)', async () => {
  const { backend, sampler } = await scriptedBackend();
  const gw = await startGateway(backend, { apiKeys: [KEY], mainModels: ['main-model'] });
  try {
    const c = client(gw.url, { 'X-Session-Id': 'client-tools' });
    const call = { function: { name: 'read', arguments: '{"path": "notes.txt"}' } };
    sampler.push(replyIds(backend.tokenizer, { reasoning: 'I should read it.', toolCalls: [call] }));
    const first = await c.chat.completions.create({
      model: 'main-model',
      messages: [{ role: 'user', content: 'What do my notes say?' }],
      tools,
    });
    const msg = first.choices[0]!.message;
    assert.equal(first.choices[0]!.finish_reason, 'tool_calls');
    assert.equal(msg.content, null);
    assert.equal(msg.tool_calls!.length, 1);
    const tc = msg.tool_calls![0]!;
    assert.equal(tc.type, 'function');
    assert.equal(tc.type === 'function' && tc.function.name, 'read');
    assert.deepEqual(JSON.parse(tc.type === 'function' ? tc.function.arguments : '{}'), { path: 'notes.txt' });
    assert.equal((msg as unknown as { reasoning_content: string }).reasoning_content, 'I should read it.');

    // The tool result comes back; the streamed answer makes a second, parallel call.
    sampler.push(
      replyIds(backend.tokenizer, {
        content: 'Two more files.',
        toolCalls: [
          { function: { name: 'read', arguments: '{"path": "a.txt"}' } },
          { function: { name: 'read', arguments: '{"path": "b.txt"}' } },
        ],
      }),
    );
    const history: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'user', content: 'What do my notes say?' },
      { role: 'assistant', content: null, tool_calls: msg.tool_calls },
      { role: 'tool', tool_call_id: tc.id, content: 'see a.txt and b.txt' },
    ];
    const runner = c.chat.completions.stream({ model: 'main-model', messages: history, tools });
    const final = await runner.finalChatCompletion();
    const streamed = final.choices[0]!.message;
    assert.equal(streamed.content, 'Two more files.');
    assert.deepEqual(
      streamed.tool_calls!.map((t) =>
        t.type === 'function' ? [t.function.name, JSON.parse(t.function.arguments).path] : [],
      ),
      [
        ['read', 'a.txt'],
        ['read', 'b.txt'],
      ],
    );
    assert.equal(final.choices[0]!.finish_reason, 'tool_calls');

    const [t1] = [...gw.store.exportLines()];
    assert.equal(t1!.closure_reason, 'next_state');
    assert.deepEqual(t1!.next_state!.messages, [{ role: 'tool', tool_call_id: tc.id, content: 'see a.txt and b.txt' }]);
  } finally {
    await gw.close();
  }
});

test("errors reach the client typed, with the server's message", async () => {
  const { backend } = await scriptedBackend();
  const gw = await startGateway(backend, { apiKeys: [KEY] });
  try {
    const bad = new OpenAI({ apiKey: 'wrong', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    await assert.rejects(
      bad.chat.completions.create({ model: 'x', messages: [{ role: 'user', content: 'hi' }] }),
      (e: unknown) => e instanceof OpenAI.AuthenticationError && e.status === 401 && /invalid API key/.test(e.message),
    );
    await assert.rejects(
      client(gw.url).chat.completions.create({ model: 'x', n: 3, messages: [{ role: 'user', content: 'hi' }] }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.code === 'unsupported_value' && e.param === 'n',
    );
    assert.equal(gw.store.counts().turns, 0);
  } finally {
    await gw.close();
  }
});

test('real engine: usage.prompt_tokens_details.cached_tokens counts the prompt tokens the prefix cache served', async () => {
  const backend = await engineBackend();
  const gw = await startGateway(backend, { apiKeys: [KEY] });
  try {
    const c = client(gw.url, { 'X-Session-Id': 'cache-1', 'X-Turn-Type': 'main' });
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You answer briefly. '.repeat(20) },
      { role: 'user', content: 'Say hi' },
    ];
    const first = await c.chat.completions.create({ model: 'tiny', messages, max_completion_tokens: 4, seed: 1 });
    assert.equal(first.usage!.prompt_tokens_details!.cached_tokens, 0, 'nothing cached yet');
    messages.push(
      { role: 'assistant', content: first.choices[0]!.message.content },
      { role: 'user', content: 'And again' },
    );
    const second = await c.chat.completions.create({ model: 'tiny', messages, max_completion_tokens: 4, seed: 2 });
    const cached = second.usage!.prompt_tokens_details!.cached_tokens!;
    assert.ok(
      cached >= first.usage!.prompt_tokens && cached < second.usage!.prompt_tokens,
      `${cached} cached of ${second.usage!.prompt_tokens}; the first prompt had ${first.usage!.prompt_tokens}`,
    );
  } finally {
    await gw.close();
    await backend.close();
  }
});
