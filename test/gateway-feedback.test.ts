// The general-agent wire contract: rollout grouping headers on chat requests (X-Task-Id,
// X-Rollout-Index, X-Rollout-Count), fixed per session, and POST /v1/feedback (outcomes and turn
// rewards: validated, authenticated, idempotent per key; an outcome ends the episode).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { exportSession } from '../src/store/session-data.js';
import { post, scriptedBackend, startGateway, type TestGateway } from './helpers/gateway.js';
import { replyIds } from './helpers/scripted-sampler.js';

// Every generation answers the same short reply (the replies do not matter here).
let reply: number[] = [];
const { backend, sampler } = await scriptedBackend(undefined, { fallback: () => ({ ids: reply }) });
const tok = backend.tokenizer;
reply = replyIds(tok, { content: 'done' });
const ROLLOUT = { 'x-task-id': 'gsm8k/17', 'x-rollout-index': '1', 'x-rollout-count': '4' };

async function withGateway(fn: (gw: TestGateway) => Promise<void>, config = {}, dataDir?: string) {
  const gw = await startGateway(backend, config, dataDir ? { dataDir } : {});
  try {
    await fn(gw);
  } finally {
    await gw.close();
    sampler.calls.length = 0;
  }
}

/** One main chat request of `session`; messages grow by one user message per step. */
async function chat(gw: TestGateway, session: string, step: number, headers: Record<string, string> = {}) {
  const messages: unknown[] = [];
  for (let i = 0; i <= step; i++) {
    messages.push({ role: 'user', content: `question ${i}` });
    if (i < step) messages.push({ role: 'assistant', content: 'done' });
  }
  return post(
    `${gw.url}/v1/chat/completions`,
    { model: 'm', messages },
    {
      'x-session-id': session,
      'x-turn-type': 'main',
      ...headers,
    },
  );
}

const feedback = (gw: TestGateway, body: unknown, headers: Record<string, string> = {}) =>
  post(`${gw.url}/v1/feedback`, body, headers);

const rolloutOf = (gw: TestGateway, session: string) =>
  gw.store.db.prepare('SELECT task_id, rollout_index, rollout_count FROM sessions WHERE id = ?').get(session);

test('rollout headers are stored on the session; bad values are a 400 naming the header', () =>
  withGateway(async (gw) => {
    const ok = await chat(gw, 'r1', 0, ROLLOUT);
    assert.equal(ok.status, 200);
    assert.deepEqual(rolloutOf(gw, 'r1'), { task_id: 'gsm8k/17', rollout_index: 1, rollout_count: 4 });
    const bad: [Record<string, string>, string, RegExp][] = [
      [{ 'x-rollout-index': '-1' }, 'X-Rollout-Index', /integer >= 0/],
      [{ 'x-rollout-index': '1.5' }, 'X-Rollout-Index', /integer >= 0/],
      [{ 'x-rollout-count': '0' }, 'X-Rollout-Count', /integer >= 1/],
      [{ 'x-rollout-count': 'many' }, 'X-Rollout-Count', /integer >= 1/],
      [{ 'x-rollout-index': '4', 'x-rollout-count': '4' }, 'X-Rollout-Index', /below X-Rollout-Count \(4\)/],
      [{ 'x-task-id': 'x'.repeat(257) }, 'X-Task-Id', /1 to 256 printable/],
      [{ 'x-task-id': 'caf\u00e9' }, 'X-Task-Id', /printable ASCII/],
    ];
    for (const [headers, param, message] of bad) {
      const res = await chat(gw, 'r-bad', 0, headers);
      assert.equal(res.status, 400, JSON.stringify(headers));
      assert.equal(res.json.error.param, param);
      assert.match(res.json.error.message, message);
    }
    assert.equal(sampler.calls.length, 1, 'a refused request never reaches the sampler');
    assert.equal(rolloutOf(gw, 'r-bad'), undefined, 'nothing stored for refused requests');
  }));

test('a session keeps its first rollout values: repeating or leaving them out is fine, changing them a 400, also after a restart', async () => {
  let dataDir = '';
  await withGateway(async (gw) => {
    dataDir = gw.dataDir;
    assert.equal((await chat(gw, 'r2', 0, ROLLOUT)).status, 200);
    assert.equal((await chat(gw, 'r2', 1, ROLLOUT)).status, 200);
    assert.equal((await chat(gw, 'r2', 2)).status, 200);
    const moved = await chat(gw, 'r2', 3, { ...ROLLOUT, 'x-rollout-index': '2' });
    assert.equal(moved.status, 400);
    assert.equal(moved.json.error.code, 'rollout_conflict');
    assert.equal(moved.json.error.param, 'X-Rollout-Index');
    assert.match(moved.json.error.message, /was given X-Rollout-Index 1 .* got 2/);
    // A session without rollout headers at first is given them by its first request that has them.
    assert.equal((await chat(gw, 'r3', 0)).status, 200);
    assert.equal((await chat(gw, 'r3', 1, { 'x-task-id': 't3' })).status, 200);
    assert.deepEqual(rolloutOf(gw, 'r3'), { task_id: 't3', rollout_index: null, rollout_count: null });
    const added = await chat(gw, 'r3', 2, { 'x-rollout-count': '2' });
    assert.equal(added.status, 400, 'the first request with rollout headers fixed all three');
  });
  await withGateway(
    async (gw) => {
      const moved = await chat(gw, 'r2', 3, { ...ROLLOUT, 'x-task-id': 'other' });
      assert.equal(moved.status, 400);
      assert.equal(moved.json.error.param, 'X-Task-Id');
      assert.equal((await chat(gw, 'r2', 3, ROLLOUT)).status, 200);
    },
    {},
    dataDir,
  );
});

