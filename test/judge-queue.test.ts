// JudgeQueue: bounded concurrency and length (offer() says false when full), duplicates, drain,
// close (aborts running turns without reporting them), persistence failures, metrics and logs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JudgeMetrics } from '../src/judge/metrics.js';
import { OpenAIJudgeClient } from '../src/judge/openai-client.js';
import { JudgeQueue } from '../src/judge/queue.js';
import type { CompleteOptions, JudgeClient, JudgedTurn } from '../src/judge/types.js';
import { makeClosedTurn, startJudgeDouble } from './helpers/judge-double.js';

/** A judge that answers only when the test says so; it records how many requests are open. */
class GatedClient implements JudgeClient {
  readonly name = 'gated';
  private open: { resolve(text: string): void; reject(e: unknown): void }[] = [];
  private waiters: { n: number; resolve(): void }[] = [];
  aborted = 0;

  complete(_messages: unknown, opts: CompleteOptions): Promise<string> {
    return new Promise((resolve, reject) => {
      const entry = { resolve, reject };
      this.open.push(entry);
      opts.signal?.addEventListener('abort', () => {
        this.aborted++;
        reject(opts.signal!.reason);
      });
      this.waiters = this.waiters.filter((w) => {
        if (this.open.length < w.n) return true;
        w.resolve();
        return false;
      });
    });
  }

