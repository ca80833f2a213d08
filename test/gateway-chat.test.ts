// POST /v1/chat/completions against a ScriptedSampler (exact completions on demand): the SSE and
// JSON wire formats, tool calls, reasoning, stop strings, sampling defaults, log-probs, validation,
// a client leaving mid-stream or reading slowly, and failures of the model or the store.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createConnection } from 'node:net';
import { renderRequest } from '../src/chat/prompt-codec.js';
import { post, scriptedBackend, sseEvents, startGateway, type TestGateway } from './helpers/gateway.js';
import { replyIds, type ScriptedSampler } from './helpers/scripted-sampler.js';

const { backend, sampler } = await scriptedBackend();
const tok = backend.tokenizer;
const MAIN = { 'x-turn-type': 'main', 'x-session-id': 'sess-1' };
const ask = (extra: Record<string, unknown> = {}) => ({
  model: 'main-model',
  messages: [{ role: 'user', content: 'What is in notes.txt?' }],
  ...extra,
});
const tools = [
  {
    type: 'function',
    function: {
      name: 'read',
      description: 'read a file',
      parameters: { type: 'object', properties: { path: { type: 'string' } } },
    },
  },
];

async function withGateway(fn: (gw: TestGateway, s: ScriptedSampler) => Promise<void>, config = {}, extra = {}) {
  const gw = await startGateway(backend, config, extra);
  try {
    await fn(gw, sampler);
  } finally {
    await gw.close();
    sampler.calls.length = 0;
  }
}

test('streaming: role chunk, reasoning and content deltas, tool-call deltas with index, finish, usage, [DONE]', () =>
  withGateway(async (gw) => {
    sampler.push(
      replyIds(tok, {
        reasoning: 'The user wants the file.',
        content: 'Reading it now.',
        toolCalls: [
          { function: { name: 'read', arguments: '{"path": "notes.txt"}' } },
          { function: { name: 'read', arguments: '{"path": "todo.txt"}' } },
        ],
      }),
    );
    const res = await post(
      `${gw.url}/v1/chat/completions`,
      ask({ stream: true, stream_options: { include_usage: true }, tools }),
      MAIN,
    );
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/event-stream/);
    const events = sseEvents(res.text);
    assert.equal(events.at(-1), '[DONE]');
    const chunks = events.slice(0, -1);
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
    for (const c of chunks) {
      assert.equal(c.object, 'chat.completion.chunk');
      assert.equal(c.id, chunks[0].id);
      assert.equal(c.model, 'main-model');
    }
    const deltas = chunks.filter((c) => c.choices.length > 0).map((c) => c.choices[0].delta);
    assert.equal(
      deltas
        .filter((d) => d.reasoning_content)
        .map((d) => d.reasoning_content)
        .join(''),
      'The user wants the file.',
    );
    assert.equal(
      deltas
        .filter((d) => d.content)
        .map((d) => d.content)
        .join(''),
      'Reading it now.',
    );
    const calls = deltas.filter((d) => d.tool_calls).map((d) => d.tool_calls[0]);
    assert.equal(calls.length, 4);
    assert.deepEqual(
      calls.map((c) => c.index),
      [0, 0, 1, 1],
    );
    assert.match(calls[0].id, /^call_[0-9a-f]{24}$/);
    assert.deepEqual(calls[0].function, { name: 'read', arguments: '' });
    assert.deepEqual(
      calls[1].function,
      { arguments: '{"path":"notes.txt"}' },
      'the arguments JSON as the parser re-serialises it',
    );
    const finish = chunks.find((c) => c.choices[0]?.finish_reason);
    assert.equal(finish.choices[0].finish_reason, 'tool_calls');
    const usage = chunks.at(-1);
    assert.deepEqual(usage.choices, []);
    const [line] = [...gw.store.exportLines()];
    assert.deepEqual(usage.usage, {
      prompt_tokens: line!.prompt_ids.length,
      completion_tokens: line!.completion_ids.length,
      total_tokens: line!.prompt_ids.length + line!.completion_ids.length,
    });
    assert.ok(
      chunks.slice(0, -1).every((c) => c.usage === null),
      'with include_usage every other chunk has usage: null',
    );
    assert.equal(line!.response.tool_calls!.length, 2);
    assert.equal(line!.response.reasoning_content, 'The user wants the file.');
  }));

