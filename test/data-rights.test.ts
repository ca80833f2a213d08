// One session's data rights against a live gateway: the admin export route (its JSON gives back
// the stored token ids and log-probs exactly), the admin delete refused while a training batch
// holds the session's samples, and `openclaw-rl data export|delete` on the store while the
// server holds it open. Also --retention-days in serve's settings.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CliError } from '../src/cli/args.js';
import { serveSettings } from '../src/cli/serve-options.js';
import type { SessionExport } from '../src/store/session-data.js';
import type { Store } from '../src/store/store.js';
import { freshDir, post, scriptedBackend, startGateway, type TestGateway } from './helpers/gateway.js';
import { claim, judgedFixture, rlDraft } from './helpers/learning-fixtures.js';
import { replyIds } from './helpers/scripted-sampler.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const { backend, sampler } = await scriptedBackend();
const ADMIN = 'admin-key-789';
const admin = { authorization: `Bearer ${ADMIN}` };

/** Runs the CLI as its own process (a second connection to the store), without blocking this one. */
async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, ...args], { encoding: 'utf8' });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}

/** Two main turns of `session` through the gateway; the first is closed by the second, judged, and has a sample. */
async function recordSession(gw: TestGateway, session: string): Promise<number> {
  const headers = { 'x-turn-type': 'main', 'x-session-id': session };
  sampler.push(replyIds(backend.tokenizer, { content: 'one' })).push(replyIds(backend.tokenizer, { content: 'two' }));
  const first = [{ role: 'user', content: `first of ${session}` }];
  await post(`${gw.url}/v1/chat/completions`, { messages: first, logprobs: true }, headers);
  await post(
    `${gw.url}/v1/chat/completions`,
    { messages: [...first, { role: 'assistant', content: 'one' }, { role: 'user', content: 'second' }] },
    headers,
  );
  await gw.gateway.settled();
  const [closedId] = gw.store.db
    .prepare(`SELECT t.id FROM turns t JOIN closed_turns c ON c.turn_id = t.id WHERE t.session_id = ?`)
    .all(session)
    .map((r) => (r as { id: string }).id);
  assert.ok(closedId, 'the first turn was closed by the second');
  claim(gw.store, closedId);
  const turn = gw.store.getTurn(closedId)!.turn;
  return gw.store.learning.recordJudgment(
    judgedFixture(closedId),
    rlDraft(turn, {
      source: 'opd+rl',
      teacherLogprobs: turn.completionIds.map((_, i) => -0.25 * (i + 1)),
      teacherVersion: 0,
    }),
  )!;
}

function assertSameAsStore(store: Store, doc: SessionExport): void {
  for (const t of doc.turns) {
    const stored = store.getTurn(t.turn_id)!.turn;
    assert.deepEqual(
      [t.prompt_ids, t.completion_ids, t.logprobs, t.sampled_logprobs, t.messages, t.response],
      [
        stored.promptIds,
        stored.completionIds,
        stored.logprobs,
        stored.sampledLogprobs,
        stored.messages,
        stored.response,
      ],
    );
  }
}

test('admin export: one session as JSON whose token ids and log-probs are the stored ones exactly, with next state, votes and sample', async () => {
  const gw = await startGateway(backend, { adminKeys: [ADMIN] });
  try {
    const sampleId = await recordSession(gw, 'mine');
    await recordSession(gw, 'other');
    const res = await fetch(`${gw.url}/admin/sessions/mine/export`, { headers: admin });
    assert.equal(res.status, 200);
    const doc = (await res.json()) as SessionExport;
    assert.deepEqual(
      [doc.session.id, doc.session.learning, doc.turns.length],
      ['mine', true, 2],
      "only the session's own turns",
    );
    assert.ok(doc.turns.every((t) => t.session_id === 'mine' && t.completion_ids.length > 0));
    assertSameAsStore(gw.store, doc);
    const [closed, open] = doc.turns;
    assert.equal(closed!.closure_reason, 'next_state');
    assert.equal(closed!.next_state!.nextTurnId, open!.turn_id);
    assert.deepEqual(closed!.next_state!.messages, [{ role: 'user', content: 'second' }]);
    assert.equal(closed!.queue_status, 'done');
    assert.deepEqual(
      closed!.judgment!.votes.map((v) => [v.kind, v.score, v.failure]),
      [
        ['eval', 1, null],
        ['eval', null, 'timeout'],
        ['hint', 1, null],
      ],
    );
    assert.deepEqual(closed!.judgment!.hint_rejections, [{ vote: 1, reason: 'too_short' }]);
    assert.deepEqual(
      [closed!.sample!.id, closed!.sample!.status, closed!.sample!.in_batch, closed!.sample!.teacher_logprobs],
      [sampleId, 'queued', false, closed!.completion_ids.map((_, i) => -0.25 * (i + 1))],
    );
    assert.deepEqual(
      [open!.closure_reason, open!.queue_status, open!.judgment, open!.sample],
      [null, null, null, null],
    );

    assert.equal((await fetch(`${gw.url}/admin/sessions/nobody/export`, { headers: admin })).status, 404);
    const asUser = await fetch(`${gw.url}/admin/sessions/mine/export`);
    assert.equal(asUser.status, 401);
    const logged = gw.logs.lines.find((e) => e.event === 'session_exported');
    assert.deepEqual(logged && [logged.sessionId, logged.turns], ['mine', 2]);
    assert.ok(!JSON.stringify(gw.logs.lines).includes('first of mine'), 'no conversation text in the logs');
  } finally {
    await gw.close();
  }
});

