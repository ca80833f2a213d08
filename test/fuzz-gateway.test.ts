// Fuzz: a few thousand malformed or hostile requests, generated from a seed (any failure replays),
// each invalid by construction. Every one must get a 4xx in the OpenAI error format; afterwards the
// server is healthy, has written nothing, and still answers a valid request. Loopback only,
// bounded in count and time.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRng } from '../src/engine/local/sampling/random.js';
import { scriptedBackend, startGateway } from './helpers/gateway.js';
import { replyIds } from './helpers/scripted-sampler.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261130);
const COUNT = Number(process.env.FUZZ_COUNT ?? 2000);
const KEY = 'fuzz-key';
const MAX_BODY = 64 * 1024;

interface Case {
  method?: string;
  path?: string;
  body: string;
  headers: Record<string, string>;
  why: string;
}

const rng = createRng(SEED);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]!;
const int = (n: number) => Math.floor(rng.next() * n);

const JUNK: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  1e308,
  -1e308,
  '',
  'x',
  ' ',
  '\u0000',
  '💥',
  '{}',
  '[]',
  [],
  [null],
  {},
  { a: 1 },
  [[[[]]]],
  'a'.repeat(2000),
];
/** Per field: values that are invalid whatever else the request says. */
const INVALID: Record<string, unknown[]> = {
  messages: [
    null,
    1,
    'hi',
    {},
    [],
    [1],
    [null],
    [{}],
    [[]],
    [{ role: 'bot', content: 'x' }],
    [{ role: 'user' }],
    [{ role: 'user', content: 5 }],
    [{ role: 'user', content: {} }],
    [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x' } }] }],
    [{ role: 'user', content: [{ type: 'text' }] }],
    [{ role: 'user', content: [1] }],
    [{ role: 'tool', content: 'r' }],
    [{ role: 'tool', content: 'r', tool_call_id: 7 }],
    [{ role: 'system', content: null }],
    [{ role: 'assistant', content: 'x', tool_calls: 'no' }],
    [{ role: 'assistant', content: 'x', tool_calls: [{}] }],
    [{ role: 'user', content: 'x', tool_calls: [] }],
    [{ role: 'assistant', content: 'x', tool_calls: [{ id: 1, function: { name: 'f', arguments: '{}' } }] }],
    [{ role: 'user', content: 'x', name: 5 }],
    [{ role: 'assistant', content: 'x', reasoning_content: 5 }],
    [{ role: ['user'], content: 'x' }],
    [{ role: 'USER', content: 'x' }],
    [
      { role: 'user', content: 'x' },
      { role: 'tool', content: 'r', tool_call_id: 'c' },
    ],
    [{ role: 'tool', content: 'r', tool_call_id: '' }],
    [
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', content: 'r', tool_call_id: 'c2' },
    ],
  ],
  temperature: [-0.01, 2.01, 'hot', true, [], {}],
  top_p: [0, -0.5, 1.01, 'x', false],
  top_k: [-2, 1.5, 'k'],
  max_tokens: [0, -5, 1.5, 'ten', 1e20, true, 'abc'],
  max_completion_tokens: [0, -1, 2.5, '3', []],
  n: [2, 0, 100, 1.5, 'one'],
  stop: ['', [''], [1], new Array(17).fill('s'), {}, 5, ['x'.repeat(300)]],
  seed: [1.5, 'x', 1e300, [], {}],
  tools: [
    'x',
    5,
    [1],
    [{}],
    [{ type: 'function' }],
    [{ type: 'function', function: { name: '' } }],
    [{ type: 'x', function: { name: 'a' } }],
    [{ type: 'function', function: { name: 'a b' } }],
    [{ type: 'function', function: { name: 'a', parameters: 'schema' } }],
    [{ type: 'function', function: { name: 'a', description: 5 } }],
  ],
  tool_choice: [
    'sometimes',
    5,
    {},
    { type: 'function' },
    { type: 'function', function: {} },
    [],
    { type: 'function', function: { name: 'absent' } },
  ],
  logprobs: ['yes', 1, {}],
  top_logprobs: [21, -1, 1.5, 'two'],
  stream: ['true', 1, {}],
  stream_options: ['x', 5, { include_usage: 'yes' }],
  model: [5, {}, [], 'm'.repeat(300)],
  user: [5, {}, 'u'.repeat(300)],
  chat_template_kwargs: ['x', 5, { enable_thinking: 'no' }],
  prompt_cache_key: [5, 'k'.repeat(300)],
  session_id: [[], 'k'.repeat(300)],
  turn_type: [5, 'primary'],
};
const BAD_HEADERS: Record<string, string>[] = [
  { 'x-turn-type': 'primary' },
  { 'x-turn-type': '' },
  { 'x-session-id': 's'.repeat(257) },
  { 'x-session-affinity': 'a'.repeat(300) },
  { 'x-learning-opt-out': 'perhaps' },
  { session_id: 'z'.repeat(400) },
];

function valid(): Record<string, unknown> {
  return {
    model: pick(['main-model', 'side-model', 'x']),
    messages: [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'hello' },
    ],
    ...(rng.next() < 0.5 ? { stream: true } : {}),
  };
}

const auth = () => ({ authorization: `Bearer ${KEY}`, 'content-type': 'application/json' });