test('non-streaming: the same answer as one completion object with real usage', () =>
  withGateway(async (gw) => {
    sampler.push(replyIds(tok, { content: 'It says hello.' }));
    const res = await post(`${gw.url}/v1/chat/completions`, ask({ stream: false }), MAIN);
    assert.equal(res.status, 200);
    const body = res.json;
    assert.equal(body.object, 'chat.completion');
    assert.deepEqual(body.choices[0].message, { role: 'assistant', content: 'It says hello.' });
    assert.equal(body.choices[0].finish_reason, 'stop');
    assert.equal(body.choices[0].logprobs, null);
    const prompt = renderRequest(backend, {
      messages: ask().messages as never,
      tools: undefined,
      enableThinking: undefined,
    });
    assert.deepEqual(body.usage, {
      prompt_tokens: prompt.ids.length,
      completion_tokens: tok.encode('It says hello.').length + 1,
      total_tokens: prompt.ids.length + tok.encode('It says hello.').length + 1,
    });
    assert.equal(res.headers.get('x-session-id'), 'sess-1');
    assert.equal(res.headers.get('x-turn-type'), 'main');
    assert.match(res.headers.get('x-turn-id')!, /^turn_[0-9a-f]{24}$/);
    assert.match(res.headers.get('x-request-id')!, /^req_/);
  }));

test('stop strings are cut from the text; length ends with finish_reason length', () =>
  withGateway(async (gw) => {
    sampler.push(replyIds(tok, { content: 'alpha beta END gamma' }));
    const a = await post(`${gw.url}/v1/chat/completions`, ask({ stop: ['END', 'never'] }), MAIN);
    assert.equal(a.json.choices[0].message.content, 'alpha beta');
    sampler.push(replyIds(tok, { content: 'one two three four five six seven' }));
    const b = await post(`${gw.url}/v1/chat/completions`, ask({ max_tokens: 3, stream: true }), MAIN);
    const events = sseEvents(b.text);
    assert.equal(events.find((e) => e.choices?.[0]?.finish_reason).choices[0].finish_reason, 'length');
    assert.equal(sampler.calls.at(-1)!.params.maxTokens, 3);
  }));

test('sampling: generation_config defaults when omitted, request values when given, always recorded', () =>
  withGateway(async (gw) => {
    sampler
      .push(replyIds(tok, { content: 'a' }))
      .push(replyIds(tok, { content: 'b' }))
      .push(replyIds(tok, { content: 'c' }));
    await post(`${gw.url}/v1/chat/completions`, ask(), MAIN);
    await post(
      `${gw.url}/v1/chat/completions`,
      ask({ temperature: 0, top_p: 0.5, top_k: 40, seed: -1, max_tokens: 9, max_completion_tokens: 7 }),
      MAIN,
    );
    await post(`${gw.url}/v1/chat/completions`, ask({ top_k: -1 }), MAIN);
    const [a, b, c] = [...gw.store.exportLines()].map((l) => l.sampling);
    assert.deepEqual(
      { ...a, seed: 0 },
      {
        temperature: 0.7,
        topP: 0.9,
        topK: 0,
        maxTokens: 4096 - sampler.calls[0]!.promptIds.length,
        stop: [],
        seed: 0,
        topLogprobs: 0,
        defaultsFrom: 'generation_config',
      },
    );
    assert.ok(Number.isInteger(a!.seed) && a!.seed >= 0, 'a seed is drawn and recorded');
    assert.deepEqual(b, {
      temperature: 0,
      topP: 0.5,
      topK: 40,
      maxTokens: 7,
      stop: [],
      seed: 4294967295,
      topLogprobs: 0,
      defaultsFrom: 'request',
    });
    assert.equal(c!.topK, 0);
    assert.deepEqual(
      sampler.calls.map((x) => [x.params.temperature, x.params.topP, x.params.seed]),
      [
        [0.7, 0.9, a!.seed],
        [0, 0.5, 4294967295],
        [0.7, 0.9, c!.seed],
      ],
    );
  }));