test("admin delete: 409, deleting nothing, while a training batch holds the session's samples; 200 once it is done", async () => {
  const gw = await startGateway(backend, { adminKeys: [ADMIN] });
  try {
    const sampleId = await recordSession(gw, 'busy');
    const batch = gw.store.learning.takeBatch(1);
    assert.deepEqual(
      batch.map((s) => s.id),
      [sampleId],
    );
    const refused = await fetch(`${gw.url}/admin/sessions/busy`, { method: 'DELETE', headers: admin });
    assert.equal(refused.status, 409);
    assert.equal(refused.headers.get('retry-after'), '30');
    const body = (await refused.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'session_in_training');
    assert.match(body.error.message, /1 sample\(s\) in the training batch in progress.*retry once the batch is done/);
    assert.equal(gw.store.counts().turns, 2, 'nothing was deleted');
    const exported = (await (await fetch(`${gw.url}/admin/sessions/busy/export`, { headers: admin })).json()) as
      | SessionExport
      | undefined;
    assert.equal(exported!.turns[0]!.sample!.in_batch, true);

    gw.store.learning.releaseBatch([sampleId]);
    const del = await fetch(`${gw.url}/admin/sessions/busy`, { method: 'DELETE', headers: admin });
    assert.deepEqual(await del.json(), { deleted: true, session_id: 'busy', turns: 2 });
    assert.equal(gw.store.learning.sample(sampleId), undefined);
  } finally {
    await gw.close();
  }
});

test('openclaw-rl data export and delete work on the store while a server holds it open, with the same rules', async () => {
  const gw = await startGateway(backend, { adminKeys: [ADMIN] });
  try {
    const sampleId = await recordSession(gw, 'cli');
    await recordSession(gw, 'kept');
    const out = join(freshDir('data-export-'), 'session.json');
    const exported = await cli('data', 'export', '--session', 'cli', '--data', gw.dataDir, '--out', out);
    assert.equal(exported.code, 0, exported.stderr);
    assert.match(exported.stderr, /exported session cli: 2 turn\(s\)/);
    assert.equal(statSync(out).mode & 0o777, 0o600, 'the export is private like the store');
    const fromCli = JSON.parse(readFileSync(out, 'utf8')) as SessionExport;
    const fromRoute = await (await fetch(`${gw.url}/admin/sessions/cli/export`, { headers: admin })).json();
    assert.deepEqual(fromCli, fromRoute, 'the command and the route export the same document');
    assertSameAsStore(gw.store, fromCli);

    // A batch in this (live) process holds the session's sample: the other process refuses too.
    gw.store.learning.takeBatch(1);
    const refused = await cli('data', 'delete', '--session', 'cli', '--data', gw.dataDir);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /session "cli" has 1 sample\(s\) in the training batch in progress.*nothing was deleted/,
    );
    assert.equal(gw.store.counts().turns, 4);
    gw.store.learning.releaseBatch([sampleId]);

    const deleted = await cli('data', 'delete', '--session', 'cli', '--data', gw.dataDir);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.deepEqual(JSON.parse(deleted.stdout), { deleted: true, session_id: 'cli', turns: 2 });
    // The server's own connection sees the deletion, and the store is whole.
    assert.deepEqual(gw.store.db.prepare('SELECT DISTINCT session_id FROM turns').all(), [{ session_id: 'kept' }]);
    assert.deepEqual(gw.store.db.pragma('foreign_key_check'), []);
    assert.deepEqual(gw.store.db.pragma('integrity_check'), [{ integrity_check: 'ok' }]);
    // The server goes on recording.
    await recordSession(gw, 'after');
    assert.equal(gw.store.counts().turns, 4);

    const missing = await cli('data', 'delete', '--session', 'cli', '--data', gw.dataDir);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no session "cli" in the store/);
    const usage = await cli('data', 'export', '--data', gw.dataDir);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--session is required/);
    const noStore = await cli('data', 'export', '--session', 'x', '--data', freshDir('empty-'));
    assert.match(noStore.stderr, /no store in .*pass the --data folder given to serve/);
  } finally {
    await gw.close();
  }
});

test("--retention-days and the config file's retentionDays: off by default, positive days only", () => {
  assert.equal(serveSettings({}).gateway.retentionDays, null);
  assert.equal(serveSettings({ 'retention-days': '30' }).gateway.retentionDays, 30);
  const path = join(freshDir('retention-config-'), 'config.json');
  writeFileSync(path, JSON.stringify({ retentionDays: 7 }));
  assert.equal(serveSettings({ config: path }).gateway.retentionDays, 7);
  assert.equal(serveSettings({ config: path, 'retention-days': '90' }).gateway.retentionDays, 90);
  assert.throws(() => serveSettings({ 'retention-days': '0' }), CliError);
  assert.throws(() => serveSettings({ 'retention-days': '0' }), /retentionDays must be a positive number of days/);
  assert.throws(() => serveSettings({ 'retention-days': 'soon' }), /--retention-days must be a number/);
});
