// judgeTurn end to end through OpenAIJudgeClient and the judge test double: majority, abstention,
// agreement, hint choice, retries (bounded, transient only), timeouts (bounded, even for a client
// that ignores its signal) and the caller's abort.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { judgeTurn } from '../src/judge/judge-turn.js';
import { OpenAIJudgeClient } from '../src/judge/openai-client.js';
import type { JudgeClient } from '../src/judge/types.js';
import { makeClosedTurn, startJudgeDouble, type JudgeDouble } from './helpers/judge-double.js';

async function withDouble(fn: (double: JudgeDouble, client: OpenAIJudgeClient) => Promise<void>): Promise<void> {
  const double = await startJudgeDouble();
  try {
    await fn(double, new OpenAIJudgeClient({ baseUrl: double.url, apiKey: 'k', model: 'judge' }));
  } finally {
    await double.close();
  }
}

const fast = { timeoutMs: 2_000, backoffMs: 1, maxBackoffMs: 2 };

test('majority +1 with 2/3 agreement; the longest acceptable hint wins; short ones are rejected; every raw text kept', () =>
  withDouble(async (double, client) => {
    const long = 'Give temperatures in Kelvin whenever SI units are asked for.';
    const closed = makeClosedTurn({
      request: `Convert 20 C to SI units {{eval: 1|1|-1}} {{hint: hint=Use Kelvin for SI.|hint=tiny|hint=${long}}}`,
      reply: '20 C is 68 F.',
      next: [{ role: 'user', content: 'Kelvin please.' }],
    });
    const j = await judgeTurn(client, closed, { ...fast, seed: 100 });
    assert.equal(j.turnId, closed.turn.id);
    assert.equal(j.nextTurnId, closed.nextState!.nextTurnId);
    assert.equal(j.judge, 'openai:judge');
    assert.equal(j.skipped, null);
    assert.equal(j.score, 1);
    assert.equal(j.agreement, 2 / 3);
    assert.deepEqual(j.evalVotes.map((v) => v.score).sort(), [-1, 1, 1]);
    for (const v of j.evalVotes) {
      assert.match(v.raw, /\\boxed\{-?1\}$/);
      assert.equal(v.failure, null);
      assert.equal(v.attempts, 1);
    }
    assert.equal(j.hint, long);
    assert.equal(j.hintVotes[j.hintVote!]!.hint, long);
    assert.deepEqual(j.hintRejections, [
      { vote: j.hintVotes.findIndex((v) => v.hint === 'tiny'), reason: 'too_short' },
    ]);
    assert.ok(j.finishedAt >= j.startedAt);

    assert.equal(double.requests.filter((r) => r.kind === 'eval').length, 3);
    assert.equal(double.requests.filter((r) => r.kind === 'hint').length, 3);
    assert.ok(double.requests.every((r) => r.body.temperature === 0.6));
    const seeds = (kind: string) =>
      double.requests
        .filter((r) => r.kind === kind)
        .map((r) => r.body.seed)
        .sort();
    assert.deepEqual(seeds('eval'), [100, 101, 102]);
    assert.deepEqual(seeds('hint'), [100, 101, 102]);
    const evalPrompt = double.requests.find((r) => r.kind === 'eval')!.body.messages![1]!.content;
    assert.ok(evalPrompt.includes('## User request\nConvert 20 C to SI units'), 'the judge sees the request');
    assert.ok(evalPrompt.includes('## Next state (a user message)\n[USER]\nKelvin please.'));
  }));

