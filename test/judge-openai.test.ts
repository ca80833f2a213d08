// OpenAIJudgeClient against the judge test double on 127.0.0.1: the request it sends, and each
// way an endpoint can fail mapped to a failure reason with a message a person can act on.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { JudgeClientError } from '../src/judge/errors.js';
import { OpenAIJudgeClient } from '../src/judge/openai-client.js';
import { startJudgeDouble } from './helpers/judge-double.js';

const evalMessages = (script: string) => [
  { role: 'system' as const, content: 'Grade it. End with \\boxed{}.' },
  { role: 'user' as const, content: `## Next state\n[USER]\nok {{eval: ${script}}}` },
];
const opts = { temperature: 0.6, maxTokens: 64 };

async function failure(p: Promise<unknown>): Promise<JudgeClientError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof JudgeClientError, `expected a JudgeClientError, got ${String(e)}`);
    return e;
  }
  assert.fail('expected the request to fail');
}

test('sends model, messages, temperature, max_tokens, seed and the Bearer key; returns the content', async () => {
  const double = await startJudgeDouble();
  try {
    const client = new OpenAIJudgeClient({ baseUrl: `${double.url}/`, apiKey: 'sk-judge', model: 'judge-model' });
    assert.equal(client.name, 'openai:judge-model');
    const text = await client.complete(evalMessages('-1'), { ...opts, seed: 7 });
    assert.match(text, /\\boxed\{-1\}$/);
    const [req] = double.requests;
    assert.equal(req!.authorization, 'Bearer sk-judge');
    assert.equal(req!.body.model, 'judge-model');
    assert.equal(req!.body.temperature, 0.6);
    assert.equal(req!.body.max_tokens, 64);
    assert.equal(req!.body.seed, 7);
    assert.equal(req!.body.stream, false);
    assert.deepEqual(req!.body.messages, evalMessages('-1'));

    const noKey = new OpenAIJudgeClient({ baseUrl: double.url, model: 'm', maxTokensField: 'max_completion_tokens' });
    await noKey.complete(evalMessages('1'), opts);
    assert.equal(double.requests[1]!.authorization, null);
    assert.equal(double.requests[1]!.body.max_completion_tokens, 64);
    assert.equal(double.requests[1]!.body.max_tokens, undefined);
    assert.equal(double.requests[1]!.body.seed, undefined);
  } finally {
    await double.close();
  }
});

test('failures: status, garbage, refusal, closed connection, refused connection, timeout; transient ones flagged', async () => {
  const double = await startJudgeDouble();
  const client = new OpenAIJudgeClient({
    baseUrl: double.url,
    apiKey: 'sk-secret-key',
    model: 'judge-model',
    timeoutMs: 150,
  });
  try {
    const cases: [string, string, boolean, RegExp][] = [
      ['500', 'http', true, /failed \(HTTP 500\)\. The server said: double says 500/],
      ['503', 'http', true, /HTTP 503/],
      ['429', 'http', true, /rate limiting \(HTTP 429\); lower the judge concurrency/],
      ['401', 'http', false, /rejected the credentials \(HTTP 401\); check the judge API key/],
      ['404', 'http', false, /not found \(HTTP 404\); check the base URL .* and the model name "judge-model"/],
      ['400', 'http', false, /rejected the request \(HTTP 400\)/],
      ['notjson', 'http', false, /not JSON; check that the base URL is an OpenAI-compatible API root/],
      ['refuse', 'refused', false, /declined to answer/],
      [
        'close',
        'connection',
        true,
        /cannot get an answer from the judge at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions/,
      ],
      ['hang', 'timeout', true, /did not answer within 150 ms/],
    ];
    for (const [action, kind, transient, message] of cases) {
      const e = await failure(client.complete(evalMessages(action), opts));
      assert.equal(e.failure, kind, action);
      assert.equal(e.transient, transient, action);
      assert.match(e.message, message, action);
      assert.ok(
        !e.message.includes('sk-secret-key') && !e.message.includes('{{eval'),
        `${action}: no key or conversation in messages`,
      );
    }
    assert.equal((await failure(client.complete(evalMessages('500'), opts))).status, 500);
  } finally {
    await double.close();
  }

  // Nothing listens on a port that was just released.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const down = new OpenAIJudgeClient({ baseUrl: `http://127.0.0.1:${port}/v1?token=abc`, model: 'm' });
  const e = await failure(down.complete(evalMessages('1'), opts));
  assert.equal(e.failure, 'connection');
  assert.match(e.message, /ECONNREFUSED.*is the server running and the URL right\?/);
  assert.ok(!e.message.includes('abc'), 'the query (which may carry a token) stays out of messages');
});

test('the caller aborting ends the request with the abort reason, not a judge failure', async () => {
  const double = await startJudgeDouble();
  try {
    const client = new OpenAIJudgeClient({ baseUrl: double.url, model: 'm' });
    const stop = new AbortController();
    const pending = client.complete(evalMessages('hang'), { ...opts, signal: stop.signal });
    await double.arrived(1);
    const reason = new Error('shutting down');
    stop.abort(reason);
    await assert.rejects(pending, (e) => e === reason);
  } finally {
    await double.close();
  }
});

test('configuration errors are thrown at construction with what to give instead', () => {
  assert.throws(() => new OpenAIJudgeClient({ baseUrl: 'not a url', model: 'm' }), /is not a URL; give the API root/);
  assert.throws(() => new OpenAIJudgeClient({ baseUrl: 'ftp://x/v1', model: 'm' }), /must be http\(s\)/);
  assert.throws(() => new OpenAIJudgeClient({ baseUrl: 'http://x/v1', model: ' ' }), /model name is empty/);
  assert.throws(
    () => new OpenAIJudgeClient({ baseUrl: 'http://me:secret@x/v1', model: 'm' }),
    (e: Error) => /must not contain credentials/.test(e.message) && !e.message.includes('secret'),
  );
});
