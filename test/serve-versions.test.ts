// Versions and rollback end to end, through `openclaw-rl serve` on the tiny model: two trained
// versions, a rollback to the first through the admin route while requests run (every one
// answered), a rollback through the CLI while serve runs and another while it is stopped (applied
// at the next start), a restart after a rollback; each time the served log-probs of a fixed
// greedy probe equal those of the restored version, and the restored version's adapter file is
// byte for byte the original's. Then the guard with a scripted judge that scores the new version
// worse: it is rolled back automatically, logged and visible.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ChatMessage } from '../src/chat/messages.js';
import { openStore, type Store } from '../src/store/store.js';
import type { VersionSummary } from '../src/store/versions.js';
import { freshDir } from './helpers/gateway.js';
import { startJudgeDouble } from './helpers/judge-double.js';
import { parseExposition, sampleValue } from './helpers/prometheus-text.js';
import { chatAsMain, CLI, judgedServeArgs, startServe, stopServe, type ServeProcess } from './helpers/serve-process.js';
import { ADMIN, admin, probe, servingVersion } from './helpers/serve-probe.js';

const run = promisify(execFile);

const serveArgs = (data: string, judgeUrl: string, extra: string[] = []) =>
  judgedServeArgs({ data, judgeUrl, votes: 1, adminKey: ADMIN }, ['--lr', '0.01', '--kv-cache-mb', '0', ...extra]);

/** Plays one session: each user text after the first is the next state of the previous turn. */
async function conversation(url: string, session: string, userTexts: string[]): Promise<void> {
  const messages: ChatMessage[] = [];
  for (const text of userTexts) {
    messages.push({ role: 'user', content: text });
    messages.push(await chatAsMain(url, session, messages));
  }
}

const batchTrained = (serve: ServeProcess, version: number) =>
  serve.waitForLog((l) => (l.event === 'batch_trained' && l.version === version) || l.event === 'trainer_failed');

const adapter = (data: string, version: number) =>
  readFileSync(join(data, 'versions', `v-${version}`, 'adapter_model.safetensors'));