test('log-probs in the OpenAI format, streamed and not', () =>
  withGateway(async (gw) => {
    const ids = replyIds(tok, { content: 'Hi there' });
    sampler.push(ids).push(ids);
    const res = await post(`${gw.url}/v1/chat/completions`, ask({ logprobs: true, top_logprobs: 2 }), MAIN);
    const entries = res.json.choices[0].logprobs.content;
    assert.equal(entries.length, ids.length);
    assert.deepEqual(Object.keys(entries[0]).sort(), ['bytes', 'logprob', 'token', 'top_logprobs']);
    assert.equal(entries[0].token, tok.decode([ids[0]!]));
    assert.deepEqual(entries[0].bytes, [...Buffer.from(entries[0].token)]);
    assert.equal(entries[0].top_logprobs.length, 2);
    const [line] = [...gw.store.exportLines()];
    assert.deepEqual(
      entries.map((e: { logprob: number }) => e.logprob),
      line!.logprobs,
      'the reported log-probs are the recorded temperature-1 log-probs',
    );
    const streamed = sseEvents(
      (await post(`${gw.url}/v1/chat/completions`, ask({ logprobs: true, stream: true }), MAIN)).text,
    );
    const all = streamed.flatMap((e) => e.choices?.[0]?.logprobs?.content ?? []);
    assert.equal(all.length, ids.length, "every token's entry is streamed exactly once");
  }));

test('tool_choice none hides the tools from the model; required is accepted', () =>
  withGateway(async () => {
    const gw2 = await startGateway(backend);
    try {
      sampler.push(replyIds(tok, { content: 'x' })).push(replyIds(tok, { content: 'y' }));
      await post(`${gw2.url}/v1/chat/completions`, ask({ tools, tool_choice: 'none' }), MAIN);
      await post(`${gw2.url}/v1/chat/completions`, ask({ tools, tool_choice: 'required' }), MAIN);
      const noTools = renderRequest(backend, {
        messages: ask().messages as never,
        tools: undefined,
        enableThinking: undefined,
      }).ids;
      assert.deepEqual(sampler.calls[0]!.promptIds, noTools);
      assert.ok(sampler.calls[1]!.promptIds.length > noTools.length);
    } finally {
      await gw2.close();
    }
  }));

const toolTurn = [
  { role: 'user', content: 'q' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read', arguments: '{}' } }],
  },
];