function mutate(): Case {
  const body = valid();
  const fields = Object.keys(INVALID);
  const n = 1 + int(3);
  const changed: string[] = [];
  for (let i = 0; i < n; i++) {
    const f = pick(fields);
    body[f] = pick(INVALID[f]!);
    changed.push(f);
  }
  if ('top_logprobs' in body && typeof body.top_logprobs === 'number' && Number.isInteger(body.top_logprobs))
    delete body.logprobs; // 1..20 without logprobs is invalid too
  return { body: JSON.stringify(body), headers: auth(), why: `fields ${changed.join(',')}` };
}

function generate(): Case {
  const r = rng.next();
  if (r < 0.55) return mutate();
  if (r < 0.62)
    return { body: JSON.stringify(valid()), headers: { ...auth(), ...pick(BAD_HEADERS) }, why: 'bad header' };
  if (r < 0.67)
    return {
      body: JSON.stringify(valid()),
      headers: pick<Record<string, string>>([
        {},
        { authorization: 'Bearer nope' },
        { authorization: 'Basic Zm9v' },
        { authorization: `Bearer ${KEY}x` },
      ]),
      why: 'bad key',
    };
  if (r < 0.74) {
    const text = JSON.stringify(valid());
    return { body: text.slice(0, 1 + int(text.length - 2)), headers: auth(), why: 'truncated JSON' };
  }
  if (r < 0.79)
    return {
      body: Array.from({ length: 1 + int(200) }, () => String.fromCharCode(int(0x3000))).join(''),
      headers: auth(),
      why: 'random text',
    };
  if (r < 0.83) return { body: JSON.stringify(pick(JUNK)), headers: auth(), why: 'JSON that is not an object' };
  if (r < 0.85) return { body: '['.repeat(5000 + int(100000)), headers: auth(), why: 'deep nesting' };
  if (r < 0.87)
    return {
      body: JSON.stringify({ ...valid(), messages: [{ role: 'user', content: 'the '.repeat(5000 + int(5000)) }] }),
      headers: auth(),
      why: 'longer than the context',
    };
  if (r < 0.89)
    return {
      body: JSON.stringify({ ...valid(), pad: 'p'.repeat(MAX_BODY + int(50000)) }),
      headers: auth(),
      why: 'over the body limit',
    };
  if (r < 0.94)
    return {
      method: pick(['GET', 'PUT', 'DELETE', 'PATCH']),
      path: '/v1/chat/completions',
      body: '',
      headers: auth(),
      why: 'wrong method',
    };
  return {
    method: pick(['GET', 'POST']),
    path: pick([
      '/',
      '/v1',
      '/v1/completions',
      '/v1/embeddings',
      '/admin/sessions/x',
      '/v1/chat/completions/x',
      '/%ff',
      '/..%2f..%2fetc/passwd',
    ]),
    body: '',
    headers: auth(),
    why: 'unknown route',
  };
}

test(`fuzz: ${COUNT} malformed or hostile requests (seed ${SEED}) all get a 4xx and change nothing`, {
  timeout: 120_000,
}, async () => {
  const { backend, sampler } = await scriptedBackend();
  const gw = await startGateway(backend, { apiKeys: [KEY], maxBodyBytes: MAX_BODY, sideModels: ['side-model'] });
  const cases = Array.from({ length: COUNT }, generate);
  const statuses = new Map<number, number>();
  const failures: string[] = [];
  const deadline = Date.now() + 90_000;
  try {
    let next = 0;
    const worker = async () => {
      while (next < cases.length && Date.now() < deadline) {
        const c = cases[next++]!;
        const method = c.method ?? 'POST';
        const res = await fetch(gw.url + (c.path ?? '/v1/chat/completions'), {
          method,
          headers: c.headers,
          ...(method === 'GET' ? {} : { body: c.body }),
        });
        const text = await res.text();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        let ok = res.status >= 400 && res.status < 500;
        try {
          const err = JSON.parse(text).error;
          ok &&= typeof err.message === 'string' && err.message.length > 0 && typeof err.type === 'string';
        } catch {
          ok = false;
        }
        if (!ok && failures.length < 10)
          failures.push(
            `${c.why}: ${method} ${c.path ?? ''} ${c.body.slice(0, 120)} -> ${res.status} ${text.slice(0, 200)}`,
          );
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    assert.deepEqual(failures, []);
    const done = [...statuses.values()].reduce((a, b) => a + b, 0);
    assert.ok(done >= Math.min(COUNT, 1000), `only ${done} requests in the time budget`);
    assert.deepEqual(
      [...statuses.keys()].sort(),
      // 403: GET /admin/sessions/x is the dashboard's session view, disabled while no admin key is set.
      [400, 401, 403, 404, 405, 413].filter((s) => statuses.has(s)),
    );
    assert.equal(sampler.calls.length, 0, 'the model never ran');
    assert.deepEqual(gw.store.counts(), { sessions: 0, turns: 0, next_states: 0, closed_turns: 0 });
    assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
    assert.equal((await fetch(`${gw.url}/readyz`)).status, 200);
    sampler.push(replyIds(backend.tokenizer, { content: 'still here' }));
    const after = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...auth(), 'x-turn-type': 'main' },
      body: JSON.stringify(valid()),
    });
    assert.equal(after.status, 200);
    await after.text();
    assert.equal(gw.store.counts().turns, 1);
  } finally {
    await gw.close();
  }
});
