// Routes other than chat, authentication, the admin delete, config rules, logs, and the small
// middleware pieces (compose, bearer parsing, constant-time key check, SSE field safety, chunk templates).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import {
  checkBind,
  configFromEnv,
  ConfigError,
  DEFAULT_CONFIG,
  redactedConfig,
  resolveConfig,
} from '../src/gateway/config.js';
import { compose, Router, type Context } from '../src/gateway/http.js';
import { bearerToken, keyMatches } from '../src/gateway/middleware/auth.js';
import { ChunkTemplate, chunkObject } from '../src/gateway/openai-format.js';
import { PARAMETERS } from '../src/gateway/params.js';
import { SseWriter } from '../src/gateway/sse.js';
import { createHash } from 'node:crypto';
import { post, scriptedBackend, startGateway } from './helpers/gateway.js';
import { replyIds } from './helpers/scripted-sampler.js';

const { backend, sampler } = await scriptedBackend();
const KEY = 'sk-test-123';
const ADMIN = 'admin-key-456';

test('health, readiness and models need no key; chat does', async () => {
  const gw = await startGateway(backend, {
    apiKeys: [KEY],
    sideModels: ['side-model', 'org/side'],
    mainModels: ['main-model'],
  });
  try {
    assert.deepEqual(await (await fetch(`${gw.url}/healthz`)).json(), { status: 'ok' });
    const ready = await fetch(`${gw.url}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(((await ready.json()) as any).status, 'ready');
    const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as any;
    assert.deepEqual(
      models.data.map((m: { id: string }) => m.id),
      ['tiny', 'main-model', 'side-model', 'org/side'],
    );
    assert.equal((await fetch(`${gw.url}/v1/models/side-model`)).status, 200);
    assert.equal((await fetch(`${gw.url}/v1/models/nope`)).status, 404);
    // Hub-style ids contain a slash: found escaped or not, and an unknown one is model_not_found, not an unknown route.
    for (const path of ['org/side', 'org%2Fside'])
      assert.equal(((await (await fetch(`${gw.url}/v1/models/${path}`)).json()) as any).id, 'org/side');
    assert.equal(((await (await fetch(`${gw.url}/v1/models/org/nope`)).json()) as any).error.code, 'model_not_found');

    const missing = await post(`${gw.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }] });
    assert.equal(missing.status, 401);
    assert.equal(missing.headers.get('www-authenticate'), 'Bearer');
    assert.deepEqual(missing.json.error, {
      message: 'missing API key: send the header "Authorization: Bearer <API key>"',
      type: 'authentication_error',
      param: null,
      code: 'missing_api_key',
    });
    const wrong = await post(
      `${gw.url}/v1/chat/completions`,
      { messages: [{ role: 'user', content: 'x' }] },
      { authorization: 'Bearer sk-test-124' },
    );
    assert.equal(wrong.json.error.code, 'invalid_api_key');
    sampler.push(replyIds(backend.tokenizer, { content: 'ok' }));
    const ok = await post(
      `${gw.url}/v1/chat/completions`,
      { messages: [{ role: 'user', content: 'x' }] },
      { authorization: `Bearer ${KEY}` },
    );
    assert.equal(ok.status, 200);

    const unknown = await fetch(`${gw.url}/v2/whatever`);
    assert.equal(unknown.status, 404);
    assert.match(((await unknown.json()) as any).error.message, /no route GET \/v2\/whatever: the API is under \/v1/);
    const method = await fetch(`${gw.url}/v1/chat/completions`);
    assert.equal(method.status, 405);
  } finally {
    await gw.close();
  }
});

