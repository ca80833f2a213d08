// The dashboard's routes in-process: the static shell and its files (headers, allow-list), the
// admin JSON routes (key, parameters, 404), and conversation text left out unless dashboardContent.
// The browser test is serve-dashboard.test.ts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { post, scriptedBackend, startGateway } from './helpers/gateway.js';
import { replyIds } from './helpers/scripted-sampler.js';

const { backend, sampler } = await scriptedBackend();
const KEY = 'sk-dash-123';
const ADMIN = 'admin-dash-456';
const SESSION = 'dash-session';
const USER_TEXT = 'a question nobody else may read';
const REPLY = 'an answer just as private';

const admin = { authorization: `Bearer ${ADMIN}` };

async function converse(url: string): Promise<void> {
  const auth = { authorization: `Bearer ${KEY}`, 'x-turn-type': 'main', 'x-session-id': SESSION };
  sampler.push(replyIds(backend.tokenizer, { content: REPLY })).push(replyIds(backend.tokenizer, { content: 'ok' }));
  const first = [{ role: 'user', content: USER_TEXT }];
  assert.equal((await post(`${url}/v1/chat/completions`, { messages: first }, auth)).status, 200);
  const next = [...first, { role: 'assistant', content: REPLY }, { role: 'user', content: 'and the second one' }];
  assert.equal((await post(`${url}/v1/chat/completions`, { messages: next }, auth)).status, 200);
}

test('without admin keys the dashboard and its routes are disabled', async () => {
  const gw = await startGateway(backend);
  try {
    for (const path of ['/dashboard', '/dashboard/app.js', '/admin/steps', '/admin/sessions', '/admin/sessions/x']) {
      const res = await fetch(`${gw.url}${path}`);
      assert.equal(res.status, 403, path);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'admin_disabled');
    }
  } finally {
    await gw.close();
  }
});

test('the shell is served from its own files with a strict policy; nothing else is', async () => {
  const gw = await startGateway(backend, { apiKeys: [KEY], adminKeys: [ADMIN] });
  try {
    const page = await fetch(`${gw.url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type')!, /^text\/html/);
    assert.match(page.headers.get('content-security-policy')!, /default-src 'none'; script-src 'self'/);
    assert.match(page.headers.get('content-security-policy')!, /frame-ancestors 'none'/);
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    const html = await page.text();
    const own = ['app.js', 'common.js', 'sessions.js', 'app.css', 'uPlot.iife.min.js', 'uPlot.min.css'];
    for (const name of own) {
      const res = await fetch(`${gw.url}/dashboard/${name}`);
      assert.equal(res.status, 200, name);
      const body = await res.text();
      assert.ok(body.length > 500, `${name} has content`);
      if (!name.startsWith('uPlot')) assert.doesNotMatch(body, /https?:\/\//, `${name} names no other host`);
    }
    assert.doesNotMatch(html, /https?:\/\//, 'the page loads nothing from another host');
    for (const name of ['app.js', 'uPlot.iife.min.js']) assert.ok(html.includes(`/dashboard/${name}`), name);
    for (const path of ['/dashboard/package.json', '/dashboard/..%2Fpackage.json', '/dashboard/routes.js']) {
      const res = await fetch(`${gw.url}${path}`);
      assert.equal(res.status, 404, path);
    }
  } finally {
    await gw.close();
  }
});

test('the admin routes need the admin key, check their parameters, and leave text out by default', async () => {
  const gw = await startGateway(backend, { apiKeys: [KEY], adminKeys: [ADMIN] });
  try {
    await converse(gw.url);
    for (const key of [undefined, KEY]) {
      const res = await fetch(`${gw.url}/admin/sessions`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
      assert.equal(res.status, 401, `key ${key}`);
    }
    for (const [path, param] of [
      ['/admin/steps?after=-1', 'after'],
      ['/admin/steps?limit=0', 'limit'],
      ['/admin/steps?limit=1e3', 'limit'],
      ['/admin/sessions?limit=abc', 'limit'],
      ['/admin/sessions?after=yesterday', 'after'],
    ]) {
      const res = await fetch(`${gw.url}${path}`, { headers: admin });
      assert.equal(res.status, 400, path);
      assert.equal(((await res.json()) as { error: { param: string } }).error.param, param);
    }
    const steps = await fetch(`${gw.url}/admin/steps?after=0&limit=10`, { headers: admin });
    assert.deepEqual(await steps.json(), { steps: [] });
    const list = (await (await fetch(`${gw.url}/admin/sessions`, { headers: admin })).json()) as {
      text: boolean;
      sessions: { id: string; turns: number; lastSeenAt: number }[];
      next: string | null;
    };
    assert.equal(list.text, false);
    assert.equal(list.next, null);
    const after = `${list.sessions[0]!.lastSeenAt}:${SESSION}`;
    const page2 = await fetch(`${gw.url}/admin/sessions?limit=1&after=${encodeURIComponent(after)}`, {
      headers: admin,
    });
    assert.deepEqual(((await page2.json()) as { sessions: unknown[] }).sessions, [], 'nothing after the only session');
    assert.deepEqual(
      list.sessions.map((s) => [s.id, s.turns]),
      [[SESSION, 2]],
    );
    const res = await fetch(`${gw.url}/admin/sessions/${SESSION}`, { headers: admin });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const body = await res.text();
    const view = JSON.parse(body) as { text: boolean; turns: { closureReason: string | null; text?: unknown }[] };
    assert.deepEqual(
      view.turns.map((t) => t.closureReason),
      ['next_state', null],
    );
    for (const secret of [USER_TEXT, REPLY, 'the second one']) assert.ok(!body.includes(secret), secret);
    assert.equal((await fetch(`${gw.url}/admin/sessions/nobody`, { headers: admin })).status, 404);
  } finally {
    await gw.close();
  }
});

test('with dashboardContent the turns carry their text', async () => {
  const gw = await startGateway(backend, { apiKeys: [KEY], adminKeys: [ADMIN], dashboardContent: true });
  try {
    await converse(gw.url);
    const view = (await (await fetch(`${gw.url}/admin/sessions/${SESSION}`, { headers: admin })).json()) as {
      text: boolean;
      turns: { text: { input: { content: string }[]; response: { content: string }; nextState: unknown } }[];
    };
    assert.equal(view.text, true);
    const first = view.turns[0]!.text;
    assert.deepEqual(
      first.input.map((m) => m.content),
      [USER_TEXT],
    );
    assert.equal(first.response.content, REPLY);
    assert.deepEqual(first.nextState, [{ role: 'user', content: 'and the second one' }]);
  } finally {
    await gw.close();
  }
});