test('ties, failed votes and unparseable answers abstain with 0; raw text and reasons are kept', () =>
  withDouble(async (_double, client) => {
    const tie = await judgeTurn(
      client,
      makeClosedTurn({ request: '{{eval: 1|-1|garbage}}', next: [{ role: 'user', content: 'hm' }] }),
      { ...fast, hintVotes: 0 },
    );
    assert.equal(tie.score, 0);
    assert.equal(tie.agreement, 0);
    const bad = tie.evalVotes.find((v) => v.failure !== null)!;
    assert.deepEqual([bad.score, bad.failure, bad.raw], [null, 'unparseable', 'I am not sure what to say about this.']);
    assert.deepEqual(tie.hintVotes, []);

    const none = await judgeTurn(
      client,
      makeClosedTurn({
        request: '{{eval: garbage|refuse|notjson}} {{hint: 0}}',
        next: [{ role: 'user', content: 'hm' }],
      }),
      fast,
    );
    assert.equal(none.score, 0);
    assert.equal(none.agreement, null);
    assert.deepEqual(none.evalVotes.map((v) => v.failure).sort(), ['http', 'refused', 'unparseable']);
    assert.ok(none.hintVotes.every((v) => v.failure === 'unparseable' && v.raw.endsWith('\\boxed{0}')));
    assert.equal(none.hint, null);

    const thinking = await judgeTurn(
      client,
      makeClosedTurn({ request: '{{eval: think=1}}', next: [{ role: 'user', content: 'hm' }] }),
      { ...fast, hintVotes: 0 },
    );
    assert.equal(thinking.score, 1, 'a box inside <think> is not the verdict');
    assert.equal(thinking.agreement, 1);
  }));

test('content decides without a script: thanks is +1, a correction is -1; no next state skips the judge', () =>
  withDouble(async (double, client) => {
    const thanks = await judgeTurn(
      client,
      makeClosedTurn({ reply: 'Done.', next: [{ role: 'user', content: 'Great, thanks!' }] }),
      fast,
    );
    assert.deepEqual([thanks.score, thanks.agreement, thanks.hint], [1, 1, null]);
    const wrong = await judgeTurn(
      client,
      makeClosedTurn({ reply: 'Done.', next: [{ role: 'user', content: 'No, redo it.' }] }),
      fast,
    );
    assert.equal(wrong.score, -1);

    const before = double.requests.length;
    const skipped = await judgeTurn(client, makeClosedTurn({ next: null }), fast);
    assert.equal(skipped.skipped, 'no_next_state');
    assert.deepEqual(
      [skipped.score, skipped.agreement, skipped.evalVotes.length, skipped.nextTurnId],
      [0, null, 0, null],
    );
    assert.equal(double.requests.length, before, 'no request for a turn without a next state');
  }));

test('retries: transient failures are retried with back-off, a bounded number of times; others are not', () =>
  withDouble(async (double, client) => {
    const next = [{ role: 'user' as const, content: 'hm' }];
    const recovered = await judgeTurn(client, makeClosedTurn({ request: '{{eval: 500>1|close>1|hang>-1}}', next }), {
      ...fast,
      timeoutMs: 500,
      hintVotes: 0,
      retries: 1,
      seed: 1,
    });
    assert.equal(recovered.score, 1);
    assert.ok(recovered.evalVotes.every((v) => v.attempts === 2 && v.failure === null));
    assert.deepEqual(recovered.evalVotes.map((v) => v.score).sort(), [-1, 1, 1]);

    let start = double.requests.length;
    const down = await judgeTurn(client, makeClosedTurn({ request: '{{eval: 503}}', next }), {
      ...fast,
      hintVotes: 0,
      retries: 2,
    });
    assert.equal(double.requests.length - start, 9, '3 votes x (1 + 2 retries)');
    assert.ok(down.evalVotes.every((v) => v.failure === 'http' && v.attempts === 3 && /HTTP 503/.test(v.detail!)));
    assert.equal(down.score, 0);

    start = double.requests.length;
    const denied = await judgeTurn(client, makeClosedTurn({ request: '{{eval: 401}}', next }), {
      ...fast,
      hintVotes: 0,
      retries: 2,
    });
    assert.equal(double.requests.length - start, 3, 'a bad key is not retried');
    assert.ok(denied.evalVotes.every((v) => v.failure === 'http' && v.attempts === 1 && /API key/.test(v.detail!)));
  }));