test('bad requests get a 4xx naming the problem, write nothing, and leave the server healthy', () =>
  withGateway(async (gw) => {
    const long = 'word '.repeat(6000);
    const cases: [unknown, Record<string, string>, number, RegExp, string | null][] = [
      ['{"messages": [', {}, 400, /not valid JSON/, 'invalid_json'],
      ['', {}, 400, /body is empty/, 'invalid_json'],
      [[1, 2], {}, 400, /must be a JSON object/, 'invalid_type'],
      [{ model: 'm' }, {}, 400, /messages must be a non-empty array/, 'invalid_type'],
      [{ messages: [] }, {}, 400, /messages must be a non-empty array/, 'invalid_type'],
      [
        { messages: [{ role: 'bot', content: 'x' }] },
        {},
        400,
        /messages\[0\]\.role must be one of system, developer, user, assistant, tool/,
        'invalid_role',
      ],
      [
        { messages: [{ role: 'user', content: 42 }] },
        {},
        400,
        /messages\[0\]\.content must be a string/,
        'invalid_type',
      ],
      [
        { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] },
        {},
        400,
        /only text parts/,
        'unsupported_content',
      ],
      [
        { messages: [{ role: 'tool', content: 'r' }] },
        {},
        400,
        /tool_call_id must be the id of the tool call/,
        'invalid_type',
      ],
      [
        {
          messages: [
            { role: 'assistant', content: null, tool_calls: [{ id: 'c', function: { name: 'f', arguments: {} } }] },
          ],
        },
        {},
        400,
        /arguments must be a JSON string/,
        'invalid_type',
      ],
      [ask({ n: 2 }), {}, 400, /n = 2 is not supported/, 'unsupported_value'],
      [ask({ temperature: 3 }), {}, 400, /temperature must be a number >= 0 <= 2, got 3/, 'invalid_value'],
      [ask({ temperature: 'hot' }), {}, 400, /temperature must be a number/, 'invalid_value'],
      [ask({ top_p: 0 }), {}, 400, /top_p must be a number > 0 <= 1/, 'invalid_value'],
      [ask({ max_tokens: 0 }), {}, 400, /max_tokens must be an integer >= 1/, 'invalid_value'],
      [ask({ max_completion_tokens: 2.5 }), {}, 400, /max_completion_tokens must be an integer/, 'invalid_value'],
      [ask({ top_logprobs: 3 }), {}, 400, /top_logprobs needs "logprobs": true/, 'invalid_value'],
      [ask({ stop: new Array(17).fill('x') }), {}, 400, /at most 16/, 'invalid_value'],
      [ask({ tools: [{ type: 'function' }] }), {}, 400, /tools\[0\] must be/, 'invalid_type'],
      [ask({ tool_choice: 'sometimes' }), {}, 400, /tool_choice must be/, 'invalid_value'],
      // Issue 15 item 6, decided as OpenAI does:
      [
        ask({ max_tokens: 'abc', max_completion_tokens: 5 }),
        {},
        400,
        /max_tokens must be an integer >= 1, got "abc"/,
        'invalid_value',
      ],
      [
        ask({ tools, tool_choice: { type: 'function', function: { name: 'write' } } }),
        {},
        400,
        /tool_choice names the function "write", which is not in tools \(the tools are read\)/,
        'invalid_value',
      ],
      [
        ask({ tool_choice: { type: 'function', function: { name: 'read' } } }),
        {},
        400,
        /which is not in tools \(the request has no tools\)/,
        'invalid_value',
      ],
      [
        { messages: [...toolTurn, { role: 'tool', content: 'r', tool_call_id: '' }] },
        {},
        400,
        /messages\[2\]\.tool_call_id is empty/,
        'invalid_value',
      ],
      [
        { messages: [...toolTurn, { role: 'tool', content: 'r', tool_call_id: 'call_2' }] },
        {},
        400,
        /messages\[2\]\.tool_call_id "call_2" matches no id in the tool_calls of the assistant message before it \("call_1"\)/,
        'invalid_tool_message',
      ],
      [
        {
          messages: [
            { role: 'user', content: 'q' },
            { role: 'tool', content: 'r', tool_call_id: 'call_1' },
          ],
        },
        {},
        400,
        /messages\[1\] has role "tool" but does not follow an assistant message with tool_calls/,
        'invalid_tool_message',
      ],
      [
        {
          messages: [
            ...toolTurn,
            { role: 'tool', content: 'r', tool_call_id: 'call_1' },
            { role: 'user', content: 'u' },
            { role: 'tool', content: 'r', tool_call_id: 'call_1' },
          ],
        },
        {},
        400,
        /messages\[4\] has role "tool" but does not follow/,
        'invalid_tool_message',
      ],
      [ask({ stream: 'yes' }), {}, 400, /stream must be true or false/, 'invalid_type'],
      [ask(), { 'x-turn-type': 'primary' }, 400, /X-Turn-Type must be "main" or "side"/, 'invalid_value'],
      [
        ask(),
        { 'x-session-id': 'x'.repeat(300) },
        400,
        /X-Session-Id header must be 1-256 printable characters/,
        'invalid_value',
      ],
      [ask(), { 'x-learning-opt-out': 'maybe' }, 400, /X-Learning-Opt-Out must be/, 'invalid_value'],
      [
        ask({ messages: [{ role: 'user', content: long }] }),
        {},
        400,
        /^prompt is (at least )?\d+ tokens, the model's context is 4096 \(context length exceeded\)/,
        'context_length_exceeded',
      ],
    ];
    for (const [body, headers, status, message, code] of cases) {
      const res = await post(`${gw.url}/v1/chat/completions`, body, headers);
      assert.equal(res.status, status, `${JSON.stringify(body).slice(0, 80)} -> ${res.text}`);
      assert.match(res.json.error.message, message);
      assert.equal(res.json.error.code, code);
      assert.equal(res.json.error.type, 'invalid_request_error');
    }
    assert.equal(sampler.calls.length, 0, 'the model never ran');
    assert.deepEqual(gw.store.counts(), { sessions: 0, turns: 0, next_states: 0, closed_turns: 0 });
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
  }));