test('admin: disabled without admin keys; deletes a session and everything it recorded', async () => {
  const off = await startGateway(backend);
  try {
    const res = await fetch(`${off.url}/admin/sessions/x`, { method: 'DELETE' });
    assert.equal(res.status, 403);
    assert.match(((await res.json()) as any).error.message, /admin routes are disabled: set adminKeys/);
  } finally {
    await off.close();
  }
  const gw = await startGateway(backend, { apiKeys: [KEY], adminKeys: [ADMIN] });
  try {
    const auth = { authorization: `Bearer ${KEY}`, 'x-turn-type': 'main', 'x-session-id': 'to-delete' };
    sampler.push(replyIds(backend.tokenizer, { content: 'one' })).push(replyIds(backend.tokenizer, { content: 'two' }));
    await post(`${gw.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'first' }] }, auth);
    await post(
      `${gw.url}/v1/chat/completions`,
      {
        messages: [
          { role: 'user', content: 'first' },
          { role: 'assistant', content: 'one' },
          { role: 'user', content: 'second' },
        ],
      },
      auth,
    );
    assert.equal(gw.store.counts().next_states, 1);
    const asUser = await fetch(`${gw.url}/admin/sessions/to-delete`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${KEY}` },
    });
    assert.equal(asUser.status, 401, 'an API key is not an admin key');
    const del = await fetch(`${gw.url}/admin/sessions/to-delete`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.deepEqual(await del.json(), { deleted: true, session_id: 'to-delete', turns: 2 });
    assert.deepEqual(gw.store.counts(), { sessions: 0, turns: 0, next_states: 0, closed_turns: 0 });
    const again = await fetch(`${gw.url}/admin/sessions/to-delete`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(again.status, 404);
    // The session's memory went too: the next request starts afresh rather than closing a deleted turn.
    sampler.push(replyIds(backend.tokenizer, { content: 'three' }));
    await post(
      `${gw.url}/v1/chat/completions`,
      {
        messages: [
          { role: 'user', content: 'first' },
          { role: 'assistant', content: 'one' },
          { role: 'user', content: 'second' },
          { role: 'assistant', content: 'two' },
          { role: 'user', content: 'third' },
        ],
      },
      auth,
    );
    assert.deepEqual(gw.store.counts(), { sessions: 1, turns: 1, next_states: 0, closed_turns: 0 });
  } finally {
    await gw.close();
  }
});

test('logs: one event per request, no conversation text unless asked for', async () => {
  for (const logContent of [false, true]) {
    const gw = await startGateway(backend, { logContent }, { logContent });
    try {
      sampler.push(replyIds(backend.tokenizer, { content: 'the answer is PINEAPPLE' }));
      await post(
        `${gw.url}/v1/chat/completions`,
        { messages: [{ role: 'user', content: 'what is the SECRET word' }] },
        { 'x-turn-type': 'main' },
      );
      const text = JSON.stringify(gw.logs.lines);
      const requestLine = gw.logs.lines.find((l) => l.event === 'request' && l.path === '/v1/chat/completions')!;
      assert.equal(requestLine.status, 200);
      assert.equal(requestLine.kind, 'main');
      assert.ok(typeof requestLine.promptTokens === 'number' && typeof requestLine.ms === 'number');
      assert.equal(text.includes('SECRET'), logContent);
      assert.equal(text.includes('PINEAPPLE'), logContent);
    } finally {
      await gw.close();
    }
  }
});

test('config: loopback by default, refuses to bind off loopback without keys, secrets never printed', () => {
  assert.equal(DEFAULT_CONFIG.host, '127.0.0.1');
  assert.throws(
    () => resolveConfig({ host: '0.0.0.0' }),
    (e: Error) => e instanceof ConfigError && /refusing to listen on 0.0.0.0 without API keys/.test(e.message),
  );
  assert.doesNotThrow(() => resolveConfig({ host: '0.0.0.0' }, configFromEnv({ OPENCLAW_RL_API_KEYS: 'a, b' })));
  for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', '::1'])
    assert.doesNotThrow(() => checkBind({ ...DEFAULT_CONFIG, host }));
  assert.throws(() => resolveConfig({ prot: 1 } as never), /unknown setting "prot"/);
  assert.throws(() => resolveConfig({ sessionIdleSeconds: 0 }), /sessionIdleSeconds must be a positive integer/);
  const cfg = resolveConfig({ apiKeys: ['secret-1'], adminKeys: ['secret-2'] }, { port: 1234 });
  assert.equal(cfg.port, 1234);
  const printed = JSON.stringify(redactedConfig(cfg));
  assert.ok(!printed.includes('secret'), printed);
  assert.match(printed, /"apiKeys":"1 key\(s\)"/);
});