const closureOf = (gw: TestGateway, turnId: string) =>
  gw.store.db
    .prepare(
      `SELECT t.closure_reason AS reason, c.status AS queue, (SELECT count(*) FROM next_states n WHERE n.turn_id = t.id) AS next
      FROM turns t LEFT JOIN closed_turns c ON c.turn_id = t.id WHERE t.id = ?`,
    )
    .get(turnId) as { reason: string | null; queue: string | null; next: number };

test('an outcome is stored and ends the episode: the last open main turn closes as episode_end, queued for the judge', () =>
  withGateway(async (gw) => {
    const first = await chat(gw, 'e1', 0, ROLLOUT);
    const last = await chat(gw, 'e1', 1, ROLLOUT);
    const t0 = first.headers.get('x-turn-id')!;
    const t1 = last.headers.get('x-turn-id')!;
    assert.equal(closureOf(gw, t0).reason, 'next_state');
    assert.equal(closureOf(gw, t1).reason, null);
    const res = await feedback(
      gw,
      { session_id: 'e1', reward: 1, comment: 'solved it' },
      { 'idempotency-key': 'k-e1' },
    );
    assert.equal(res.status, 200);
    assert.match(res.json.id, /^fb_[0-9a-f]{24}$/);
    assert.deepEqual(
      { ...res.json, id: undefined },
      {
        id: undefined,
        session_id: 'e1',
        turn_id: null,
        reward: 1,
        duplicate: false,
      },
    );
    assert.deepEqual(closureOf(gw, t1), { reason: 'episode_end', queue: 'pending', next: 0 });
    assert.deepEqual(
      gw.store.feedback.ofSession('e1').map((f) => [f.key, f.turnId, f.reward, f.comment]),
      [['k-e1', null, 1, 'solved it']],
    );
    // A person's export of the session carries its rollout grouping and its outcome.
    const exported = exportSession(gw.store.db, 'e1')!;
    assert.deepEqual(
      [exported.session.task_id, exported.session.rollout_index, exported.session.rollout_count],
      [ROLLOUT['x-task-id'], Number(ROLLOUT['x-rollout-index']), Number(ROLLOUT['x-rollout-count'])],
    );
    assert.deepEqual(
      exported.feedback.map((f) => [f.idempotency_key, f.turn_id, f.reward, f.comment]),
      [['k-e1', null, 1, 'solved it']],
    );
    // The session goes on with a fresh turn: nothing is attributed to the ended one.
    const after = await chat(gw, 'e1', 2, ROLLOUT);
    assert.equal(after.status, 200);
    assert.equal(closureOf(gw, t1).reason, 'episode_end');
    assert.equal(closureOf(gw, after.headers.get('x-turn-id')!).reason, null);
    // The comment is conversation-like text: never in the logs.
    const logged = JSON.stringify(gw.logs.lines);
    assert.ok(logged.includes('"event":"feedback"'));
    assert.ok(!logged.includes('solved it'));
  }));

test('idempotent per key: the same body again is a duplicate with nothing new stored; a different body 409', () =>
  withGateway(async (gw) => {
    const turn = (await chat(gw, 'i1', 0)).headers.get('x-turn-id')!;
    const body = { session_id: 'i1', turn_id: turn, reward: -0.5, key: 'k-1' };
    const a = await feedback(gw, body);
    const b = await feedback(gw, body);
    const c = await feedback(gw, { ...body, key: undefined }, { 'idempotency-key': 'k-1' });
    assert.equal(a.status, 200);
    assert.equal(a.json.duplicate, false);
    assert.equal(a.json.turn_id, turn);
    for (const again of [b, c]) {
      assert.equal(again.status, 200);
      assert.deepEqual(again.json, { ...a.json, duplicate: true });
    }
    assert.equal(gw.store.feedback.ofSession('i1').length, 1);
    assert.equal(closureOf(gw, turn).reason, null, 'a turn reward does not end the episode');
    const changed = await feedback(gw, { ...body, reward: 0.5 });
    assert.equal(changed.status, 409);
    assert.equal(changed.json.error.code, 'idempotency_conflict');
    const another = await feedback(gw, { ...body, key: 'k-2' });
    assert.equal(another.status, 409);
    assert.equal(another.json.error.code, 'feedback_exists');
    assert.equal((await feedback(gw, { session_id: 'i1', reward: 0, key: 'k-3' })).status, 200);
    const second = await feedback(gw, { session_id: 'i1', reward: 1, key: 'k-4' });
    assert.equal(second.status, 409, 'one outcome per session');
    assert.match(second.json.error.message, /already has an outcome/);
    assert.equal(gw.store.feedback.ofSession('i1').length, 2);
  }));