test('accepted as OpenAI accepts them: history tool calls whose arguments are not JSON, parallel results, named tool_choice', () =>
  withGateway(async (gw) => {
    // A model (ours too) can emit arguments that are not JSON; refusing them in the history would
    // fail every later request of that conversation. They are rendered as sent.
    const messages = [
      { role: 'user', content: 'q' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'read', arguments: '{"path": "a.txt"' } },
          { id: 'call_2', type: 'function', function: { name: 'read', arguments: 'not json' } },
        ],
      },
      { role: 'tool', content: 'r2', tool_call_id: 'call_2' },
      { role: 'tool', content: 'r1', tool_call_id: 'call_1' },
    ];
    sampler.push(replyIds(tok, { content: 'fine' }));
    const res = await post(
      `${gw.url}/v1/chat/completions`,
      ask({ messages, tools, tool_choice: { type: 'function', function: { name: 'read' } } }),
      MAIN,
    );
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      [...gw.store.exportLines()][0]!.messages[1]!.tool_calls!.map((c) => c.function.arguments),
      ['{"path": "a.txt"', 'not json'],
    );
  }));

test('the body limit answers 413 before reading, even for a body sent in chunks', () =>
  withGateway(
    async (gw) => {
      const big = JSON.stringify(ask({ messages: [{ role: 'user', content: 'x'.repeat(5000) }] }));
      const res = await post(`${gw.url}/v1/chat/completions`, big, MAIN);
      assert.equal(res.status, 413);
      assert.match(
        res.json.error.message,
        /larger than the limit of 4096 bytes: shorten the conversation or raise maxBodyBytes/,
      );
      const chunked = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: MAIN,
        duplex: 'half',
        body: new ReadableStream({
          start(c) {
            for (let i = 0; i < 10; i++) c.enqueue(new TextEncoder().encode(big.slice(i * 600, (i + 1) * 600)));
            c.close();
          },
        }),
      } as RequestInit);
      assert.equal(chunked.status, 413);
      assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
      assert.deepEqual(gw.store.counts().turns, 0);
    },
    { maxBodyBytes: 4096 },
  ));

test('a client that disconnects mid-stream stops the generation; the turn is kept as cancelled', () =>
  withGateway(async (gw) => {
    sampler.push({ ids: tok.encode('partial answer'), hang: true });
    const controller = new AbortController();
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: MAIN,
      body: JSON.stringify(ask({ stream: true })),
      signal: controller.signal,
    });
    const reader = res.body!.getReader();
    let seen = '';
    while (seen.split('data: ').length < 4) seen += new TextDecoder().decode((await reader.read()).value); // role chunk + content
    controller.abort();
    for (let i = 0; i < 100 && gw.store.counts().turns === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const [line] = [...gw.store.exportLines()];
    assert.equal(line!.finish_reason, 'cancelled');
    assert.equal(line!.closure_reason, 'cancelled');
    assert.deepEqual(line!.completion_ids, tok.encode('partial answer'));
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
    sampler.push(replyIds(tok, { content: 'fine' }));
    assert.equal((await post(`${gw.url}/v1/chat/completions`, ask(), MAIN)).status, 200);
  }));

test('a client that reads slowly still gets the whole stream, in order (backpressure)', {
  timeout: 30_000,
}, async () => {
  // Megabytes of events at once: the writes outrun the socket, and the stream waits for it to drain.
  const tokens = 40_000;
  const id = tok.encode('word')[0]!;
  const flood = {
    use: () => Promise.reject(new Error('this test publishes no version')),
    async *generate(promptIds: readonly number[]) {
      for (let i = 0; i < tokens; i++) yield { type: 'token' as const, token: { id, logprob: -1, sampledLogprob: -1 } };
      yield {
        type: 'finish' as const,
        reason: 'length' as const,
        version: 0,
        promptTokens: promptIds.length,
        completionTokens: tokens,
      };
    },
  };
  const gw = await startGateway({ ...backend, sampler: flood, contextLength: 1_000_000 });
  try {
    const body = JSON.stringify(ask({ stream: true, max_tokens: tokens }));
    const socket = createConnection({ port: Number(new URL(gw.url).port) });
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
    socket.pause();
    await new Promise((r) => setTimeout(r, 500));
    let text = '';
    socket
      .setEncoding('utf8')
      .on('data', (d: string) => {
        text += d;
      })
      .resume();
    await new Promise((resolve) => socket.on('end', resolve));
    assert.equal(text.split('"delta":{"content":').length - 1, tokens);
    assert.ok(text.trimEnd().endsWith('data: [DONE]\n\n\r\n0'), text.slice(-80));
    assert.equal(gw.store.counts().turns, 1);
  } finally {
    await gw.close();
  }
});

