// The learning tables against a real SQLite store in a temp folder: judgments commit atomically
// with their votes, sample and `done` mark; the sample queue (stale, order, bit-exact token data,
// batches, reconciliation with a checkpoint); opting out and deleting; migrating 3 -> 1 -> 3.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LATEST_VERSION, migrateDown, migrateUp, schemaVersion } from '../src/store/migrations/index.js';
import type { Store } from '../src/store/store.js';
import { openStore } from '../src/store/store.js';
import { freshDir } from './helpers/gateway.js';
import {
  addClosedTurn,
  claim,
  judgedFixture,
  learnTurn,
  queueSample,
  rlDraft,
  sessionOf,
  stepMetrics,
  tempStore,
} from './helpers/learning-fixtures.js';

function rows(store: Store): Record<'judgments' | 'judge_votes' | 'samples' | 'train_steps', number> {
  const n = (t: string) => (store.db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
  return {
    judgments: n('judgments'),
    judge_votes: n('judge_votes'),
    samples: n('samples'),
    train_steps: n('train_steps'),
  };
}

const step = (s: number, over = {}) => ({ ...stepMetrics(s), rewardMean: 0.5, hints: 1, staleDropped: 0, ...over });

test("recordJudgment commits the judgment, every vote, the sample and the closed turn's done mark together", () => {
  const store = tempStore(() => 7777);
  const t = addClosedTurn(store, learnTurn());
  assert.deepEqual(
    store.claimClosedTurns(10).map((c) => c.turn.id),
    [t.id],
  );
  const j = judgedFixture(t.id);
  const id = store.learning.recordJudgment(
    j,
    rlDraft(t, {
      source: 'opd+rl',
      rlAdvantage: 0.5,
      opdWeight: 2,
      teacherLogprobs: [-0.5, -1, -2],
      teacherVersion: 0,
    }),
  );
  assert.equal(typeof id, 'number');
  assert.deepEqual(rows(store), { judgments: 1, judge_votes: 3, samples: 1, train_steps: 0 });
  assert.equal(store.queueStatus(t.id), 'done');

  const jr = store.db.prepare('SELECT * FROM judgments').get() as Record<string, unknown>;
  assert.deepEqual(jr, {
    turn_id: t.id,
    next_turn_id: `${t.id}_next`,
    judge: 'double',
    skipped: null,
    score: 1,
    agreement: 1,
    hint: 'Say the unit first.',
    hint_vote: 0,
    hint_rejections: '[{"vote":1,"reason":"too_short"}]',
    started_at: 5000,
    finished_at: 5100,
    no_sample: null,
  });
  const votes = store.db
    .prepare('SELECT kind, idx, score, hint, raw, failure, detail, attempts, ms FROM judge_votes ORDER BY kind, idx')
    .all();
  assert.deepEqual(votes, [
    {
      kind: 'eval',
      idx: 0,
      score: 1,
      hint: null,
      raw: 'looks right \\boxed{1}',
      failure: null,
      detail: null,
      attempts: 1,
      ms: 12,
    },
    {
      kind: 'eval',
      idx: 1,
      score: null,
      hint: null,
      raw: '',
      failure: 'timeout',
      detail: 'no answer within 10 ms',
      attempts: 3,
      ms: 31,
    },
    {
      kind: 'hint',
      idx: 0,
      score: 1,
      hint: 'Say the unit first.',
      raw: '\\boxed{1}\n[HINT_START]Say the unit first.[HINT_END]',
      failure: null,
      detail: null,
      attempts: 1,
      ms: 9,
    },
  ]);
  const s = store.learning.sample(id!)!;
  assert.deepEqual(
    { ...s, promptIds: undefined, completionIds: undefined, rolloutLogprobs: undefined },
    {
      id,
      turnId: t.id,
      sessionId: 's1',
      reward: null,
      stepIndex: null,
      source: 'opd+rl',
      policyVersion: 0,
      score: 1,
      rlAdvantage: 0.5,
      opdWeight: 2,
      teacherLogprobs: [-0.5, -1, -2],
      teacherVersion: 0,
      status: 'queued',
      createdAt: 7777,
      promptIds: undefined,
      completionIds: undefined,
      rolloutLogprobs: undefined,
    },
  );
  assert.equal(store.learning.sessionHasSample('s1'), true);
  assert.equal(store.learning.sessionHasSample('other'), false);

  // A judgment without a sample (a skipped turn) still commits with its done mark.
  const t2 = addClosedTurn(store, learnTurn());
  claim(store, t2.id);
  assert.equal(
    store.learning.recordJudgment(
      judgedFixture(t2.id, {
        skipped: 'no_next_state',
        nextTurnId: null,
        evalVotes: [],
        hintVotes: [],
        score: 0,
        agreement: null,
        hint: null,
        hintVote: null,
        hintRejections: [],
      }),
      null,
    ),
    null,
  );
  assert.deepEqual(rows(store), { judgments: 2, judge_votes: 3, samples: 1, train_steps: 0 });
  assert.equal(store.queueStatus(t2.id), 'done');
  assert.deepEqual(store.learning.counts(), {
    judgments: 2,
    skipped: 1,
    samples: { waiting: 0, queued: 1, trained: 0, stale: 0, too_long: 0 },
    tooLongTurns: 0,
    steps: 0,
    closedPending: 0,
    closedClaimed: 0,
  });
  store.close();
});

test('recordJudgment commits nothing when the turn is not claimed, was judged already, or any part is refused', () => {
  const store = tempStore();
  const t = addClosedTurn(store, learnTurn());
  const before = rows(store);
  // pending, not claimed
  assert.throws(() => store.learning.recordJudgment(judgedFixture(t.id), rlDraft(t)), /is not claimed for judging/);
  assert.deepEqual(rows(store), before);
  assert.equal(store.queueStatus(t.id), 'pending');
  // never closed (no queue entry)
  const open = learnTurn();
  store.recordTurn(sessionOf('s1'), open);
  assert.throws(() => store.learning.recordJudgment(judgedFixture(open.id), rlDraft(open)), /is not claimed/);
  assert.deepEqual(rows(store), before);

  claim(store, t.id);
  // a sample of another turn
  assert.throws(
    () => store.learning.recordJudgment(judgedFixture(t.id), rlDraft(open)),
    /sample of turn .* recorded with the judgment of/,
  );
  // a sample the schema refuses (teacher log-probs without their version), after the votes were inserted
  assert.throws(
    () =>
      store.learning.recordJudgment(
        judgedFixture(t.id),
        rlDraft(t, { teacherLogprobs: [-1, -1, -1], teacherVersion: null }),
      ),
    /CHECK constraint failed/,
  );
  // a vote the schema refuses (score 2), after the judgment row was inserted
  const badVote = judgedFixture(t.id);
  badVote.evalVotes = [...badVote.evalVotes, { ...badVote.evalVotes[0]!, score: 2 as 1 }];
  assert.throws(() => store.learning.recordJudgment(badVote, rlDraft(t)), /CHECK constraint failed/);
  assert.deepEqual(rows(store), before);
  assert.equal(store.queueStatus(t.id), 'claimed', 'still claimed: the feed can release it');

  // judged once; a second commit is refused and leaves the first intact
  const id = store.learning.recordJudgment(judgedFixture(t.id), rlDraft(t));
  const after = rows(store);
  assert.deepEqual(after, { judgments: 1, judge_votes: 3, samples: 1, train_steps: 0 });
  claim(store, t.id); // even if it were claimed again, the judgment's primary key refuses a second one
  assert.throws(
    () => store.learning.recordJudgment(judgedFixture(t.id), rlDraft(t)),
    /UNIQUE constraint failed|PRIMARY KEY/,
  );
  assert.deepEqual(rows(store), after);
  assert.equal(store.queueStatus(t.id), 'claimed');
  assert.equal(store.learning.sample(id!)!.status, 'queued');
  store.close();
});

test('releaseClaimedTurn: back to pending, then excluded once claimed maxAttempts times', () => {
  const store = tempStore();
  const t = addClosedTurn(store, learnTurn());
  assert.equal(store.claimClosedTurns(5).length, 1);
  assert.equal(store.learning.releaseClaimedTurn(t.id, 3), 'pending');
  assert.equal(store.queueStatus(t.id), 'pending');
  assert.equal(store.claimClosedTurns(5).length, 1);
  assert.equal(store.learning.releaseClaimedTurn(t.id, 3), 'pending');
  assert.equal(store.claimClosedTurns(5).length, 1);
  assert.equal(store.learning.releaseClaimedTurn(t.id, 3), 'excluded');
  assert.equal(store.queueStatus(t.id), 'excluded');
  assert.deepEqual(store.claimClosedTurns(5), [], 'an excluded turn is not handed out again');

  // Only a claimed entry moves: a done one stays done.
  const d = addClosedTurn(store, learnTurn());
  assert.equal(store.claimClosedTurns(5).length, 1);
  store.learning.recordJudgment(judgedFixture(d.id), null);
  store.learning.releaseClaimedTurn(d.id, 1);
  assert.equal(store.queueStatus(d.id), 'done');
  store.close();
});

test('dropStale marks only queued samples below the version stale, once', () => {
  const store = tempStore();
  const ids = [0, 1, 2, 3].map((v) => queueSample(store, learnTurn({ policyVersion: v })));
  const oldTrained = queueSample(store, learnTurn({ policyVersion: 0 }));
  store.learning.recordBatch([oldTrained], [step(1)], 1, 1);
  assert.equal(store.learning.dropStale(2), 2);
  assert.deepEqual(
    ids.map((id) => store.learning.sample(id)!.status),
    ['stale', 'stale', 'queued', 'queued'],
  );
  assert.equal(store.learning.sample(oldTrained)!.status, 'trained');
  assert.equal(store.learning.dropStale(2), 0);
  assert.equal(store.learning.queuedCount(), 2);
  assert.deepEqual(
    store.learning.queuedSamples(10).map((s) => s.id),
    ids.slice(2),
  );
  assert.deepEqual(store.learning.counts().samples, { waiting: 0, queued: 2, trained: 1, stale: 2, too_long: 0 });
  assert.equal(store.learning.dropStale(0), 0);
  store.close();
});

test("queuedSamples: oldest first by commit order, limited, with the turn's token data bit for bit", () => {
  const store = tempStore();
  const a = learnTurn({
    sessionId: 'sa',
    receivedAt: 9000,
    promptIds: [0, 151935, 2 ** 31 - 1, 7],
    completionIds: [5, 6, 7],
    logprobs: [-0.123456789012345, -1e-300, -Infinity],
    sampledLogprobs: [-1, -2, -3],
  });
  const b = learnTurn({ sessionId: 'sb', receivedAt: 1 });
  const c = learnTurn({ sessionId: 'sa', receivedAt: 5 });
  // Committed b, a, c (not in turn order): the queue follows the commit order.
  const teacher = [-0.1, -5e-324, -0];
  const idB = queueSample(store, b);
  const idA = queueSample(store, a, {
    source: 'opd',
    score: 0,
    rlAdvantage: 0,
    opdWeight: 1.5,
    teacherLogprobs: teacher,
    teacherVersion: 2,
    policyVersion: 4,
  });
  const idC = queueSample(store, c, { score: -1, rlAdvantage: -0.5 });
  assert.ok(idB < idA && idA < idC);
  assert.deepEqual(
    store.learning.queuedSamples(10).map((s) => s.turnId),
    [b.id, a.id, c.id],
  );
  assert.deepEqual(
    store.learning.queuedSamples(2).map((s) => s.id),
    [idB, idA],
  );
  assert.equal(store.learning.queuedCount(), 3);

  const sa = store.learning.queuedSamples(10)[1]!;
  assert.deepEqual(sa.promptIds, a.promptIds);
  assert.deepEqual(sa.completionIds, a.completionIds);
  assert.deepEqual(
    sa.rolloutLogprobs,
    a.logprobs,
    "the sampler's temperature-1 log-probs, not the sampled distribution's",
  );
  assert.deepEqual(sa.teacherLogprobs, teacher);
  assert.ok(Object.is(sa.teacherLogprobs![2], -0), '-0 survives');
  assert.ok(Object.is(sa.teacherLogprobs![1], -5e-324), 'a subnormal survives');
  assert.equal(new Float64Array(sa.rolloutLogprobs)[0], -0.123456789012345);
  assert.deepEqual(
    {
      source: sa.source,
      score: sa.score,
      rlAdvantage: sa.rlAdvantage,
      opdWeight: sa.opdWeight,
      teacherVersion: sa.teacherVersion,
      policyVersion: sa.policyVersion,
      sessionId: sa.sessionId,
    },
    { source: 'opd', score: 0, rlAdvantage: 0, opdWeight: 1.5, teacherVersion: 2, policyVersion: 4, sessionId: 'sa' },
  );
  store.close();
});

test('recordBatch marks the samples trained with the steps; a sample that is not queued fails the whole batch', () => {
  const store = tempStore(() => 4242);
  const [s1, s2, s3, s4] = [1, 2, 3, 4].map(() => queueSample(store, learnTurn())) as [number, number, number, number];
  const waiting = learnTurn();
  addClosedTurn(store, waiting); // closed, not judged yet
  assert.deepEqual(store.learning.recordBatch([s1, s2], [step(1, { staleDropped: 3 }), step(2)], 1, 5), {
    samplesQueued: 2,
    turnsWaiting: 1,
  });
  assert.deepEqual(
    store.db.prepare('SELECT step, samples_queued, turns_waiting FROM train_steps ORDER BY step').all(),
    [
      { step: 1, samples_queued: 2, turns_waiting: 1 },
      { step: 2, samples_queued: 2, turns_waiting: 1 },
    ],
    'the queues the batch left behind, on each of its steps',
  );
  assert.deepEqual(store.db.prepare('SELECT id, status, trained_step, trained_at FROM samples ORDER BY id').all(), [
    { id: s1, status: 'trained', trained_step: 2, trained_at: 4242 },
    { id: s2, status: 'trained', trained_step: 2, trained_at: 4242 },
    { id: s3, status: 'queued', trained_step: null, trained_at: null },
    { id: s4, status: 'queued', trained_step: null, trained_at: null },
  ]);
  const steps = store.learning.steps();
  assert.deepEqual(steps, [
    { ...step(1, { staleDropped: 3 }), batch: 1, version: 5 },
    { ...step(2), batch: 1, version: 5 },
  ]);
  assert.equal(store.learning.lastBatch(), 1);
  assert.deepEqual(
    store.learning.steps(1).map((s) => s.step),
    [2],
    'the newest',
  );

  const before = { rows: rows(store), samples: store.db.prepare('SELECT * FROM samples ORDER BY id').all() };
  // s3 is queued, s1 is trained: nothing of this batch may land.
  assert.throws(() => store.learning.recordBatch([s3, s1], [step(3)], 2, 6), new RegExp(`sample ${s1} is not queued`));
  assert.throws(() => store.learning.recordBatch([s3, 99_999], [step(3)], 2, 6), /sample 99999 is not queued/);
  assert.throws(
    () => store.learning.recordBatch([s3, s4], [step(2)], 2, 6),
    /UNIQUE constraint failed|PRIMARY KEY/,
    'a step number used before',
  );
  assert.throws(() => store.learning.recordBatch([s3], [], 2, 6), /at least one step/);
  assert.deepEqual({ rows: rows(store), samples: store.db.prepare('SELECT * FROM samples ORDER BY id').all() }, before);
  assert.equal(store.learning.queuedCount(), 2);
  assert.deepEqual(store.learning.recordBatch([s3, s4], [step(3)], 2, 6), { samplesQueued: 0, turnsWaiting: 1 });
  assert.equal(store.learning.queuedCount(), 0);
  assert.equal(store.learning.lastBatch(), 2);
  store.close();
});

test("reconcileWithCheckpoint requeues samples trained after the checkpoint's step and deletes their step rows", () => {
  const store = tempStore();
  const ids = [1, 2, 3, 4, 5, 6].map(() => queueSample(store, learnTurn()));
  store.learning.recordBatch(ids.slice(0, 2), [step(1), step(2)], 1, 1);
  store.learning.recordBatch(ids.slice(2, 4), [step(3)], 2, 2);
  store.learning.recordBatch(ids.slice(4, 6), [step(4), step(5)], 3, 3);
  assert.equal(store.learning.reconcileWithCheckpoint(5), 0, 'the checkpoint has everything');
  assert.equal(store.learning.steps().length, 5);

  assert.equal(store.learning.reconcileWithCheckpoint(2), 4);
  assert.deepEqual(
    store.learning.steps().map((s) => s.step),
    [1, 2],
  );
  assert.equal(store.learning.lastBatch(), 1);
  assert.deepEqual(
    ids.map((id) => store.learning.sample(id)!.status),
    ['trained', 'trained', 'queued', 'queued', 'queued', 'queued'],
  );
  assert.deepEqual(
    store.db
      .prepare(
        `SELECT count(*) AS n FROM samples WHERE status = 'queued' AND (trained_step IS NOT NULL OR trained_at IS NOT NULL)`,
      )
      .get(),
    { n: 0 },
  );
  assert.deepEqual(
    store.learning.queuedSamples(10).map((s) => s.id),
    ids.slice(2),
    'requeued in their original order',
  );
  // The requeued samples can be trained again as new steps.
  store.learning.recordBatch(ids.slice(2, 4), [step(3)], 2, 4);
  assert.equal(store.learning.sampleOfTurn(store.learning.sample(ids[2]!)!.turnId)!.trainedStep, 3);

  assert.equal(store.learning.reconcileWithCheckpoint(0), 4, 'a checkpoint of nothing: everything trained returns');
  assert.equal(store.learning.steps().length, 0);
  assert.equal(store.learning.queuedCount(), 6);
  store.close();
});

test('maxVersion is the highest version of any turn or step', () => {
  const store = tempStore();
  assert.equal(store.learning.maxVersion(), 0);
  const id = queueSample(store, learnTurn({ policyVersion: 3 }));
  store.recordTurn(sessionOf('s1'), learnTurn({ policyVersion: 2 }));
  assert.equal(store.learning.maxVersion(), 3);
  store.learning.recordBatch([id], [step(1)], 1, 7);
  assert.equal(store.learning.maxVersion(), 7);
  store.recordTurn(sessionOf('s1'), learnTurn({ policyVersion: 9 }));
  assert.equal(store.learning.maxVersion(), 9);
  store.close();
});

test("a session opting out of learning deletes its queued samples, not its trained ones nor other sessions'", () => {
  const store = tempStore();
  const trained = queueSample(store, learnTurn({ sessionId: 'out' }));
  store.learning.recordBatch([trained], [step(1)], 1, 1);
  const queued = queueSample(store, learnTurn({ sessionId: 'out' }));
  const stale = queueSample(store, learnTurn({ sessionId: 'out' }));
  store.db.prepare(`UPDATE samples SET status = 'stale' WHERE id = ?`).run(stale);
  const other = queueSample(store, learnTurn({ sessionId: 'in' }));
  const pending = addClosedTurn(store, learnTurn({ sessionId: 'out' }));

  store.recordTurn(sessionOf('out', false), null);
  assert.equal(store.learning.sample(queued), undefined);
  assert.equal(store.learning.sample(trained)!.status, 'trained');
  assert.equal(store.learning.sample(stale)!.status, 'stale');
  assert.equal(store.learning.sample(other)!.status, 'queued');
  assert.equal(store.queueStatus(pending.id), 'excluded');
  assert.deepEqual(
    store.learning.queuedSamples(10).map((s) => s.id),
    [other],
  );
  store.close();
});

test('deleting a session removes its judgments, votes and samples; other sessions and the steps stay', () => {
  const store = tempStore();
  const gone = [learnTurn({ sessionId: 'gone' }), learnTurn({ sessionId: 'gone' })];
  const g1 = queueSample(store, gone[0]!);
  queueSample(store, gone[1]!);
  const kept = queueSample(store, learnTurn({ sessionId: 'kept' }));
  store.learning.recordBatch([g1, kept], [step(1)], 1, 1);
  assert.deepEqual(rows(store), { judgments: 3, judge_votes: 9, samples: 3, train_steps: 1 });

  assert.equal(store.deleteSession('gone'), 2);
  assert.deepEqual(rows(store), { judgments: 1, judge_votes: 3, samples: 1, train_steps: 1 });
  for (const t of gone) {
    assert.equal(store.learning.sampleOfTurn(t.id), undefined);
    assert.deepEqual(store.db.prepare('SELECT count(*) AS n FROM judge_votes WHERE turn_id = ?').get(t.id), { n: 0 });
    assert.deepEqual(store.db.prepare('SELECT count(*) AS n FROM judgments WHERE turn_id = ?').get(t.id), { n: 0 });
  }
  assert.equal(store.learning.sample(kept)!.status, 'trained');
  assert.equal(store.learning.sessionHasSample('gone'), false);
  store.close();
});

test('migrating down to 1 drops only the learning, turn payload, feedback, batch hold and versions tables; up again restores them empty and usable', () => {
  assert.equal(LATEST_VERSION, 9);
  const dir = freshDir('learn-migrate-');
  const store = openStore({ dir });
  const t = learnTurn();
  queueSample(store, t);
  const tables = () =>
    (
      store.db
        .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
        .all() as { name: string }[]
    ).map((r) => r.name);
  const all = tables();
  for (const name of ['judgments', 'judge_votes', 'samples', 'train_steps', 'turn_payloads'])
    assert.ok(all.includes(name), name);

  migrateDown(store.db, 1);
  assert.equal(schemaVersion(store.db), 1);
  assert.deepEqual(
    tables(),
    all.filter(
      (n) =>
        ![
          'batch_holds',
          'judgments',
          'judge_votes',
          'samples',
          'train_steps',
          'turn_payloads',
          'feedback',
          'policy_versions',
          'rollback_requests',
        ].includes(n),
    ),
  );
  assert.deepEqual(
    store.db.prepare('SELECT id, messages FROM turns').all(),
    [{ id: t.id, messages: JSON.stringify(t.messages) }],
    'schema-1 data untouched',
  );
  assert.equal(store.queueStatus(t.id), 'done');

  assert.deepEqual(migrateUp(store.db, dir), [2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(schemaVersion(store.db), 9);
  assert.deepEqual(tables(), all);
  assert.deepEqual(store.getTurn(t.id)!.turn, t);
  assert.deepEqual(rows(store), { judgments: 0, judge_votes: 0, samples: 0, train_steps: 0 });
  assert.deepEqual(
    store.db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'samples_by_status'").all(),
    [{ name: 'samples_by_status' }],
  );
  const again = queueSample(store, learnTurn());
  assert.equal(again, 1, "sample ids start again at 1 (the dropped table's sequence went with it)");
  store.close();
  // A reopen after the round trip migrates nothing.
  const reopened = openStore({ dir });
  assert.deepEqual(migrateUp(reopened.db, dir), []);
  assert.equal(reopened.learning.queuedCount(), 1);
  reopened.close();
});

test('dropTooLong marks queued samples whose turn exceeds the bound too_long, once; trained ones stay', () => {
  const store = tempStore();
  const turns = [4, 9, 12, 20].map((n) => learnTurn({ promptIds: Array.from({ length: n }, (_, i) => i + 1) })); // + 3 completion tokens
  const ids = turns.map((t) => queueSample(store, t));
  store.learning.recordBatch([ids[3]!], [{ ...stepMetrics(1), rewardMean: 0, hints: 0, staleDropped: 0 }], 1, 1);
  assert.equal(store.learning.dropTooLong(12), 1, 'only the 15-token queued sample');
  assert.deepEqual(
    ids.map((id) => store.learning.sample(id)!.status),
    ['queued', 'queued', 'too_long', 'trained'],
  );
  assert.equal(store.learning.dropTooLong(12), 0);
  assert.deepEqual(store.learning.counts().samples, { waiting: 0, queued: 2, trained: 1, stale: 0, too_long: 1 });
  store.close();
});

test('recordJudgment keeps why a judged turn has no sample, and refuses a reason next to a sample', () => {
  const store = tempStore();
  const [a, b] = [addClosedTurn(store, learnTurn()), addClosedTurn(store, learnTurn())];
  store.claimClosedTurns(10);
  assert.equal(store.learning.recordJudgment(judgedFixture(a.id), null, 'too_long'), null);
  assert.throws(
    () => store.learning.recordJudgment(judgedFixture(b.id), rlDraft(b), 'abstained'),
    /no no-sample reason/,
  );
  assert.equal(store.queueStatus(b.id), 'claimed', 'nothing of the refused judgment was written');
  assert.deepEqual(store.db.prepare('SELECT turn_id, no_sample FROM judgments').all(), [
    { turn_id: a.id, no_sample: 'too_long' },
  ]);
  assert.equal(store.learning.counts().tooLongTurns, 1);
  store.close();
});

test('migration 5 keeps every sample row and the id counter; down maps too_long to stale', () => {
  const dir = freshDir('learn-migrate5-');
  const store = openStore({ dir });
  const ids = [learnTurn(), learnTurn(), learnTurn()].map((t) => queueSample(store, t));
  store.db.prepare('DELETE FROM samples WHERE id = ?').run(ids[2]); // the counter must not hand id 3 out again
  migrateDown(store.db, 4);
  const before = store.db.prepare('SELECT * FROM samples ORDER BY id').all();
  assert.throws(
    () => store.db.prepare(`UPDATE samples SET status = 'too_long' WHERE id = ?`).run(ids[0]),
    /CHECK constraint/,
  );
  assert.deepEqual(migrateUp(store.db, dir), [5, 6, 7, 8, 9]);
  // Schema 7's reward and step index are NULL on every sample made before it.
  const after = store.db.prepare('SELECT * FROM samples ORDER BY id').all() as Record<string, unknown>[];
  assert.deepEqual(
    after.map(({ reward, step_index, ...row }) => {
      assert.equal(reward, null);
      assert.equal(step_index, null);
      return row;
    }),
    before,
  );
  store.db.prepare(`UPDATE samples SET status = 'too_long' WHERE id = ?`).run(ids[0]);
  assert.equal(queueSample(store, learnTurn()), ids[2]! + 1);
  assert.deepEqual(store.db.pragma('foreign_key_check'), []);
  migrateDown(store.db, 4);
  assert.equal(
    (store.db.prepare('SELECT status FROM samples WHERE id = ?').get(ids[0]) as { status: string }).status,
    'stale',
  );
  store.close();
});