test('concurrent requests with one key store one row', () =>
  withGateway(async (gw) => {
    await chat(gw, 'c1', 0);
    const body = { session_id: 'c1', reward: 1, key: 'same' };
    const answers = await Promise.all([feedback(gw, body), feedback(gw, body), feedback(gw, body)]);
    assert.deepEqual(
      answers.map((r) => r.status),
      [200, 200, 200],
    );
    assert.deepEqual(answers.map((r) => r.json.duplicate).sort(), [false, true, true]);
    assert.equal(gw.store.feedback.ofSession('c1').length, 1);
  }));

test('unknown session or turn is a 404, a side turn or a bad body a 400, an opted-out session a 403; nothing stored', () =>
  withGateway(async (gw) => {
    const turn = (await chat(gw, 'v1', 0)).headers.get('x-turn-id')!;
    const other = (await chat(gw, 'v2', 0)).headers.get('x-turn-id')!;
    const side = (
      await post(
        `${gw.url}/v1/chat/completions`,
        { model: 'm', messages: [{ role: 'user', content: 'title?' }] },
        { 'x-session-id': 'v1', 'x-turn-type': 'side' },
      )
    ).headers.get('x-turn-id')!;
    await chat(gw, 'v3', 0, { 'x-learning-opt-out': '1' });
    const cases: [unknown, Record<string, string>, number, string, RegExp][] = [
      [{ session_id: 'nope', reward: 1, key: 'a' }, {}, 404, 'session_not_found', /no session "nope"/],
      [{ session_id: 'v1', turn_id: 'turn_x', reward: 1, key: 'a' }, {}, 404, 'turn_not_found', /has no turn/],
      [{ session_id: 'v1', turn_id: other, reward: 1, key: 'a' }, {}, 404, 'turn_not_found', /has no turn/],
      [{ session_id: 'v1', turn_id: side, reward: 1, key: 'a' }, {}, 400, 'side_turn', /side turn/],
      [{ session_id: 'v3', reward: 1, key: 'a' }, {}, 403, 'learning_opt_out', /opted out/],
      [{ session_id: 'v1', reward: 1.5, key: 'a' }, {}, 400, 'invalid_value', /reward must be a number from -1 to 1/],
      [{ session_id: 'v1', reward: '1', key: 'a' }, {}, 400, 'invalid_value', /reward must be/],
      [{ session_id: 'v1', key: 'a' }, {}, 400, 'invalid_value', /reward must be/],
      [{ reward: 1, key: 'a' }, {}, 400, 'missing', /session_id is required/],
      [{ session_id: 'v1', reward: 1 }, {}, 400, 'missing', /idempotency key is required/],
      [{ session_id: 'v1', reward: 1, key: 'a' }, { 'idempotency-key': 'b' }, 400, 'invalid_value', /differ/],
      [{ session_id: 'v1', reward: 1, key: 'a', score: 1 }, {}, 400, 'unknown_field', /unknown field "score"/],
      [{ session_id: 'v1', reward: 1, key: 'a', comment: 'x'.repeat(4001) }, {}, 400, 'invalid_type', /4000/],
      [[1, 2], {}, 400, 'invalid_type', /JSON object/],
    ];
    for (const [body, headers, status, code, message] of cases) {
      const res = await feedback(gw, body, headers);
      assert.equal(res.status, status, JSON.stringify(body).slice(0, 80));
      assert.equal(res.json.error.code, code);
      assert.match(res.json.error.message, message);
    }
    for (const s of ['v1', 'v2', 'v3']) assert.deepEqual(gw.store.feedback.ofSession(s), []);
    assert.equal(closureOf(gw, turn).reason, null);
  }));

test('feedback is authenticated like chat', () =>
  withGateway(
    async (gw) => {
      await chat(gw, 'a1', 0, { authorization: 'Bearer secret' });
      const body = { session_id: 'a1', reward: 1, key: 'k' };
      assert.equal((await feedback(gw, body)).status, 401);
      assert.equal((await feedback(gw, body, { authorization: 'Bearer wrong' })).status, 401);
      assert.equal(gw.store.feedback.ofSession('a1').length, 0);
      assert.equal((await feedback(gw, body, { authorization: 'Bearer secret' })).status, 200);
    },
    { apiKeys: ['secret'] },
  ));