test('a model failure mid-stream ends with an error event and records nothing', () =>
  withGateway(async (gw) => {
    sampler.push({ ids: tok.encode('half'), error: 'the worker died' });
    const res = await post(`${gw.url}/v1/chat/completions`, ask({ stream: true }), MAIN);
    const events = sseEvents(res.text);
    assert.notEqual(events.at(-1), '[DONE]');
    assert.match(events.at(-1).error.message, /the model failed while generating: the worker died \(request req_/);
    sampler.push({ ids: [], error: 'boom' });
    const plain = await post(`${gw.url}/v1/chat/completions`, ask(), MAIN);
    assert.equal(plain.status, 500);
    assert.equal(plain.json.error.type, 'server_error');
    assert.deepEqual(gw.store.counts().turns, 0);
  }));

test('a turn that cannot be committed is not acknowledged', () =>
  withGateway(async (gw) => {
    sampler.push(replyIds(tok, { content: 'first' }));
    assert.equal((await post(`${gw.url}/v1/chat/completions`, ask(), MAIN)).status, 200);
    gw.store.db.exec("CREATE TRIGGER no_more BEFORE INSERT ON turns BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    sampler.push(replyIds(tok, { content: 'second' }));
    const streamed = sseEvents(
      (
        await post(
          `${gw.url}/v1/chat/completions`,
          ask({ stream: true, messages: [{ role: 'user', content: 'other' }] }),
          MAIN,
        )
      ).text,
    );
    assert.ok(!streamed.includes('[DONE]'));
    assert.ok(!streamed.some((e) => e.choices?.[0]?.finish_reason), 'no finish chunk without a commit');
    assert.match(streamed.at(-1).error.message, /could not be recorded, so it is not acknowledged/);
    sampler.push(replyIds(tok, { content: 'third' }));
    const plain = await post(
      `${gw.url}/v1/chat/completions`,
      ask({ messages: [{ role: 'user', content: 'more' }] }),
      MAIN,
    );
    assert.equal(plain.status, 500);
    assert.equal(gw.store.counts().turns, 1);
  }));

test('at the concurrency limit a request gets 503 with retry-after', () =>
  withGateway(
    async (gw) => {
      sampler.push({ ids: [], hang: true });
      const controller = new AbortController();
      const first = fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: MAIN,
        body: JSON.stringify(ask({ stream: true })),
        signal: controller.signal,
      });
      const res = await first;
      const second = await post(`${gw.url}/v1/chat/completions`, ask(), MAIN);
      assert.equal(second.status, 503);
      assert.equal(second.headers.get('retry-after'), '1');
      assert.match(second.json.error.message, /limit of 1 concurrent requests/);
      controller.abort();
      await res.body?.cancel().catch(() => {});
    },
    { maxConcurrentRequests: 1 },
  ));

test('opting out answers normally and stores nothing of the session', () =>
  withGateway(async (gw) => {
    sampler.push(replyIds(tok, { content: 'private answer' }));
    const res = await post(`${gw.url}/v1/chat/completions`, ask(), { ...MAIN, 'x-learning-opt-out': 'true' });
    assert.equal(res.status, 200);
    assert.equal(res.json.choices[0].message.content, 'private answer');
    assert.deepEqual(gw.store.counts(), { sessions: 1, turns: 0, next_states: 0, closed_turns: 0 });
    assert.equal(gw.store.sessionLearning('sess-1'), false);
  }));
