// The dashboard in a real browser (Debian's headless Chromium driven by playwright-core) against
// a `serve` that learns from a scripted conversation judged by the judge test double: the page is
// an empty shell until the admin key is given, the admin routes answer nothing without it, the
// charts and tables fill and then update as more turns arrive, conversation text stays on the
// server unless it runs with --dashboard-content, export and delete work from the page, and every
// request the page makes goes to the server itself. Screenshots go to a scratch folder, or to
// docs/images/ with OPENCLAW_RL_UPDATE_SCREENSHOTS=1 (a plain test run leaves the tree as it was).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import type { ChatMessage } from '../src/chat/messages.js';
import { launchChromium, waitInPage } from './helpers/browser.js';
import { freshDir, tinyModel } from './helpers/gateway.js';
import { startJudgeDouble } from './helpers/judge-double.js';
import { chatAsMain, startServe, stopServe, type ServeProcess } from './helpers/serve-process.js';

const ADMIN = 'admin-dashboard-secret';
const SESSION = 'sess-dashboard-1';
const DOOMED = 'sess-dashboard-delete';
const HINT = 'Show the arithmetic one step at a time.';
const IMAGES =
  process.env.OPENCLAW_RL_UPDATE_SCREENSHOTS === '1'
    ? fileURLToPath(new URL('../../docs/images/', import.meta.url))
    : `${freshDir('dashboard-screenshots-')}/`;
const FIRST = [
  'What is 2 plus 2?',
  'Thanks, that helps. {{eval: 1|1|-1}} {{hint: hint#0|hint#0|nohint}}',
  'No, that is wrong. {{eval: -1|-1|-1}} {{hint: hint=ok|nohint|nohint}}',
];
const MORE = [
  'Thanks, now 3 plus 3? {{eval: 1|1|1}} {{hint: nohint|nohint|nohint}}',
  'Thanks. {{eval: 1|-1|1}} {{hint: hint#0|hint#0|hint#0}}',
];

async function say(serve: ServeProcess, session: string, messages: ChatMessage[], texts: string[]): Promise<void> {
  for (const text of texts) {
    messages.push({ role: 'user', content: text });
    messages.push(await chatAsMain(serve.url, session, messages));
  }
}

async function signIn(page: Page, root: string, key: string, query = ''): Promise<void> {
  await page.goto(`${root}/dashboard${query}`);
  await page.fill('#key', key);
  await page.click('#login button[type=submit]');
}

function serveArgs(data: string): string[] {
  return ['--model', tinyModel(), '--data', data, '--threads', '1', '--main-model', 'main-model'];
}