test('middleware pieces: compose, router, bearer parsing, constant-time key check, SSE fields', async () => {
  const order: string[] = [];
  const handler = compose(
    [
      async (_c, next) => {
        order.push('a');
        await next();
        order.push('a2');
      },
      async (_c, next) => {
        order.push('b');
        await next();
      },
    ],
    () => {
      order.push('h');
    },
  );
  await handler({} as Context);
  assert.deepEqual(order, ['a', 'b', 'h', 'a2']);
  const twice = compose(
    [
      async (_c, next) => {
        await next();
        await next();
      },
    ],
    () => {},
  );
  await assert.rejects(async () => twice({} as Context), /next\(\) called more than once/);

  const router = new Router().on('DELETE', '/admin/sessions/:id', () => {});
  assert.deepEqual(router.match('DELETE', '/admin/sessions/a%3A1').params, { id: 'a:1' });
  assert.throws(() => router.match('GET', '/admin/sessions/x'), /GET is not allowed/);

  assert.equal(bearerToken('Bearer abc'), 'abc');
  assert.equal(bearerToken('bearer  abc '), 'abc');
  for (const bad of [undefined, '', 'Basic abc', 'Bearer', 'Bearer a b']) assert.equal(bearerToken(bad), undefined);
  const keys = ['k1', 'k2'].map((k) => createHash('sha256').update(k).digest());
  assert.equal(keyMatches('k2', keys), true);
  assert.equal(keyMatches('k3', keys), false);
  assert.equal(keyMatches('', keys), false);

  const written: string[] = [];
  const res = {
    writableEnded: false,
    destroyed: false,
    write: (t: string) => {
      written.push(t);
      return true;
    },
  } as unknown as ServerResponse;
  const sse = new SseWriter(res);
  await sse.data({ a: 'line\nbreak' }, { event: 'x' });
  sse.send('{"b":1}');
  assert.deepEqual(written, []); // events of one tick leave together, after it
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(written, ['event: x\ndata: {"a":"line\\nbreak"}\n\ndata: {"b":1}\n\n']);
  await assert.rejects(sse.data({}, { event: 'bad\nevent' }), /must not contain a line break/);
  await assert.rejects(sse.data({}, { id: 'bad\rid' }), /must not contain a line break/);
});

test('with a stream interval, events after the first write wait for it; the end never waits', async () => {
  const written: string[] = [];
  const res = {
    writableEnded: false,
    destroyed: false,
    writableNeedDrain: false,
    write: (t: string) => {
      written.push(t);
      return true;
    },
    end(t: string) {
      written.push(`end:${t}`);
      this.writableEnded = true;
    },
  };
  const sse = new SseWriter(res as unknown as ServerResponse, 60_000); // an interval no test run outlasts
  const tick = () => new Promise((resolve) => setImmediate(resolve));
  sse.send('{"n":1}');
  await tick();
  assert.deepEqual(written, ['data: {"n":1}\n\n'], 'the first write goes at the end of its tick');
  sse.send('{"n":2}');
  await tick();
  sse.send('{"n":3}');
  await tick();
  assert.equal(written.length, 1, 'later events wait for the interval');
  sse.done();
  assert.deepEqual(written.slice(1), ['end:data: {"n":2}\n\ndata: {"n":3}\n\ndata: [DONE]\n\n']);
});

test('chunk templates serialise exactly what the chunk objects do', () => {
  const hostile = ['tiny', 'x","delta":{}', 'q\\"delta":{}\u2028', '"delta":{}'];
  for (const model of hostile) {
    for (const includeUsage of [false, true]) {
      const ids = { id: `chatcmpl-${model}`, created: 1764460000, model };
      const template = new ChunkTemplate(ids, includeUsage);
      for (const delta of [
        { role: 'assistant', content: '' },
        { content: 'a "quoted"\nline \u0000' },
        { reasoning_content: '' },
        { tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] },
      ]) {
        assert.equal(
          template.chunk(delta),
          JSON.stringify(chunkObject(ids, delta, { logprobs: null, finishReason: null, includeUsage })),
        );
      }
    }
  }
});

test('one list says how each OpenAI parameter is treated', () => {
  for (const name of [
    'temperature',
    'top_p',
    'max_tokens',
    'max_completion_tokens',
    'stop',
    'seed',
    'tools',
    'tool_choice',
    'logprobs',
    'top_logprobs',
    'stream',
    'stream_options',
  ]) {
    assert.match(PARAMETERS[name as keyof typeof PARAMETERS], /^honoured/, name);
  }
  assert.match(PARAMETERS.n, /^rejected unless 1/);
  assert.match(PARAMETERS.frequency_penalty, /^ignored/);
});

test('ignored parameters are reported back in a header', async () => {
  const gw = await startGateway(backend);
  try {
    sampler.push(replyIds(backend.tokenizer, { content: 'ok' }));
    const res = await post(`${gw.url}/v1/chat/completions`, {
      messages: [{ role: 'user', content: 'x' }],
      presence_penalty: 1,
      logit_bias: { 5: 1 },
      something_custom: 1,
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-openclaw-rl-ignored'), 'presence_penalty,logit_bias');
    assert.equal(res.headers.get('x-turn-type'), 'side', 'a request nothing identifies is a side turn by default');
    assert.equal(res.headers.get('x-session-id'), null);
  } finally {
    await gw.close();
  }
});
