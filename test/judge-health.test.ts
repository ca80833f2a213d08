// Judge health: a judge whose recent votes mostly fail is said to be failing (status, progress
// line, one log event), and recovering is said too. judgeHealth is pure; the queue test drives
// real judgeTurn calls through a client double whose answers the test picks.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { HEALTH_MIN_VOTES, HEALTH_WINDOW, judgeHealth, type VoteOutcome } from '../src/judge/health.js';
import { JudgeQueue } from '../src/judge/queue.js';
import type { JudgeClient } from '../src/judge/types.js';
import { makeClosedTurn } from './helpers/judge-double.js';

const outcomes = (failed: number, ok: number, reason: VoteOutcome = 'unparseable'): VoteOutcome[] => [
  ...Array<VoteOutcome>(failed).fill(reason),
  ...Array<VoteOutcome>(ok).fill('ok'),
];

test('judgeHealth: unknown below the minimum, failing from half the window, reasons counted and named', () => {
  assert.equal(judgeHealth(outcomes(HEALTH_MIN_VOTES - 1, 0)).state, 'unknown');
  assert.equal(judgeHealth(outcomes(5, 5)).state, 'failing', 'half failed');
  assert.equal(judgeHealth(outcomes(4, 6)).state, 'ok');
  const mixed = judgeHealth([...outcomes(6, 0, 'timeout'), ...outcomes(3, 1, 'http')]);
  assert.deepEqual(
    [mixed.state, mixed.votes, mixed.failed, mixed.reasons],
    ['failing', 10, 9, { timeout: 6, http: 3 }],
  );
  assert.equal(mixed.summary, '9 of 10 recent judge votes failed (timeout 6, http 3)');
  assert.equal(judgeHealth(outcomes(0, 20)).summary, null);
  // Only the window counts: old failures age out.
  const recovered = judgeHealth([...outcomes(200, 0), ...outcomes(0, HEALTH_WINDOW)]);
  assert.deepEqual([recovered.state, recovered.votes, recovered.failed], ['ok', HEALTH_WINDOW, 0]);
});

/** A judge client double that answers every request with the text the test sets. */
class ScriptedJudgeDouble implements JudgeClient {
  readonly name = 'scripted';
  answer = 'I cannot tell.';
  complete(): Promise<string> {
    return Promise.resolve(this.answer);
  }
}

test('queue: a judge that never gives a verdict is reported failing once, in the log and the health; recovery is logged', async () => {
  const client = new ScriptedJudgeDouble();
  const events: { event: string; fields: Record<string, unknown> }[] = [];
  const queue = new JudgeQueue({
    client,
    judge: { votes: 1, hintVotes: 1, retries: 0 },
    onJudged: () => {},
    log: (event, fields) => events.push({ event, fields }),
  });
  const judgeAll = async (from: number, n: number) => {
    for (let i = from; i < from + n; i++) {
      queue.offer(makeClosedTurn({ id: `t${i}`, request: 'q', next: [{ role: 'user', content: 'thanks' }] }));
    }
    await queue.drain();
  };
  await judgeAll(0, 4);
  assert.equal(queue.metrics.health().state, 'unknown', '8 votes: too few to say');
  await judgeAll(4, 20);
  const health = queue.metrics.health();
  assert.equal(health.state, 'failing');
  assert.equal(health.reasons.unparseable, health.votes);
  const unhealthy = events.filter((e) => e.event === 'judge_unhealthy');
  assert.equal(unhealthy.length, 1, 'said once, not on every turn');
  assert.match(String(unhealthy[0]!.fields.message), /recent judge votes failed \(unparseable \d+\)/);

  client.answer = 'Looks right. \\boxed{1}';
  await judgeAll(24, HEALTH_WINDOW);
  assert.equal(queue.metrics.health().state, 'ok');
  assert.equal(events.filter((e) => e.event === 'judge_recovered').length, 1);
});