test('rollback through the admin route and the CLI (serve running or not) serves the restored weights as a new version', async (t) => {
  const judge = await startJudgeDouble();
  judge.force = '1';
  const data = freshDir('versions-e2e-');
  let serve = await startServe(serveArgs(data, judge.url));
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
  });

  // Two closed turns judged +1 make a batch of 2: version 1; two more: version 2.
  await conversation(serve.url, 's1', ['What is 2 plus 2?', 'Thanks!', 'And 3 plus 3?']);
  assert.equal((await batchTrained(serve, 1)).event, 'batch_trained');
  const p1 = await probe(serve.url);
  await conversation(serve.url, 's2', ['How many legs has a cat?', 'Great, thanks.', 'And a spider?']);
  assert.equal((await batchTrained(serve, 2)).event, 'batch_trained');
  const p2 = await probe(serve.url);
  assert.equal(await servingVersion(serve.root), 2);
  assert.notDeepEqual(p2.logprobs, p1.logprobs, 'training changed what the model says');
  // From here on turns are judged 0: no sample, no further batch.
  judge.force = '0';

  // Bad requests get 400s that say what is wrong, and change nothing.
  const bad = [
    [{ version: 99 }, 'unknown_version'],
    [{ version: 2 }, 'already_serving'],
    [{ version: 'one' }, 'invalid_value'],
    [{ version: 1, extra: true }, 'invalid_value'],
  ] as const;
  for (const [body, code] of bad) {
    const r = await admin(serve.root, 'POST', '/admin/versions/rollback', body);
    assert.deepEqual([r.status, r.json.error.code], [400, code], JSON.stringify(r.json));
  }
  assert.equal((await fetch(`${serve.root}/admin/versions`)).status, 401, 'behind the admin key');

  // Roll back to version 1 through the admin route while conversations run: none is refused.
  let load = true;
  let answered = 0;
  const running = Promise.all(
    ['l1', 'l2'].map(async (s) => {
      for (let i = 0; load; i++) {
        await conversation(serve.url, `${s}-${i}`, ['Tell me a fact.', 'Okay.']);
        answered += 2;
      }
    }),
  );
  while (answered < 2) await new Promise((r) => setTimeout(r, 20));
  const rolled = await admin(serve.root, 'POST', '/admin/versions/rollback', { version: 1 });
  const answeredAtRollback = answered;
  while (answered < answeredAtRollback + 4) await new Promise((r) => setTimeout(r, 20));
  load = false;
  await running;
  assert.equal(rolled.status, 200, JSON.stringify(rolled.json));
  assert.deepEqual([rolled.json.restores, rolled.json.version], [1, 3]);
  assert.equal(await servingVersion(serve.root), 3);
  assert.deepEqual(await probe(serve.url), p1, 'version 3 serves version 1 weights');
  assert.ok(adapter(data, 3).equals(adapter(data, 1)), 'the same adapter, byte for byte');

  // The CLI while serve runs: it waits for serve's answer.
  const cli = await run(process.execPath, [CLI, 'versions', 'rollback', '2', '--data', data]);
  assert.match(cli.stdout, /rolled back: version 2's weights now serve as version 4/);
  assert.deepEqual(await probe(serve.url), p2);
  assert.ok(adapter(data, 4).equals(adapter(data, 2)));
  const scraped = await fetch(`${serve.root}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } });
  const families = parseExposition(await scraped.text());
  assert.equal(sampleValue(families, 'openclaw_rl_publications_total', { source: 'rollback' }), 2);
  assert.equal(sampleValue(families, 'openclaw_rl_publications_total', { source: 'train' }), 2);

  const listed = (await admin(serve.root, 'GET', '/admin/versions')).json.data as VersionSummary[];
  assert.deepEqual(
    listed.map((v) => [v.version, v.source, v.restores, v.rolledBackFrom, v.requestedBy, v.serving, v.weightsKept]),
    [
      [4, 'rollback', 2, 3, 'cli', true, true],
      [3, 'rollback', 1, 2, 'admin', false, true],
      [2, 'train', null, null, null, false, true],
      [1, 'train', null, null, null, false, true],
      [0, 'train', null, null, null, false, true],
    ],
  );
  assert.deepEqual(
    listed.map((v) => v.step),
    [2, 2, 2, 1, 0],
  );
  // Version 0 served the first conversation's turns, judged +1 (two) and one still open.
  assert.deepEqual([listed[4]!.turns, listed[4]!.judged, listed[4]!.scoreMean], [3, 2, 1]);

  // Stopped: the CLI queues the request and the next start applies it before anything else.
  assert.equal(await stopServe(serve), 0);
  const queued = await run(process.execPath, [CLI, 'versions', 'rollback', '1', '--data', data]);
  assert.match(
    queued.stdout,
    /no serve is learning on .*: the rollback to version 1 \(request \d+\) is applied at its next start/,
  );
  serve = await startServe(serveArgs(data, judge.url));
  const applied = await serve.waitForLog((l) => l.event === 'rollback' || l.event === 'trainer_failed');
  assert.deepEqual([applied.event, applied.restores, applied.requestedBy], ['rollback', 1, 'cli']);
  // The restart published the checkpoint (version 4's weights) as 5, then the rollback made 6.
  assert.equal(applied.version, 6);
  assert.deepEqual(await probe(serve.url), p1);

  // A restart after a rollback serves the rolled-back weights (the checkpoint holds them).
  assert.equal(await stopServe(serve), 0);
  serve = await startServe(serveArgs(data, judge.url));
  assert.equal(await servingVersion(serve.root), 7);
  assert.deepEqual(await probe(serve.url), p1);
  assert.ok(adapter(data, 7).equals(adapter(data, 1)));

  const table = await run(process.execPath, [CLI, 'versions', 'list', '--data', data]);
  const lines = table.stdout.trim().split('\n');
  assert.match(lines[0]!, /version\s+published\s+step\s+source\s+score\s+judged\s+turns\s+weights\s+guard/);
  assert.match(lines[1]!, /^\*\s+7\s+\S+ \S+\s+2\s+restart\s/);
  assert.match(lines[2]!, /^\s+6\s+\S+ \S+\s+2\s+rollback to 1 \(cli\)\s/);
  assert.match(lines[8]!, /^\s+0\s+-\s+0\s+base\s+\+1\.00\s+2\s+3\s+kept\s+-$/);
  assert.equal(lines.length, 9);

  // The load ran on both sides of the swap.
  assert.equal(await stopServe(serve), 0);
  const store = openStore({ dir: data, recoverQueue: false });
  t.after(() => store.close());
  const loadVersions = store.db
    .prepare(`SELECT DISTINCT policy_version AS v FROM turns WHERE session_id LIKE 'l_-%' ORDER BY v`)
    .all()
    .map((r) => (r as { v: number }).v);
  assert.deepEqual(loadVersions, [2, 3]);
});

/** The version that served a session's n-th main turn, once the recorder has committed it. */
async function versionOfTurn(store: Store, session: string, n: number): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = store.db
      .prepare(`SELECT policy_version AS v FROM turns WHERE session_id = ? AND kind = 'main' ORDER BY rowid`)
      .all(session) as { v: number }[];
    if (rows.length >= n) return rows[n - 1]!.v;
    assert.ok(Date.now() < deadline, `turn ${n} of ${session} was not recorded within 30 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('the guard rolls back a version the judge scores worse than the one before, logs it and shows it', async (t) => {
  const judge = await startJudgeDouble();
  const data = freshDir('versions-guard-');
  const serve = await startServe(
    serveArgs(data, judge.url, ['--rollback-guard', '--guard-window', '4', '--guard-margin', '0.1']),
  );
  const store = openStore({ dir: data, recoverQueue: false });
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
    store.close();
  });
  // The scripted judge: the base's turns mostly good, version 1's mostly bad, a rollback's good.
  // With window 4: previous [1, 0, 1, 1], new [-1, -1, 0, -1] gives p = 0.0037 (test/learn-guard.test.ts).
  const good = [1, 0, 1, 1];
  const bad = [-1, -1, 0, -1];
  const served = new Map<number, number>();
  const scoreFor = (version: number) => {
    const k = served.get(version) ?? 0;
    served.set(version, k + 1);
    if (version === 1) return bad[k % bad.length]!;
    return good[k % good.length]!;
  };
  const rollbackSeen = () => serve.lines.some((l) => l.event === 'auto_rollback');
  for (let s = 0; s < 40 && !rollbackSeen(); s++) {
    const session = `g${s}`;
    const messages: ChatMessage[] = [{ role: 'user', content: `Question ${s}?` }];
    for (let turn = 1; turn <= 3; turn++) {
      messages.push(await chatAsMain(serve.url, session, messages));
      if (turn === 3) break;
      const score = scoreFor(await versionOfTurn(store, session, turn));
      messages.push({ role: 'user', content: `Next. {{eval: ${score}}}` });
    }
    // Stop talking as soon as the guard acts (the judge may still be catching up).
    await serve.waitForLog((l) => l.event === 'auto_rollback', 300).catch(() => {});
  }
  const auto = await serve.waitForLog((l) => l.event === 'auto_rollback' || l.event === 'trainer_failed', 60_000);
  assert.deepEqual([auto.event, auto.version, auto.restores], ['auto_rollback', 1, 0]);
  assert.ok((auto.p as number) < 0.05, String(auto.p));
  const verdict = serve.lines.find((l) => l.event === 'guard_verdict')!;
  assert.deepEqual([verdict.version, verdict.decision, verdict.previous, verdict.turns], [1, 'rolled_back', 0, 4]);
  assert.equal(verdict.mean, -0.75);
  const done = await serve.waitForLog((l) => l.event === 'rollback' || l.event === 'trainer_failed');
  assert.deepEqual([done.event, done.requestedBy, done.restores, done.version], ['rollback', 'guard', 0, 2]);

  const status = (await admin(serve.root, 'GET', '/admin/status')).json;
  assert.equal(status.versions.guard.enabled, true);
  assert.deepEqual(
    status.versions.rollbacks.map((r: VersionSummary) => [r.version, r.restores, r.requestedBy]),
    [[2, 0, 'guard']],
  );
  const listed = (await admin(serve.root, 'GET', '/admin/versions')).json.data as VersionSummary[];
  const v1 = listed.find((v) => v.version === 1)!;
  assert.equal(v1.guard?.decision, 'rolled_back');
  assert.equal(listed.find((v) => v.version === 2)!.source, 'rollback');
  const table = await run(process.execPath, [CLI, 'versions', 'list', '--data', data]);
  assert.match(table.stdout, /\n\s+1\s.*\strain\s.*rolled back\n/);
  assert.match(table.stdout, /\n\*?\s+2\s.*rollback to 0 \(guard\)/);
});