test('timeouts are bounded per attempt: a hanging endpoint, and a client that ignores its signal', () =>
  withDouble(async (double, client) => {
    double.force = 'hang';
    const t0 = Date.now();
    const hung = await judgeTurn(client, makeClosedTurn({ next: [{ role: 'user', content: 'hm' }] }), {
      timeoutMs: 100,
      retries: 1,
      backoffMs: 1,
      hintVotes: 1,
    });
    const elapsed = Date.now() - t0;
    assert.ok(elapsed < 5_000, `2 attempts of 100 ms took ${elapsed} ms`); // loose for loaded machines; the default is 60 s
    assert.ok(
      [...hung.evalVotes, ...hung.hintVotes].every((v) => v.failure === 'timeout' && v.attempts === 2 && v.raw === ''),
    );
    assert.equal(hung.score, 0);
    assert.equal(double.requests.length, 8, '(3 eval + 1 hint) x 2 attempts');

    let calls = 0;
    const deaf: JudgeClient = {
      name: 'deaf',
      complete: () => {
        calls++;
        return new Promise<string>(() => {});
      },
    };
    const ignored = await judgeTurn(deaf, makeClosedTurn({ next: [{ role: 'user', content: 'hm' }] }), {
      timeoutMs: 50,
      retries: 0,
      hintVotes: 0,
    });
    assert.ok(ignored.evalVotes.every((v) => v.failure === 'timeout' && /within 50 ms/.test(v.detail!)));
    assert.equal(calls, 3);

    const broken: JudgeClient = {
      name: 'broken',
      complete: () => {
        throw new TypeError('bug in a client');
      },
    };
    const errored = await judgeTurn(broken, makeClosedTurn({ next: [{ role: 'user', content: 'hm' }] }), {
      retries: 3,
      hintVotes: 0,
    });
    assert.ok(
      errored.evalVotes.every((v) => v.failure === 'error' && v.attempts === 1 && v.detail === 'bug in a client'),
    );
  }));

test("the caller's abort rejects judgeTurn with its reason and ends the requests", () =>
  withDouble(async (double, client) => {
    double.force = 'hang';
    const stop = new AbortController();
    const pending = judgeTurn(client, makeClosedTurn({ next: [{ role: 'user', content: 'hm' }] }), {
      signal: stop.signal,
      timeoutMs: 60_000,
    });
    await double.arrived(6);
    const reason = new Error('shutdown');
    stop.abort(reason);
    await assert.rejects(pending, (e) => e === reason);
    await assert.rejects(
      judgeTurn(client, makeClosedTurn({ next: [{ role: 'user', content: 'hm' }] }), { signal: stop.signal }),
      (e) => e === reason,
    );
    assert.equal(double.requests.length, 6, 'an aborted signal sends nothing');
  }));

test('bad settings are refused with the setting named', async () => {
  const client: JudgeClient = { name: 'x', complete: async () => '\\boxed{1}' };
  const closed = makeClosedTurn({ next: [{ role: 'user', content: 'hm' }] });
  await assert.rejects(judgeTurn(client, closed, { votes: 0 }), /votes must be an integer >= 1, got 0/);
  await assert.rejects(judgeTurn(client, closed, { timeoutMs: 0 }), /timeoutMs must be > 0/);
  await assert.rejects(
    judgeTurn(client, closed, { hintChoice: { minChars: 50, maxChars: 20, copyThreshold: 0.8, quorum: 'majority' } }),
    /minChars \(50\) must be below maxChars \(20\)/,
  );
  const votes = await judgeTurn(client, closed, { votes: 5 });
  assert.equal(votes.evalVotes.length, 5);
  assert.equal(votes.hintVotes.length, 5, 'hint votes follow votes unless set');
});