  /** Resolves once n requests are waiting for an answer. */
  pending(n: number): Promise<void> {
    return this.open.length >= n ? Promise.resolve() : new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  answerAll(text: string): number {
    const n = this.open.length;
    for (const e of this.open.splice(0)) e.resolve(text);
    return n;
  }
}

const turn = (id: string) =>
  makeClosedTurn({ id, request: `secret request ${id}`, next: [{ role: 'user', content: 'thanks' }] });

test('bounded: concurrency turns run, maxWaiting wait, the rest are refused; a re-offer is a no-op; drain waits for all', async () => {
  const client = new GatedClient();
  const judged: string[] = [];
  const queue = new JudgeQueue({
    client,
    concurrency: 1,
    maxWaiting: 1,
    judge: { votes: 2, hintVotes: 1 },
    onJudged: (j) => {
      judged.push(j.turnId);
    },
  });
  assert.equal(queue.offer(turn('a')), true);
  assert.equal(queue.offer(turn('b')), true);
  assert.equal(queue.offer(turn('c')), false, 'full: the caller keeps it pending');
  assert.equal(queue.offer(turn('a')), true, 'already running');
  assert.equal(queue.offer(turn('b')), true, 'already waiting');
  assert.deepEqual([queue.running, queue.waiting], [1, 1]);

  await client.pending(3);
  let drained = false;
  const drain = queue.drain().then(() => {
    drained = true;
  });
  assert.equal(client.answerAll('\\boxed{1}'), 3, 'one turn at a time: 2 eval + 1 hint requests');
  await client.pending(3);
  assert.equal(drained, false);
  assert.deepEqual(judged, ['a']);
  assert.equal(queue.offer(turn('c')), true, 'room again');
  client.answerAll('\\boxed{-1}');
  await client.pending(3);
  client.answerAll('\\boxed{0}');
  await drain;
  assert.deepEqual(judged, ['a', 'b', 'c']);
  assert.deepEqual([queue.running, queue.waiting], [0, 0]);
  await queue.drain(); // idle: resolves at once

  const m = queue.metrics.snapshot();
  assert.deepEqual(
    [m['judge/queue/offered'], m['judge/queue/accepted'], m['judge/queue/full'], m['judge/queue/duplicate']],
    [6, 3, 1, 2],
  );
  assert.deepEqual([m['judge/turns'], m['judge/score/+1'], m['judge/score/-1'], m['judge/score/0']], [3, 1, 1, 1]);
  assert.equal(m['judge/eval_votes/ok'], 6);
});

test('close: refuses offers, forgets waiting turns, aborts running ones; none is reported as judged', async () => {
  const client = new GatedClient();
  const judged: JudgedTurn[] = [];
  const queue = new JudgeQueue({
    client,
    concurrency: 2,
    maxWaiting: 5,
    judge: { votes: 1, hintVotes: 0 },
    onJudged: (j) => {
      judged.push(j);
    },
  });
  for (const id of ['a', 'b', 'c']) assert.equal(queue.offer(turn(id)), true);
  await client.pending(2);
  await queue.close();
  assert.equal(client.aborted, 2);
  assert.deepEqual(judged, []);
  assert.equal(queue.offer(turn('d')), false);
  const m = queue.metrics.snapshot();
  assert.deepEqual(
    [m['judge/queue/cancelled'], m['judge/queue/dropped_on_close'], m['judge/queue/closed'], m['judge/turns']],
    [2, 1, 1, 0],
  );
});

test('through the double: persistence failures are counted and logged, and logs carry no conversation text', async () => {
  const double = await startJudgeDouble();
  const lines: { event: string; fields: Record<string, unknown> }[] = [];
  const metrics = new JudgeMetrics();
  let failOnce = true;
  const queue = new JudgeQueue({
    client: new OpenAIJudgeClient({ baseUrl: double.url, model: 'judge' }),
    judge: { timeoutMs: 2_000, retries: 0 },
    metrics,
    log: (event, fields) => lines.push({ event, fields }),
    onJudged: () => {
      if (failOnce) {
        failOnce = false;
        throw new Error('disk full');
      }
    },
  });
  try {
    const script = (s: string) =>
      makeClosedTurn({ request: `secret request ${s}`, next: [{ role: 'user', content: 'private reply' }] });
    queue.offer(
      script('{{eval: 1|1|garbage}} {{hint: hint=Always state the units you used.|hint=State the units.|nohint}}'),
    );
    queue.offer(script('{{eval: 500|1|-1}} {{hint: hint=short|nohint|nohint}}'));
    queue.offer(makeClosedTurn({ next: null }));
    await queue.drain();
    assert.equal(queue.metrics, metrics);
    const m = metrics.snapshot();
    assert.equal(m['judge/turns'], 3);
    assert.equal(m['judge/skipped'], 1);
    assert.deepEqual(
      [m['judge/eval_votes/ok'], m['judge/eval_votes/http'], m['judge/eval_votes/unparseable']],
      [4, 1, 1],
    );
    assert.deepEqual(
      [m['judge/hint_votes/ok'], m['judge/hint/accepted'], m['judge/hint/rejected/too_short']],
      [6, 1, 1],
    );
    assert.equal(m['judge/agreement/mean'], (1 + 0) / 2, 'unanimous among valid votes, then a tie');
    assert.equal(m['judge/agreement/unanimous'], 1);
    assert.deepEqual(
      [m['judge/agreement/split'], m['judge/agreement/none']],
      [1, 0],
      'the tie is split; skipped: none',
    );
    assert.equal(m['judge/queue/persist_failed'], 1);
    assert.equal(m['judge/abstained'], 1, 'the tie; a skipped turn is not counted as judged');
    assert.deepEqual([m['judge/score/+1'], m['judge/score/0']], [1, 1]);

    assert.equal(lines.filter((l) => l.event === 'turn_judged').length, 3);
    const failed = lines.find((l) => l.event === 'judge_persist_failed')!;
    assert.equal(failed.fields.message, 'disk full');
    const judgedLine = lines.find((l) => l.event === 'turn_judged' && l.fields.hint === true)!;
    assert.equal(judgedLine.fields.score, 1);
    assert.equal(judgedLine.fields.hintChars, 'Always state the units you used.'.length);
    const text = JSON.stringify(lines);
    for (const secret of ['secret request', 'private reply', 'Always state'])
      assert.ok(!text.includes(secret), `${secret} leaked into the log`);
  } finally {
    await queue.close();
    await double.close();
  }
});

test('bad queue settings are refused at construction', () => {
  const client = new GatedClient();
  assert.throws(
    () => new JudgeQueue({ client, concurrency: 0, onJudged: () => {} }),
    /concurrency must be an integer >= 1/,
  );
  assert.throws(
    () => new JudgeQueue({ client, maxWaiting: -1, onJudged: () => {} }),
    /maxWaiting must be an integer >= 0/,
  );
  assert.throws(
    () => new JudgeQueue({ client, judge: { votes: 0 }, onJudged: () => {} }),
    /votes must be an integer >= 1/,
  );
});
