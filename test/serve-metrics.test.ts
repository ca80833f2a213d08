// GET /metrics of a `serve` process learning from a scripted conversation: every line of the
// exposition parses under a strict parser (test/helpers/prometheus-text.ts), every sample has a
// TYPE, histograms are consistent, counters move by what the requests and the learning did, and
// no label (nor anything else in the text) carries conversation text, session or turn ids.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import { freshDir } from './helpers/gateway.js';
import { startJudgeDouble } from './helpers/judge-double.js';
import { histogramProblems, parseExposition, sumOf, sampleValue, type Family } from './helpers/prometheus-text.js';
import { sseEvents } from './helpers/gateway.js';
import { judgedServeArgs, startServe, stopServe, type ServeProcess } from './helpers/serve-process.js';

const ADMIN = 'admin-secret';
const METRICS_FLAG = 'metrics-flag-secret';
const METRICS_ENV = 'metrics-env-secret';
const SESSION = 'sess-metrics-7f3a';
const HINT = 'Show the arithmetic one step at a time.';

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

interface Reply {
  message: ChatMessage;
  usage: Usage;
  turnId: string;
}

/** One chat request; streams with include_usage when asked, and returns the usage the response reported. */
async function chat(url: string, model: string, messages: ChatMessage[], stream = false): Promise<Reply> {
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': SESSION },
    body: JSON.stringify({
      model,
      messages,
      max_tokens: 6,
      temperature: 1,
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const turnId = res.headers.get('x-turn-id')!;
  if (!stream) {
    const body = JSON.parse(text) as { choices: { message: ChatMessage }[]; usage: Usage };
    return {
      message: { role: 'assistant', content: body.choices[0]!.message.content ?? '' },
      usage: body.usage,
      turnId,
    };
  }
  const events = sseEvents(text).filter((e) => e !== '[DONE]');
  const content = events.map((e) => e.choices[0]?.delta?.content ?? '').join('');
  return { message: { role: 'assistant', content }, usage: events.at(-1).usage as Usage, turnId };
}

async function scrape(root: string, key: string): Promise<{ text: string; families: Map<string, Family> }> {
  const res = await fetch(`${root}/metrics`, { headers: { authorization: `Bearer ${key}` } });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(res.headers.get('content-type')!, /^text\/plain; version=0\.0\.4/);
  const families = parseExposition(text);
  assert.deepEqual(histogramProblems(families), []);
  return { text, families };
}

async function waitFor(serve: ServeProcess, done: (f: Map<string, Family>) => boolean, what: string) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { families } = await scrape(serve.root, METRICS_FLAG);
    if (done(families)) return families;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; stderr: ${serve.stderr().slice(-2000)}`);
    await serve.waitForLog((l) => l.event === 'batch_trained' || l.event === 'turn_judged', 1_000).catch(() => {});
  }
}

test('serve exposes Prometheus metrics that parse strictly and count what happened', async (t) => {
  const judge = await startJudgeDouble({ hints: [HINT] });
  const serve = await startServe(
    judgedServeArgs({ data: freshDir('metrics-'), judgeUrl: judge.url, method: 'combine', adminKey: ADMIN }, [
      '--metrics-key',
      METRICS_FLAG,
    ]),
    { ...process.env, OPENCLAW_RL_METRICS_KEYS: METRICS_ENV },
  );
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
  });

  // Auth: either metrics key or the admin key; nothing else. A metrics key opens no admin route.
  const get = (path: string, key?: string) =>
    fetch(`${serve.root}${path}`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
  assert.equal((await get('/metrics')).status, 401);
  assert.equal((await get('/metrics', 'wrong-key')).status, 401);
  for (const key of [METRICS_FLAG, METRICS_ENV, ADMIN]) assert.equal((await get('/metrics', key)).status, 200, key);
  assert.equal((await get('/admin/status', METRICS_FLAG)).status, 401);

  const before = (await scrape(serve.root, METRICS_FLAG)).families;
  assert.equal(sampleValue(before, 'openclaw_rl_serving_version'), 0);
  assert.equal(sumOf(before, 'openclaw_rl_completion_tokens_total'), 0);
  assert.equal(sampleValue(before, 'openclaw_rl_publications_total', { source: 'train' }), 0);
  assert.equal(sampleValue(before, 'openclaw_rl_publications_total', { source: 'rollback' }), 0);
  assert.ok(Number.isNaN(sampleValue(before, 'openclaw_rl_train_loss')!), 'no step yet: NaN');
  for (const name of ['process_cpu_user_seconds_total', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds'])
    assert.ok(before.has(name), `process metric ${name}`);

  // A session of three main turns (the first two close with a next state the judge double scores),
  // the last one streamed; and one side request.
  const userTexts = [
    'What is 2 plus 2?',
    `Thanks, that helps. {{eval: 1|1|-1}} {{hint: hint#0|hint#0|nohint}}`, // +1, split, hint accepted
    'No, that is wrong. {{eval: -1|-1|-1}} {{hint: hint=ok|nohint|nohint}}', // -1, unanimous, hint too short
  ];
  const messages: ChatMessage[] = [];
  const main: Reply[] = [];
  for (const [i, text] of userTexts.entries()) {
    messages.push({ role: 'user', content: text });
    const reply = await chat(serve.url, 'main-model', messages, i === userTexts.length - 1);
    main.push(reply);
    messages.push(reply.message);
  }
  const side = await chat(serve.url, 'side-model', [{ role: 'user', content: 'Summarize the talk so far.' }]);
  const usage = (replies: readonly Reply[], k: keyof Usage) => replies.reduce((a, r) => a + r.usage[k], 0);

  // Two samples make a batch of two: one step, published as version 1.
  const after = await waitFor(
    serve,
    (f) =>
      sampleValue(f, 'openclaw_rl_publications_total', { source: 'train' }) === 1 &&
      sumOf(f, 'openclaw_rl_judge_turns_total') === 2,
    'a publication and two judged turns',
  );
  const chatRoute = { method: 'POST', route: '/v1/chat/completions' };
  assert.equal(sampleValue(after, 'openclaw_rl_http_requests_total', { ...chatRoute, status: '200' }), 4);
  for (const [kind, replies] of [
    ['main', main],
    ['side', [side]],
  ] as const) {
    assert.equal(
      sampleValue(after, 'openclaw_rl_completion_tokens_total', { kind }),
      usage(replies, 'completion_tokens'),
    );
    assert.equal(sampleValue(after, 'openclaw_rl_prompt_tokens_total', { kind }), usage(replies, 'prompt_tokens'));
    assert.equal(sumOf(after, 'openclaw_rl_turns_total', { kind }), replies.length);
    assert.equal(
      sampleValue(
        after,
        'openclaw_rl_http_request_duration_seconds',
        { ...chatRoute, kind },
        'openclaw_rl_http_request_duration_seconds_count',
      ),
      replies.length,
    );
    assert.equal(
      sumOf(
        after,
        'openclaw_rl_time_to_first_token_seconds',
        { kind },
        'openclaw_rl_time_to_first_token_seconds_count',
      ),
      replies.length,
    );
  }
  assert.equal(sampleValue(after, 'openclaw_rl_turns_closed_total', { reason: 'next_state' }), 2);
  assert.equal(sampleValue(after, 'openclaw_rl_open_turns'), 1, 'the last main turn waits for its next state');

  // The judge: 3 + 3 eval votes, both turns' majorities, their agreement, the hints.
  assert.equal(sampleValue(after, 'openclaw_rl_judge_votes_total', { kind: 'eval', outcome: 'ok' }), 6);
  assert.equal(sampleValue(after, 'openclaw_rl_judge_votes_total', { kind: 'hint', outcome: 'ok' }), 6);
  assert.deepEqual(
    ['1', '-1', '0'].map((score) => sampleValue(after, 'openclaw_rl_judge_turns_total', { score })),
    [1, 1, 0],
  );
  assert.deepEqual(
    ['unanimous', 'split', 'none'].map((agreement) =>
      sampleValue(after, 'openclaw_rl_judge_agreement_turns_total', { agreement }),
    ),
    [1, 1, 0],
  );
  assert.equal(sampleValue(after, 'openclaw_rl_hints_accepted_total'), 1);
  assert.equal(sampleValue(after, 'openclaw_rl_hints_rejected_total', { reason: 'too_short' }), 1);
  assert.equal(sampleValue(after, 'openclaw_rl_judge_recent_agreement_ratio'), (2 / 3 + 1) / 2);

  // Learning: the batch, its step, the publication, the new serving version.
  assert.equal(sampleValue(after, 'openclaw_rl_samples', { state: 'trained' }), 2);
  assert.equal(sampleValue(after, 'openclaw_rl_samples_built_total'), 2);
  assert.equal(sampleValue(after, 'openclaw_rl_train_steps_total'), 1);
  assert.equal(sampleValue(after, 'openclaw_rl_serving_version'), 1);
  assert.equal(sampleValue(after, 'openclaw_rl_train_reward_mean'), 0, 'the mean of +1 and -1');
  for (const name of ['openclaw_rl_train_loss', 'openclaw_rl_train_approx_kl', 'openclaw_rl_train_clipped_ratio'])
    assert.ok(Number.isFinite(sampleValue(after, name)), name);
  const step = 'openclaw_rl_train_step_duration_seconds';
  assert.equal(sampleValue(after, step, {}, `${step}_count`), 1);
  assert.ok(sampleValue(after, step, {}, `${step}_sum`)! > 0);
  assert.equal(
    sampleValue(after, 'openclaw_rl_publish_duration_seconds', {}, 'openclaw_rl_publish_duration_seconds_count'),
    1,
  );
  assert.ok(Math.abs(sampleValue(after, 'openclaw_rl_last_publication_timestamp_seconds')! - Date.now() / 1000) < 120);

  // The prefix cache: the same counters /admin/status reports, and the session's turns hit it.
  const status = (await (await get('/admin/status', ADMIN)).json()) as { prefixCache: Record<string, number> };
  const hits = sampleValue(after, 'openclaw_rl_prefix_cache_hit_tokens_total')!;
  assert.ok(hits > 0 && hits <= status.prefixCache.hitTokens!, `${hits} vs ${status.prefixCache.hitTokens}`);
  assert.equal(sampleValue(after, 'openclaw_rl_prefix_cache_budget_bytes'), status.prefixCache.budgetBytes);

  // One more request moves the counters by exactly its own figures.
  const one = await chat(serve.url, 'side-model', [{ role: 'user', content: 'One more, please.' }]);
  const last = (await scrape(serve.root, METRICS_FLAG)).families;
  const moved = (name: string, labels: Record<string, string>) =>
    sampleValue(last, name, labels)! - sampleValue(after, name, labels)!;
  assert.equal(moved('openclaw_rl_http_requests_total', { ...chatRoute, status: '200' }), 1);
  assert.equal(moved('openclaw_rl_completion_tokens_total', { kind: 'side' }), one.usage.completion_tokens);
  assert.equal(moved('openclaw_rl_prompt_tokens_total', { kind: 'side' }), one.usage.prompt_tokens);
  const scrapes = { method: 'GET', route: '/metrics', status: '200' };
  assert.ok(moved('openclaw_rl_http_requests_total', scrapes) >= 1, 'a scrape counts once answered');

  // No label value, nor any other part of the text, carries the conversation or its ids.
  const { text } = await scrape(serve.root, ADMIN);
  const secrets = [
    ...userTexts,
    ...main.map((r) => String(r.message.content)).filter((c) => c.length >= 8),
    HINT,
    SESSION,
    ...main.map((r) => r.turnId),
    'Summarize the talk',
    ADMIN,
    METRICS_FLAG,
    METRICS_ENV,
  ];
  for (const secret of secrets) assert.ok(!text.includes(secret), `${JSON.stringify(secret)} is in /metrics`);
  const labelValues = new Set(
    [...parseExposition(text).values()].flatMap((f) => f.samples.flatMap((s) => Object.values(s.labels))),
  );
  for (const v of labelValues) assert.match(v, /^[A-Za-z0-9_./:*+-]{1,40}$/, `label value ${JSON.stringify(v)}`);
});