test('the dashboard signs in with the admin key, fills, updates, and keeps text on the server', async (t) => {
  const judge = await startJudgeDouble({ hints: [HINT] });
  const data = freshDir('dashboard-');
  const learning = [
    ...serveArgs(data),
    '--method',
    'combine',
    '--batch-size',
    '2',
    '--judge-url',
    judge.url,
    '--judge-model',
    'judge-double',
    '--judge-votes',
    '3',
    '--admin-key',
    ADMIN,
    '--progress-seconds',
    '0',
  ];
  let serve = await startServe(learning);
  const browser = await launchChromium();
  t.after(async () => {
    await browser.close();
    await stopServe(serve);
    await judge.close();
  });

  // Without the key: the shell (no data), and every data route refuses.
  const shell = await fetch(`${serve.root}/dashboard`);
  assert.equal(shell.status, 200);
  assert.match(shell.headers.get('content-security-policy')!, /default-src 'none'.*connect-src 'self'/);
  const messages: ChatMessage[] = [];
  await say(serve, SESSION, messages, FIRST);
  const shellText = await shell.text();
  for (const path of ['/admin/steps', '/admin/sessions', `/admin/sessions/${SESSION}`, '/admin/status']) {
    for (const headers of [{}, { authorization: 'Bearer wrong-key' }] as Record<string, string>[]) {
      const res = await fetch(`${serve.root}${path}`, { headers });
      assert.equal(res.status, 401, path);
      assert.ok(!(await res.text()).includes(SESSION), `${path} leaks without the key`);
    }
  }
  assert.ok(!shellText.includes(SESSION));
  const bad = await fetch(`${serve.root}/admin/steps?after=-1`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(bad.status, 400);
  assert.equal(((await bad.json()) as { error: { param: string } }).error.param, 'after');

  const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, acceptDownloads: true });
  const page = await context.newPage();
  const origins = new Set<string>();
  page.on('request', (r) => origins.add(new URL(r.url()).origin));
  page.on('dialog', (d) => void d.accept());
  // Uncaught exceptions and what the CSP blocked (Chromium reports it on the console).
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) problems.push(m.text());
  });

  // A wrong key is refused and the page stays empty.
  await signIn(page, serve.root, 'wrong-key');
  await waitInPage(page, 'the refusal', { selector: '#login-error', text: '401' });
  assert.equal(await page.isHidden('#main'), true);
  assert.equal(await page.locator('#sessions tbody tr').count(), 0);

  // The first step (two judged turns, a batch of two) fills the charts and the tables.
  await signIn(page, serve.root, ADMIN);
  await waitInPage(page, 'the first step on the charts', { selector: '#chart-reward', points: 1 });
  for (const id of ['chart-agreement', 'chart-hints', 'chart-samples', 'chart-tokens', 'chart-versions'])
    await waitInPage(page, `points on ${id}`, { selector: `#${id}`, points: 1 });
  await waitInPage(page, 'live queue points', { selector: '#chart-queues', points: 2 });
  await waitInPage(page, 'the session row', { selector: `#sessions tr[data-session="${SESSION}"]`, count: 1 });
  await page.click(`#sessions tr[data-session="${SESSION}"]`);
  await waitInPage(page, 'three turns', { selector: '#turns tbody tr', count: 3 });
  await waitInPage(page, 'two verdicts', {
    selector: '#turns td[data-verdict="1"], #turns td[data-verdict="-1"]',
    count: 2,
  });
  const turnsText = (await page.locator('#turns tbody').textContent()) ?? '';
  assert.match(turnsText, /\+1 \+1 -1/, "the first turn's votes");
  assert.match(turnsText, /accepted/, 'the accepted hint');
  assert.match(turnsText, /rl \+1\.00/, 'the advantage');
  // The versions table lists what GET /admin/versions lists, newest first, with the serving one marked.
  const versions = await fetch(`${serve.root}/admin/versions`, { headers: { authorization: `Bearer ${ADMIN}` } });
  const listed = ((await versions.json()) as { data: { version: number }[] }).data.map((v) => String(v.version));
  await waitInPage(page, 'the versions table', { selector: '#versions tbody tr', count: listed.length });
  assert.deepEqual(
    await page.locator('#versions tbody tr').evaluateAll((rows) => rows.map((r) => (r as any).dataset.version)),
    listed,
  );
  assert.match((await page.locator('#versions tr[data-version="1"]').textContent()) ?? '', /serving/);
  const cards = (await page.locator('#cards').textContent()) ?? '';
  assert.match(cards, /Serving version\s*1(?!\d)/);

  // Without --dashboard-content no text reaches the page, nor leaves the server.
  const html = await page.content();
  for (const secret of [...FIRST, HINT]) assert.ok(!html.includes(secret), `${secret} is on the page`);
  const view = await fetch(`${serve.root}/admin/sessions/${SESSION}`, {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  const viewText = await view.text();
  for (const secret of [...FIRST, HINT, 'What is 2']) assert.ok(!viewText.includes(secret), `${secret} in the route`);

  // More turns: a second step; the charts and the turns update in place.
  await say(serve, SESSION, messages, MORE);
  await waitInPage(page, 'the second step', { selector: '#chart-reward', points: 2 });
  await waitInPage(page, 'five turns', { selector: '#turns tbody tr', count: 5 });
  await waitInPage(page, 'version 2 serving', { selector: '#cards', text: 'Serving version2' });
  await page.screenshot({ path: `${IMAGES}dashboard.png`, fullPage: true });

  // Export and delete from the page.
  const download = page.waitForEvent('download');
  await page.click('#export');
  const exported = JSON.parse(readFileSync(await (await download).path(), 'utf8')) as { turns: unknown[] };
  assert.equal(exported.turns.length, 5);
  await say(serve, DOOMED, [], ['Please forget this.']);
  await waitInPage(page, 'the second session', { selector: `#sessions tr[data-session="${DOOMED}"]`, count: 1 });
  await page.click(`#sessions tr[data-session="${DOOMED}"]`);
  await waitInPage(page, 'its turn', { selector: '#turns tbody tr', count: 1 });
  await page.click('#delete');
  await waitInPage(page, 'the session gone', { selector: `#sessions tr[data-session="${DOOMED}"]`, count: 0 });
  const gone = await fetch(`${serve.root}/admin/sessions/${DOOMED}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(gone.status, 404);
  // Roll back to version 1 from the page: a new version (3) serves version 1's weights, history kept.
  await page.click('#versions tr[data-version="1"] button');
  await waitInPage(page, 'the rollback', { selector: '#versions-note', text: 'now serves the weights of version 1' });
  await waitInPage(page, 'version 3 serving', { selector: '#cards', text: 'Serving version3' });
  await waitInPage(page, 'the rollback listed', { selector: '#versions tr[data-version="3"]', text: 'rollback to 1' });
  assert.equal(await page.locator('#versions tr[data-version="2"]').count(), 1, 'history is kept');
  await page
    .locator('section[aria-labelledby="versions-title"]')
    .screenshot({ path: `${IMAGES}dashboard-versions.png` });
  assert.deepEqual([...origins], [new URL(serve.root).origin], 'the page talks to its server only');
  assert.deepEqual(problems, [], 'no script errors, nothing blocked by the CSP');
  await context.close();

  // The same store served with --dashboard-content: the text is on the page.
  await stopServe(serve);
  serve = await startServe([...serveArgs(data), '--no-learning', '--admin-key', ADMIN, '--dashboard-content']);
  const withText = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  await signIn(withText, serve.root, ADMIN);
  await waitInPage(withText, 'the session row', { selector: `#sessions tr[data-session="${SESSION}"]`, count: 1 });
  await withText.click(`#sessions tr[data-session="${SESSION}"]`);
  await waitInPage(withText, 'the first user message', { selector: '#turns', text: FIRST[0]! });
  assert.ok(((await withText.locator('#turns').textContent()) ?? '').includes(HINT), 'the accepted hint text');
  await withText.locator('#session').screenshot({ path: `${IMAGES}dashboard-session.png` });

  // One session a page (?sessions=1): Older walks every session, newest first, then Newer goes back.
  await say(serve, 'sess-dashboard-later', [], ['Hello again.']);
  const everySession = await fetch(`${serve.root}/admin/sessions?limit=1000`, {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  const all = ((await everySession.json()) as { sessions: { id: string }[] }).sessions.map((x) => x.id);
  assert.ok(all.length >= 2 && all[0] === 'sess-dashboard-later', JSON.stringify(all));
  const paged = await browser.newPage();
  await signIn(paged, serve.root, ADMIN, '?sessions=1');
  const walked: string[] = [];
  for (let n = 1; ; n++) {
    await waitInPage(paged, `page ${n}`, { selector: '#sessions-page', text: `page ${n}` });
    const ids = await paged
      .locator('#sessions tbody tr')
      .evaluateAll((rows) => rows.map((r) => (r as any).dataset.session));
    walked.push(...ids);
    if (await paged.isDisabled('#older')) break;
    await paged.click('#older');
  }
  assert.deepEqual(walked, all);
  await paged.click('#newer');
  await waitInPage(paged, 'back a page', { selector: '#sessions-page', text: `page ${all.length - 1}` });
  assert.equal(await paged.isDisabled('#older'), false);
});
