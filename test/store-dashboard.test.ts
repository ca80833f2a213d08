// The dashboard's queries (src/store/dashboard-steps.ts, dashboard-sessions.ts) on a real store: steps
// carry the judge's figures of the turns judged since the step before, paging by step keeps them,
// sessions come most recent first, and a session's turns carry no conversation text unless asked for.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { recentSessions, sessionView } from '../src/store/dashboard-sessions.js';
import { stepHistory } from '../src/store/dashboard-steps.js';
import { learnTurn, queueSample, sessionOf, stepMetrics, tempStore } from './helpers/learning-fixtures.js';

const step = (n: number) => ({ ...stepMetrics(n), rewardMean: 0.5, hints: 1, staleDropped: 0 });

test('steps carry the agreement and hints of the turns judged since the previous step', () => {
  let clock = 1000;
  const store = tempStore(() => clock);
  const s1 = queueSample(store, learnTurn(), {}, { finishedAt: 5100, agreement: 1 });
  const s2 = queueSample(
    store,
    learnTurn(),
    {},
    { finishedAt: 5200, agreement: 0.5, hint: null, hintVote: null, hintRejections: [] },
  );
  clock = 6000;
  store.learning.recordBatch([s1, s2], [step(1)], 1, 1);
  const s3 = queueSample(store, learnTurn(), {}, { finishedAt: 7000, agreement: 2 / 3 });
  queueSample(store, learnTurn(), {}, { finishedAt: 7500, skipped: 'no_next_state' });
  clock = 8000;
  store.learning.recordBatch([s3], [step(2), step(3)], 2, 2);
  queueSample(store, learnTurn(), {}, { finishedAt: 9000 });

  const all = stepHistory(store.db, 0, 10);
  assert.deepEqual(
    all.map((s) => [s.step, s.version, s.at, s.judged, s.agreementMean, s.hintsAccepted, s.hintsRejected]),
    [
      [1, 1, 6000, 2, 0.75, 1, 1],
      [2, 2, 8000, 1, 2 / 3, 1, 1],
      [3, 2, 8000, 0, null, 0, 0],
    ],
  );
  assert.equal(all[0]!.samplesQueued, 0);
  assert.equal(all[0]!.rewardMean, 0.5);
  assert.deepEqual(stepHistory(store.db, 1, 10), all.slice(1), 'paging keeps the figures');
  assert.deepEqual(stepHistory(store.db, 1, 1), all.slice(1, 2));
  assert.deepEqual(stepHistory(store.db, 3, 10), []);
  store.close();
});

test("a session's turns: verdicts, votes, samples; conversation text only when asked for", () => {
  const store = tempStore();
  const hinted = learnTurn({ sessionId: 'older', logprobs: [-1, -2, -3] });
  queueSample(store, hinted, { source: 'opd+rl', teacherLogprobs: [-0.5, -2, -2.5], teacherVersion: 0 });
  const newer = learnTurn({ sessionId: 'newer' });
  store.recordTurn({ ...sessionOf('newer'), seenAt: 9000 }, newer);

  assert.deepEqual(
    recentSessions(store.db, 10).sessions.map((s) => [s.id, s.turns, s.judged, s.samples, s.scoreMean]),
    [
      ['newer', 1, 0, 0, null],
      ['older', 1, 1, 1, 1],
    ],
  );
  assert.equal(recentSessions(store.db, 1).sessions.length, 1);

  const bare = sessionView(store.db, 'older', false)!;
  const turn = bare.turns[0]!;
  assert.equal(bare.text, false);
  assert.deepEqual(turn.verdict && [turn.verdict.score, turn.verdict.hintAccepted, turn.verdict.hintRejections], [
    1,
    true,
    1,
  ]);
  assert.deepEqual(
    turn.verdict!.votes.map((v) => [v.kind, v.score, v.failure]),
    [
      ['eval', 1, null],
      ['eval', null, 'timeout'],
      ['hint', 1, null],
    ],
  );
  assert.equal(turn.sample!.rlAdvantage, 1);
  assert.ok(Math.abs(turn.sample!.opdAdvantageMean! - 1 / 3) < 1e-12, String(turn.sample!.opdAdvantageMean));
  const json = JSON.stringify(bare);
  const texts = ['question', 'answer', 'Be brief', 'Say the unit first', 'looks right', 'thanks', 'no answer within'];
  for (const text of texts) assert.ok(!json.includes(text), `${text} without text`);

  const full = sessionView(store.db, 'older', true)!;
  assert.deepEqual(full.turns[0]!.text, {
    input: [{ role: 'user', content: hinted.messages[1]!.content }],
    response: hinted.response,
    nextState: [{ role: 'user', content: 'thanks' }],
  });
  assert.equal(full.turns[0]!.verdict!.hint, 'Say the unit first.');
  assert.ok(JSON.stringify(full).includes('looks right'));
  assert.equal(sessionView(store.db, 'missing', false), null);
  store.close();
});

test('sessions page by keyset: ties on the activity time by id, every session once, the last page says so', () => {
  const store = tempStore();
  const times = [5000, 3000, 3000, 3000, 1000];
  times.forEach((seenAt, i) => store.recordTurn({ ...sessionOf(`s${i}`), seenAt }, learnTurn({ sessionId: `s${i}` })));
  const seen: string[] = [];
  let after = null;
  for (let pages = 0; ; pages++) {
    const page: ReturnType<typeof recentSessions> = recentSessions(store.db, 2, after);
    assert.ok(page.sessions.length <= 2);
    seen.push(...page.sessions.map((s) => s.id));
    if (!page.next) break;
    after = page.next;
    assert.ok(pages < 5, 'paging ends');
  }
  assert.deepEqual(seen, ['s0', 's1', 's2', 's3', 's4']);
  // A page that ends exactly at the last session has no next page.
  assert.equal(recentSessions(store.db, 5).next, null);
  assert.deepEqual(recentSessions(store.db, 4).next, { lastSeenAt: 3000, id: 's3' });
  store.close();
});
