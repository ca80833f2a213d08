// The background Trainer with a TEST DOUBLE PolicyBackend over a real store (batches, stale
// samples, publication, step rows, checkpoints, failures, no sample trained twice), the
// TrainingSample it builds, and the JudgingFeed with a TEST DOUBLE judge client and teacher.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentToText, type ChatMessage } from '../src/chat/messages.js';
import type { ScoredCompletion, Scorer } from '../src/engine/types.js';
import type { CompleteOptions, JudgeClient } from '../src/judge/types.js';
import { resolveLearnConfig, type LearnConfig } from '../src/learn/config.js';
import { JudgingFeed } from '../src/learn/judging.js';
import type { TeacherModel } from '../src/learn/teacher.js';
import { Trainer, trainingSampleOf } from '../src/learn/trainer.js';
import type { Store } from '../src/store/store.js';
import type { Sample, Turn } from '../src/types.js';
import {
  learnTurn,
  LogRecorder,
  PolicyBackendDouble,
  queueSample,
  sessionOf,
  tempStore,
} from './helpers/learning-fixtures.js';

function trainerSetup(over: Partial<LearnConfig> = {}, backend = new PolicyBackendDouble()) {
  const store = tempStore();
  const config = resolveLearnConfig({ batchSize: 2, maxStaleVersions: 4, checkpointEvery: 1, pollMs: 60_000, ...over });
  const log = new LogRecorder();
  const trainer = new Trainer(store.learning, backend, config, log.log);
  return { store, config, log, trainer, backend };
}

/** The distinct first completion id identifies a fixture turn in what trainBatch received. */
const tag = (t: { completionIds: readonly number[] }) => t.completionIds[0]!;

test('trainer: no batch until batchSize fresh samples are queued', async () => {
  const { store, trainer, backend } = trainerSetup({ batchSize: 3 });
  assert.equal(await trainer.trainOnce(), false, 'empty');
  queueSample(store, learnTurn());
  queueSample(store, learnTurn());
  assert.equal(await trainer.trainOnce(), false, '2 of 3');
  assert.deepEqual(backend.calls, []);
  assert.equal(trainer.state, 'waiting');
  queueSample(store, learnTurn());
  assert.equal(await trainer.trainOnce(), true);
  assert.deepEqual(backend.calls, ['train', 'publish', 'checkpoint']);
  assert.equal(backend.batches[0]!.length, 3);
  store.close();
});

test('trainer: a batch trains the oldest samples, publishes, then records steps with the published version, then checkpoints every N batches', async () => {
  const backend = new PolicyBackendDouble(0, 2);
  const { store, trainer, log } = trainerSetup({ batchSize: 2, checkpointEvery: 2 }, backend);
  const turns = [1, 2, 3, 4, 5].map(() => learnTurn());
  const ids = turns.map((t, i) =>
    queueSample(
      store,
      t,
      i === 1
        ? {
            source: 'opd+rl',
            score: -1,
            rlAdvantage: -1,
            opdWeight: 1,
            teacherLogprobs: [-1, -2, -3],
            teacherVersion: 0,
          }
        : {},
    ),
  );
  const seen: Record<string, unknown>[] = [];
  backend.onCall = (call) =>
    seen.push({ call, queued: store.learning.queuedCount(), steps: store.learning.steps().length });

  assert.equal(await trainer.trainOnce(), true);
  assert.deepEqual(backend.batches[0]!.map(tag), turns.slice(0, 2).map(tag), 'the two oldest');
  assert.deepEqual(backend.calls, ['train', 'publish'], 'batch 1: no checkpoint (every 2)');
  assert.deepEqual(
    seen,
    [
      { call: 'train', queued: 5, steps: 0 },
      { call: 'publish', queued: 5, steps: 0 },
    ],
    'the store is written after the publication',
  );
  assert.deepEqual(
    store.learning.steps().map((s) => [s.step, s.batch, s.version, s.rewardMean, s.hints, s.staleDropped]),
    [
      [1, 1, 1, 0, 1, 0],
      [2, 1, 1, 0, 1, 0],
    ],
  );
  assert.deepEqual(
    ids.map((id) => store.learning.sample(id)!.status),
    ['trained', 'trained', 'queued', 'queued', 'queued'],
  );
  assert.equal(store.learning.sampleOfTurn(turns[0]!.id)!.trainedStep, 2, "marked with the batch's last step");
  assert.deepEqual(
    { ...trainer.lastBatch, steps: trainer.lastBatch!.steps.length, publishMs: typeof trainer.lastBatch!.publishMs },
    { batch: 1, version: 1, steps: 2, publishMs: 'number', checkpointMs: null },
  );

  assert.equal(await trainer.trainOnce(), true);
  assert.deepEqual(backend.batches[1]!.map(tag), turns.slice(2, 4).map(tag));
  assert.deepEqual(backend.calls, ['train', 'publish', 'train', 'publish', 'checkpoint']);
  assert.deepEqual(
    seen.at(-1),
    { call: 'checkpoint', queued: 1, steps: 4 },
    'the checkpoint comes after the store commit',
  );
  assert.deepEqual(
    store.learning.steps().map((s) => [s.step, s.batch, s.version]),
    [
      [1, 1, 1],
      [2, 1, 1],
      [3, 2, 2],
      [4, 2, 2],
    ],
  );
  assert.equal(store.learning.lastBatch(), 2);
  assert.equal(typeof trainer.lastBatch!.checkpointMs, 'number');

  assert.equal(await trainer.trainOnce(), false, 'one left');
  const trained = log.named('batch_trained');
  assert.equal(trained.length, 2);
  assert.deepEqual(
    {
      batch: trained[0]!.batch,
      step: trained[0]!.step,
      version: trained[0]!.version,
      samples: trained[0]!.samples,
      sources: trained[0]!.sources,
      hints: trained[0]!.hints,
    },
    { batch: 1, step: 2, version: 1, samples: 2, sources: { rl: 1, 'opd+rl': 1 }, hints: 1 },
  );
  store.close();
});

test('trainer: batch numbers continue from the store, and checkpoints follow them (a restarted trainer)', async () => {
  const { store, trainer, backend } = trainerSetup({ batchSize: 1, checkpointEvery: 3 });
  for (let i = 0; i < 4; i++) queueSample(store, learnTurn());
  // A previous run trained batches 1 and 2.
  store.learning.recordBatch([1], [{ ...backendStep(1) }], 1, 1);
  store.learning.recordBatch([2], [{ ...backendStep(2) }], 2, 2);
  backend.step = 2;
  backend.version = 2;
  assert.equal(await trainer.trainOnce(), true);
  assert.deepEqual(backend.calls, ['train', 'publish', 'checkpoint'], 'batch 3 of every 3');
  assert.equal(trainer.lastBatch!.batch, 3);
  assert.equal(await trainer.trainOnce(), true);
  assert.deepEqual(backend.calls.slice(3), ['train', 'publish']);
  store.close();
});

function backendStep(step: number) {
  return {
    step,
    samples: 1,
    tokens: 3,
    loss: 0,
    gradNorm: 0,
    applied: true,
    lr: 0,
    clipFraction: 0,
    approxKl: 0,
    entropy: 0,
    tisMean: 1,
    rolloutAbsDiff: 0,
    seconds: 0,
    tokensPerSecond: 0,
    yieldedMs: 0,
    rewardMean: 0,
    hints: 0,
    staleDropped: 0,
  };
}

test('trainer: samples older than serving - maxStaleVersions are dropped before a batch and counted', async () => {
  const backend = new PolicyBackendDouble(5, 2);
  const { store, trainer, log } = trainerSetup({ batchSize: 3, maxStaleVersions: 2 }, backend);
  const versions = [1, 3, 2, 5, 4, 2];
  const turns = versions.map((v) => learnTurn({ policyVersion: v }));
  const ids = turns.map((t) => queueSample(store, t));
  assert.equal(await trainer.trainOnce(), true);
  assert.equal(trainer.staleDropped, 3);
  assert.deepEqual(log.named('samples_stale'), [{ dropped: 3, minVersion: 3 }]);
  assert.deepEqual(
    ids.map((id) => store.learning.sample(id)!.status),
    ['stale', 'trained', 'stale', 'trained', 'trained', 'stale'],
  );
  assert.deepEqual(
    backend.batches[0]!.map(tag),
    [turns[1]!, turns[3]!, turns[4]!].map(tag),
    'only fresh samples, oldest first',
  );
  assert.deepEqual(
    store.learning.steps().map((s) => s.staleDropped),
    [3, 0],
    "counted once, on the batch's first step",
  );
  assert.deepEqual(store.learning.counts().samples, { waiting: 0, queued: 0, trained: 3, stale: 3, too_long: 0 });

  // Dropping can leave too few: no batch, but the drop is still counted.
  queueSample(store, learnTurn({ policyVersion: 6 }));
  queueSample(store, learnTurn({ policyVersion: 1 }));
  assert.equal(await trainer.trainOnce(), false);
  assert.equal(trainer.staleDropped, 4);
  assert.equal(store.learning.queuedCount(), 1);
  store.close();
});

test('trainer: maxStaleVersions 0 keeps only samples of the serving version', async () => {
  const backend = new PolicyBackendDouble(2);
  const { store, trainer } = trainerSetup({ batchSize: 1, maxStaleVersions: 0 }, backend);
  const ids = [1, 2].map((v) => queueSample(store, learnTurn({ policyVersion: v })));
  assert.equal(await trainer.trainOnce(), true);
  assert.deepEqual(
    ids.map((id) => store.learning.sample(id)!.status),
    ['stale', 'trained'],
  );
  store.close();
});

async function failingRun(which: 'train' | 'publish') {
  const backend = new PolicyBackendDouble();
  const setup = trainerSetup({ batchSize: 2, pollMs: 1 }, backend);
  const { store, trainer, log } = setup;
  if (which === 'train') backend.failTrain = new Error('learner worker exited');
  else backend.failPublish = new Error('sampler refused the update');
  const ids = [1, 2].map(() => queueSample(store, learnTurn()));
  const failed = log.next('trainer_failed');
  trainer.start();
  const fields = await failed;
  assert.equal(trainer.state, 'failed');
  assert.equal(trainer.error, which === 'train' ? 'learner worker exited' : 'sampler refused the update');
  assert.deepEqual(fields, { message: trainer.error });
  assert.deepEqual(
    ids.map((id) => store.learning.sample(id)!.status),
    ['queued', 'queued'],
    'nothing recorded as trained',
  );
  assert.equal(store.learning.steps().length, 0);
  assert.equal(backend.calls.includes('checkpoint'), false);
  assert.equal(trainer.lastBatch, null);

  // The loop has ended: its promise settles before any timer could fire.
  const running = (trainer as unknown as { running: Promise<void> }).running;
  assert.equal(
    await Promise.race([running.then(() => 'ended'), new Promise((r) => setImmediate(() => r('running')))]),
    'ended',
  );
  // More samples and a notification (and 20 poll periods) train nothing more, even with the backend healthy again.
  backend.failTrain = null;
  backend.failPublish = null;
  for (let i = 0; i < 4; i++) queueSample(store, learnTurn());
  trainer.notify();
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(backend.batches.length, 1);
  assert.equal(trainer.state, 'failed');
  await trainer.close();
  assert.equal(trainer.state, 'failed', 'close keeps the failure visible');
  assert.equal(store.learning.queuedCount(), 6);
  store.close();
}

test('trainer: a failing trainBatch stops learning with the error; nothing more is trained', () => failingRun('train'));
test('trainer: a failing publish stops learning with the error; nothing is recorded', () => failingRun('publish'));

test('trainer: many batches in the background, samples arriving meanwhile: each sample is trained exactly once, in order', async () => {
  const backend = new PolicyBackendDouble(0, 1);
  const { store, trainer, config } = trainerSetup({ batchSize: 3, pollMs: 20 }, backend);
  // Yield inside trainBatch so samples arrive while a batch trains.
  backend.onCall = (call) => {
    if (call === 'train') backend.gate = new Promise((r) => setImmediate(r));
  };
  trainer.start();
  const turns: Turn[] = [];
  for (let i = 0; i < 30; i++) {
    const t = learnTurn({ policyVersion: backend.version }); // sampled by the version serving now, as the gateway does
    turns.push(t);
    queueSample(store, t);
    trainer.notify();
    if (i % 2 === 0) await new Promise((r) => setImmediate(r));
  }
  await backend.publishedAtLeast(10);
  await trainer.close();
  assert.equal(trainer.state, 'closed');
  assert.equal(backend.batches.length, 10);
  const trained = backend.batches.flat().map(tag);
  assert.equal(new Set(trained).size, trained.length, 'no sample passed twice');
  assert.deepEqual(trained, turns.map(tag), 'every sample, oldest first');
  assert.ok(backend.batches.every((b) => b.length === config.batchSize));
  assert.deepEqual(store.learning.counts().samples, { waiting: 0, queued: 0, trained: 30, stale: 0, too_long: 0 });
  assert.deepEqual(
    store.learning.steps().map((s) => s.version),
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
  );
  assert.deepEqual(
    store.db
      .prepare('SELECT trained_step AS s, count(*) AS n FROM samples GROUP BY trained_step ORDER BY trained_step')
      .all(),
    Array.from({ length: 10 }, (_, i) => ({ s: i + 1, n: 3 })),
  );
  store.close();
});

/** Queues one sample, starts the trainer and resolves once its batch is in trainBatch. */
async function startOneBatch(store: Store, trainer: Trainer, backend: PolicyBackendDouble): Promise<void> {
  let training!: () => void;
  const started = new Promise<void>((r) => {
    training = r;
  });
  backend.onCall = (call) => {
    if (call === 'train') training();
  };
  queueSample(store, learnTurn());
  trainer.start();
  await started;
}

test('trainer: close() during a batch returns promptly and publishes nothing', async () => {
  const backend = new PolicyBackendDouble();
  const { store, trainer } = trainerSetup({ batchSize: 1, pollMs: 10_000 }, backend);
  let release!: () => void;
  backend.gate = new Promise((r) => {
    release = r;
  });
  await startOneBatch(store, trainer, backend);
  assert.equal(trainer.state, 'training');
  const closing = trainer.close();
  release();
  const t0 = performance.now();
  await closing;
  assert.ok(performance.now() - t0 < 5_000, `close took ${performance.now() - t0} ms (the poll interval is 10 s)`);
  assert.deepEqual(backend.calls, ['train'], 'the batch is not published after close');
  assert.equal(store.learning.queuedCount(), 1, 'it stays queued for the next start');
  store.close();
});

test('trainer: close() during a batch that would run for minutes stops it through stopTraining; nothing is committed', async () => {
  const backend = new PolicyBackendDouble();
  const { store, trainer, log } = trainerSetup({ batchSize: 1, pollMs: 10_000 }, backend);
  let stop!: (e: Error) => void;
  backend.gate = new Promise((_, reject) => {
    stop = reject;
  });
  let stopCalls = 0;
  backend.stopTraining = async () => {
    stopCalls++;
    stop(new Error('the learner was closed'));
  };
  await startOneBatch(store, trainer, backend);
  assert.deepEqual(
    log.named('batch_started').map((f) => [f.batch, f.samples, f.tokens]),
    [[1, 1, 7]],
  );
  await trainer.close(); // the gate never opens by itself: only stopTraining ends the batch
  assert.equal(stopCalls, 1);
  assert.equal(trainer.state, 'closed');
  assert.deepEqual(backend.calls, ['train']);
  assert.deepEqual(log.named('trainer_failed'), [], 'a stop is not a failure');
  assert.equal(store.learning.queuedCount(), 1, 'the sample stays queued for the next start');
  assert.equal(store.learning.steps().length, 0);
  store.close();
});

test('trainer: close() while waiting does not call stopTraining', async () => {
  const backend = new PolicyBackendDouble();
  const { store, trainer } = trainerSetup({ batchSize: 2, pollMs: 10_000 }, backend);
  let stopCalls = 0;
  backend.stopTraining = async () => {
    stopCalls++;
  };
  trainer.start();
  await trainer.close();
  assert.equal(stopCalls, 0);
  store.close();
});

test('trainer: queued samples longer than maxTrainTokens leave the queue as too_long before a batch; the rest train', async () => {
  const { store, trainer, backend, log } = trainerSetup({ batchSize: 2, maxTrainTokens: 10 });
  const long = learnTurn({ promptIds: [1, 2, 3, 4, 5, 6, 7, 8] }); // 8 + 3 = 11 tokens
  const fits = [learnTurn({ promptIds: [1, 2, 3, 4, 5, 6, 7] }), learnTurn()]; // 10 and 7 tokens
  const ids = [long, ...fits].map((t) => queueSample(store, t));
  assert.equal(await trainer.trainOnce(), true);
  assert.deepEqual(backend.batches[0]!.map(tag), fits.map(tag));
  assert.deepEqual(
    ids.map((id) => store.learning.sample(id)!.status),
    ['too_long', 'trained', 'trained'],
  );
  assert.deepEqual(
    log.named('samples_too_long').map((f) => [f.dropped, f.maxTrainTokens]),
    [[1, 10]],
  );
  assert.equal(store.learning.counts().samples.too_long, 1);
  store.close();
});

function storedSample(over: Partial<Sample>): Sample {
  return {
    id: 1,
    turnId: 't',
    sessionId: 's',
    reward: null,
    stepIndex: null,
    source: 'rl',
    policyVersion: 0,
    score: 1,
    rlAdvantage: 0.5,
    opdWeight: 0,
    teacherLogprobs: null,
    teacherVersion: null,
    promptIds: [1, 2],
    completionIds: [3, 4, 5],
    rolloutLogprobs: [-1, -2, -3],
    status: 'queued',
    createdAt: 0,
    ...over,
  };
}

test("trainingSampleOf: the RL part in every token's advantage; the teacher in `opd` only with a non-zero weight", () => {
  assert.deepEqual(trainingSampleOf(storedSample({})), {
    promptIds: [1, 2],
    completionIds: [3, 4, 5],
    advantages: [0.5, 0.5, 0.5],
    rolloutLogprobs: [-1, -2, -3],
  });
  assert.deepEqual(
    trainingSampleOf(
      storedSample({
        source: 'opd+rl',
        rlAdvantage: -2,
        opdWeight: 1.5,
        teacherLogprobs: [-0.1, -0.2, -0.3],
        teacherVersion: 0,
      }),
    ),
    {
      promptIds: [1, 2],
      completionIds: [3, 4, 5],
      advantages: [-2, -2, -2],
      rolloutLogprobs: [-1, -2, -3],
      opd: { teacherLogprobs: [-0.1, -0.2, -0.3], weight: 1.5 },
    },
  );
  const opd = trainingSampleOf(
    storedSample({
      source: 'opd',
      rlAdvantage: 0,
      opdWeight: 2,
      teacherLogprobs: [-0.1, -0.2, -0.3],
      teacherVersion: 0,
    }),
  );
  assert.deepEqual(opd.advantages, [0, 0, 0]);
  assert.deepEqual(opd.opd, { teacherLogprobs: [-0.1, -0.2, -0.3], weight: 2 });
  const zeroWeight = trainingSampleOf(
    storedSample({
      source: 'opd',
      rlAdvantage: 0,
      opdWeight: 0,
      teacherLogprobs: [-0.1, -0.2, -0.3],
      teacherVersion: 0,
    }),
  );
  assert.equal('opd' in zeroWeight, false);
  assert.deepEqual(trainingSampleOf(storedSample({ source: 'rl-zero', rlAdvantage: 0 })).advantages, [0, 0, 0]);
  assert.deepEqual(trainingSampleOf(storedSample({ completionIds: [], rolloutLogprobs: [] })).advantages, []);
});

// ---- JudgingFeed ----

/**
 * TEST DOUBLE judge client. Reads tags from the judge prompt's user message (they come from the
 * next state): `score:+1|-1|0` for the eval prompt and `hint:yes` for the hint prompt (its system
 * message contains [HINT_START]). While `gate` is set, answers wait for it.
 */
class JudgeClientDouble implements JudgeClient {
  readonly name = 'judge-double';
  readonly requests: { kind: 'eval' | 'hint'; user: string }[] = [];
  gate: Promise<void> | null = null;

  async complete(messages: ChatMessage[], _opts: CompleteOptions): Promise<string> {
    const system = contentToText(messages.find((m) => m.role === 'system')?.content);
    const user = contentToText(messages.find((m) => m.role === 'user')?.content);
    const kind = system.includes('[HINT_START]') ? 'hint' : 'eval';
    this.requests.push({ kind, user });
    if (this.gate) await this.gate;
    if (kind === 'hint')
      return /hint:yes/.test(user)
        ? '\\boxed{1}\n[HINT_START]hint text here[HINT_END]'
        : 'Nothing to learn.\n\\boxed{-1}';
    const score = /score:([+-]?[01])/.exec(user)?.[1] ?? '0';
    return `After reading the next state... \\boxed{${score.replace('+', '')}}`;
  }
}

/** TEST DOUBLE teacher: renders one id per character; the scorer gives -0.5 per token, or fails for turns listed in `failFor`. */
function teacherDouble() {
  const render = (messages: readonly ChatMessage[]) =>
    messages.flatMap((m) => [600, ...[...contentToText(m.content)].map((c) => c.codePointAt(0)!)]);
  const calls: { promptIds: readonly number[]; completionIds: readonly number[]; version: number | undefined }[] = [];
  const failFor = new Set<number>();
  const scorer: Scorer = {
    async logprobs(promptIds, completionIds, opts): Promise<ScoredCompletion> {
      calls.push({ promptIds, completionIds, version: opts?.version });
      if (failFor.has(completionIds[0]!)) throw new Error('scorer double failed');
      return { logprobs: completionIds.map(() => -0.5) };
    },
  };
  const model: TeacherModel = { render, scorer, contextLength: 100_000 };
  return { model, render, calls, failFor };
}

/** A turn whose recorded prompt ids the teacher double reproduces, closed with `next` as its next state (null: none). */
function closedTurn(
  store: Store,
  render: (m: readonly ChatMessage[]) => number[],
  next: string | null,
  over: Partial<Turn> = {},
): Turn {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'How far is it?' },
  ];
  const t = learnTurn({ messages, promptIds: render(messages), ...over });
  store.recordTurn(sessionOf(t.sessionId ?? 's1'), t);
  store.closeTurn({
    turnId: t.id,
    reason: next === null ? 'no_next_state' : 'next_state',
    closedAt: t.completedAt + 1,
    learning: true,
    nextState:
      next === null
        ? null
        : { messages: [{ role: 'user', content: next }], nextTurnId: `${t.id}_next`, arrivedAt: t.completedAt + 1 },
  });
  return t;
}

/** The feed with the serving version at 3 and the current policy as teacher (unless `over` says otherwise). */
function feedSetup(over: Partial<LearnConfig> = {}) {
  const store = tempStore();
  const client = new JudgeClientDouble();
  const teacher = teacherDouble();
  const log = new LogRecorder();
  let samples = 0;
  const serving = { version: 3 };
  const config = resolveLearnConfig({
    method: 'combine',
    judgeConcurrency: 2,
    maxJudgeAttempts: 2,
    wRl: 0.5,
    wOpd: 2,
    teacherVersion: 'current',
    ...over,
  });
  const feed = new JudgingFeed({
    store,
    client,
    judge: { votes: 1, retries: 0, timeoutMs: 30_000 },
    config,
    teacher: teacher.model,
    servingVersion: () => serving.version,
    log: log.log,
    onSample: () => {
      samples++;
    },
  });
  return { store, client, teacher, log, feed, config, serving, onSampleCalls: () => samples };
}

test('feed: pump claims at most its capacity (2 x judgeConcurrency) and no more until the queue has room', async () => {
  const { store, client, teacher, feed } = feedSetup({ judgeConcurrency: 2 });
  let open!: () => void;
  client.gate = new Promise((r) => {
    open = r;
  });
  for (let i = 0; i < 7; i++) closedTurn(store, teacher.render, 'Thanks. score:+1');
  assert.equal(feed.pump(), 4);
  assert.deepEqual([store.learning.counts().closedClaimed, store.learning.counts().closedPending], [4, 3]);
  assert.deepEqual([feed.queue.running, feed.queue.waiting], [2, 2]);
  assert.equal(feed.pump(), 0, 'full');
  assert.equal(store.learning.counts().closedClaimed, 4);
  open();
  await feed.queue.drain();
  assert.equal(store.learning.counts().judgments, 4);
  assert.equal(store.learning.counts().closedPending, 3, 'nothing claimed without a pump');
  client.gate = null;
  assert.equal(feed.pump(), 3);
  await feed.queue.drain();
  assert.equal(feed.pump(), 0);
  assert.deepEqual(store.learning.counts(), {
    judgments: 7,
    skipped: 0,
    samples: { waiting: 0, queued: 7, trained: 0, stale: 0, too_long: 0 },
    tooLongTurns: 0,
    steps: 0,
    closedPending: 0,
    closedClaimed: 0,
  });
  await feed.close();
  store.close();
});

test("feed (combine): committed judgments produce the samples of the dispatch table, with the teacher's log-probs", async () => {
  const { store, client, teacher, feed, log, onSampleCalls } = feedSetup();
  const both = closedTurn(store, teacher.render, 'Right, thanks. score:+1 hint:yes');
  const rl = closedTurn(store, teacher.render, 'Wrong. score:-1');
  const opd = closedTurn(store, teacher.render, 'Hmm. score:0 hint:yes', { policyVersion: 2 });
  const none = closedTurn(store, teacher.render, 'Hmm. score:0');
  const skipped = closedTurn(store, teacher.render, null);
  while (feed.pump() > 0) await feed.queue.drain();

  const s = (t: Turn) => store.learning.sampleOfTurn(t.id);
  assert.deepEqual(pick(s(both)!), {
    source: 'opd+rl',
    score: 1,
    rlAdvantage: 0.5,
    opdWeight: 2,
    teacherLogprobs: [-0.5, -0.5, -0.5],
    teacherVersion: 3,
    policyVersion: 0,
    status: 'queued',
  });
  assert.deepEqual(pick(s(rl)!), {
    source: 'rl',
    score: -1,
    rlAdvantage: -0.5,
    opdWeight: 0,
    teacherLogprobs: null,
    teacherVersion: null,
    policyVersion: 0,
    status: 'queued',
  });
  assert.deepEqual(pick(s(opd)!), {
    source: 'opd',
    score: 0,
    rlAdvantage: 0,
    opdWeight: 2,
    teacherLogprobs: [-0.5, -0.5, -0.5],
    teacherVersion: 3,
    policyVersion: 2,
    status: 'queued',
  });
  assert.equal(s(none), undefined);
  assert.equal(s(skipped), undefined);
  for (const t of [both, rl, opd, none, skipped]) assert.equal(store.queueStatus(t.id), 'done', t.id);
  assert.deepEqual(store.learning.counts().skipped, 1);
  assert.equal(store.learning.counts().judgments, 5);
  assert.deepEqual(feed.counters, { ...zeroCounters(), samples: 3, abstained: 1, no_next_state: 1 });
  assert.equal(onSampleCalls(), 3);
  assert.deepEqual(
    log
      .named('sample_queued')
      .map((f) => f.source)
      .sort(),
    ['opd', 'opd+rl', 'rl'],
  );

  // The teacher scored the hinted prompt (not the recorded one) with the configured version, for the two hinted turns only.
  assert.equal(teacher.calls.length, 2);
  for (const c of teacher.calls) {
    assert.equal(c.version, 3);
    assert.notDeepEqual(c.promptIds, both.promptIds);
    assert.ok(
      String.fromCodePoint(...c.promptIds.filter((id) => id !== 600)).endsWith(
        'How far is it?\n\n[hindsight hint for this request]\nhint text here',
      ),
    );
  }
  assert.deepEqual(
    [client.requests.filter((r) => r.kind === 'eval').length, client.requests.filter((r) => r.kind === 'hint').length],
    [4, 4],
    'one vote of each kind; none for the skipped turn',
  );
  await feed.close();
  store.close();
});

test('feed: teacherVersion 0 scores with the frozen base whatever version serves', async () => {
  const { store, teacher, feed } = feedSetup({ teacherVersion: 0 });
  const t = closedTurn(store, teacher.render, 'Right, thanks. score:+1 hint:yes');
  while (feed.pump() > 0) await feed.queue.drain();
  assert.deepEqual(
    teacher.calls.map((c) => c.version),
    [0],
  );
  assert.equal(store.learning.sampleOfTurn(t.id)!.teacherVersion, 0);
  await feed.close();
  store.close();
});

test('feed: teacherVersion current scores once more on the new version when a publication released the one it read', async () => {
  const { store, teacher, feed, serving } = feedSetup();
  const t = closedTurn(store, teacher.render, 'Right, thanks. score:+1 hint:yes');
  const scoreOnce = teacher.model.scorer.logprobs.bind(teacher.model.scorer);
  teacher.model.scorer.logprobs = async (p, c, o) => {
    if (o?.version === 3) {
      serving.version = 4;
      await scoreOnce(p, c, o);
      throw new Error('policy version 3 is not loaded (live versions: 0, 4)');
    }
    return scoreOnce(p, c, o);
  };
  while (feed.pump() > 0) await feed.queue.drain();
  assert.deepEqual(
    teacher.calls.map((c) => c.version),
    [3, 4],
  );
  assert.equal(store.learning.sampleOfTurn(t.id)!.teacherVersion, 4);
  assert.deepEqual(feed.counters, { ...zeroCounters(), samples: 1 });
  await feed.close();
  store.close();
});

test('feed (rl): no hint prompt is sent; decisive scores become rl samples; keepZeroScorePerSession keeps one per session', async () => {
  const { store, client, teacher, feed } = feedSetup({ method: 'rl', keepZeroScorePerSession: true });
  const pos = closedTurn(store, teacher.render, 'Thanks. score:+1 hint:yes', { sessionId: 'a' });
  const zeros = [1, 2, 3].map(() => closedTurn(store, teacher.render, 'Hmm. score:0', { sessionId: 'b' }));
  const zeroInA = closedTurn(store, teacher.render, 'Hmm. score:0', { sessionId: 'a' });
  while (feed.pump() > 0) await feed.queue.drain();
  assert.equal(
    client.requests.some((r) => r.kind === 'hint'),
    false,
  );
  assert.equal(teacher.calls.length, 0);
  assert.equal(store.learning.sampleOfTurn(pos.id)!.source, 'rl');
  assert.deepEqual(
    zeros.map((t) => store.learning.sampleOfTurn(t.id)?.source).filter((x) => x !== undefined),
    ['rl-zero'],
    'exactly one kept for session b',
  );
  assert.equal(store.learning.sampleOfTurn(zeroInA.id), undefined, 'session a already has a sample');
  assert.deepEqual(feed.counters, { ...zeroCounters(), samples: 2, abstained: 3 });
  await feed.close();
  store.close();
});

test('feed: teacher failures are counted by reason; the rl part survives when the score is decisive', async () => {
  const { store, teacher, feed, log } = feedSetup();
  const failDecisive = closedTurn(store, teacher.render, 'Great. score:+1 hint:yes');
  const failAbstain = closedTurn(store, teacher.render, 'Hmm. score:0 hint:yes');
  const notReproducible = closedTurn(store, teacher.render, 'Hmm. score:0 hint:yes', { promptIds: [9, 9, 9] });
  teacher.failFor.add(tag(failDecisive));
  teacher.failFor.add(tag(failAbstain));
  while (feed.pump() > 0) await feed.queue.drain();
  assert.deepEqual(pick(store.learning.sampleOfTurn(failDecisive.id)!), {
    source: 'rl',
    score: 1,
    rlAdvantage: 0.5,
    opdWeight: 0,
    teacherLogprobs: null,
    teacherVersion: null,
    policyVersion: 0,
    status: 'queued',
  });
  assert.equal(store.learning.sampleOfTurn(failAbstain.id), undefined);
  assert.equal(store.learning.sampleOfTurn(notReproducible.id), undefined);
  assert.deepEqual(feed.counters, {
    ...zeroCounters(),
    samples: 1,
    teacher_failed: 2,
    'teacher/scoring_failed': 2,
    'teacher/prompt_not_reproducible': 1,
  });
  assert.deepEqual(
    log
      .named('teacher_failed')
      .map((f) => f.reason)
      .sort(),
    ['prompt_not_reproducible', 'scoring_failed', 'scoring_failed'],
  );
  for (const t of [failDecisive, failAbstain, notReproducible]) assert.equal(store.queueStatus(t.id), 'done');
  await feed.close();
  store.close();
});

test('feed: a turn longer than maxTrainTokens is judged, never scored by the teacher, and recorded as too_long', async () => {
  const { store, teacher, feed, log } = feedSetup({ maxTrainTokens: 30 });
  const completion = (first: number, n: number) => ({
    completionIds: Array.from({ length: n }, (_, i) => first + i),
    logprobs: new Array<number>(n).fill(-1),
    sampledLogprobs: new Array<number>(n).fill(-1),
  });
  const long = closedTurn(store, teacher.render, 'Right. score:+1 hint:yes', completion(700, 40));
  const fits = closedTurn(store, teacher.render, 'Right. score:+1 hint:yes', completion(800, 2));
  const skipped = closedTurn(store, teacher.render, null, completion(900, 40));
  while (feed.pump() > 0) await feed.queue.drain();
  assert.ok(long.promptIds.length + 40 > 30 && fits.promptIds.length + 2 <= 30, 'fixture lengths');
  assert.equal(store.learning.sampleOfTurn(long.id), undefined);
  assert.equal(store.learning.sampleOfTurn(fits.id)!.source, 'opd+rl');
  assert.deepEqual(
    teacher.calls.map((c) => c.completionIds[0]),
    [800],
    'only the turn that fits is scored',
  );
  const noSample = (id: string) =>
    (store.db.prepare('SELECT no_sample FROM judgments WHERE turn_id = ?').get(id) as { no_sample: string | null })
      .no_sample;
  assert.deepEqual([noSample(long.id), noSample(fits.id), noSample(skipped.id)], ['too_long', null, 'no_next_state']);
  assert.deepEqual(feed.counters, { ...zeroCounters(), samples: 1, too_long: 1, no_next_state: 1 });
  assert.deepEqual(
    log.named('sample_too_long').map((f) => [f.turnId, f.tokens, f.maxTrainTokens]),
    [[long.id, long.promptIds.length + 40, 30]],
  );
  assert.equal(store.learning.counts().tooLongTurns, 1);
  await feed.close();
  store.close();
});

test('feed (steps): every step waits with its teacher term (a too-long one without), and the outcome releases them', async () => {
  const { store, teacher, feed, log, onSampleCalls } = feedSetup({ method: 'steps', maxTrainTokens: 30 });
  const hinted = closedTurn(store, teacher.render, 'Right. score:+1 hint:yes', { receivedAt: 10 });
  const long = closedTurn(store, teacher.render, 'Right. score:+1 hint:yes', {
    receivedAt: 20,
    completionIds: Array.from({ length: 40 }, (_, i) => 700 + i),
    logprobs: new Array<number>(40).fill(-1),
    sampledLogprobs: new Array<number>(40).fill(-1),
  });
  while (feed.pump() > 0) await feed.queue.drain();
  const s = (t: Turn) => store.learning.sampleOfTurn(t.id)!;
  assert.deepEqual(
    [s(hinted).source, s(hinted).status, s(hinted).opdWeight, s(hinted).teacherLogprobs],
    ['steps+opd', 'waiting', 2, [-0.5, -0.5, -0.5]],
  );
  assert.deepEqual([s(long).source, s(long).status, s(long).teacherLogprobs], ['steps', 'waiting', null]);
  assert.equal(teacher.calls.length, 1, 'the too-long step is not scored by the teacher');
  assert.equal(onSampleCalls(), 0, 'nothing to train before the outcome');
  const fb = { id: 'fb_1', key: 'k', sessionId: 's1', turnId: null, reward: 0.5, comment: null, createdAt: 1 };
  assert.equal(store.feedback.recordFeedback(fb).status, 'stored');
  feed.pump();
  // A session without X-Task-Id is its own group: each step index alone keeps its reward
  // 0.5 + 1 (one +1 vote), times wRl.
  for (const [t, index] of [
    [hinted, 0],
    [long, 1],
  ] as const)
    assert.deepEqual([s(t).status, s(t).stepIndex, s(t).reward, s(t).rlAdvantage], ['queued', index, 1.5, 0.75]);
  assert.deepEqual(
    log.named('step_group_released').map((f) => [f.taskId, f.rollouts, f.samples, f.rewardMean]),
    [[null, 1, 2, 1.5]],
  );
  assert.deepEqual(feed.counters, { ...zeroCounters(), samples: 2, step_groups: 1 });
  assert.equal(onSampleCalls(), 1);
  await feed.close();
  store.close();
});

test('feed: a commit failure returns the turn to pending, then excludes it after maxJudgeAttempts; other turns commit', async () => {
  const { store, teacher, feed, log } = feedSetup({ maxJudgeAttempts: 2 });
  const bad = closedTurn(store, teacher.render, 'Thanks. score:+1 hint:yes');
  const good = closedTurn(store, teacher.render, 'Thanks. score:+1');
  // A real SQLite failure inside recordJudgment's transaction, after nothing else could fail.
  store.db.exec(
    `CREATE TEMP TRIGGER refuse_sample BEFORE INSERT ON samples WHEN NEW.turn_id = '${bad.id}' BEGIN SELECT RAISE(ABORT, 'injected commit failure'); END`,
  );

  assert.equal(feed.pump(), 2);
  await feed.queue.drain();
  assert.equal(store.queueStatus(bad.id), 'pending');
  assert.equal(store.queueStatus(good.id), 'done');
  assert.equal(feed.counters.commit_failed, 1);
  assert.equal(feed.counters.excluded_after_failures, 0);
  assert.deepEqual(
    store.db.prepare('SELECT count(*) AS n FROM judgments WHERE turn_id = ?').get(bad.id),
    { n: 0 },
    'nothing of the failed commit remains',
  );
  assert.deepEqual(store.db.prepare('SELECT count(*) AS n FROM judge_votes WHERE turn_id = ?').get(bad.id), { n: 0 });
  assert.match(String(log.named('judge_persist_failed')[0]?.message), /injected commit failure/);

  assert.equal(feed.pump(), 1, 'offered again');
  await feed.queue.drain();
  assert.equal(store.queueStatus(bad.id), 'excluded');
  assert.deepEqual(
    [feed.counters.commit_failed, feed.counters.excluded_after_failures, feed.counters.samples],
    [2, 1, 1],
  );
  assert.equal(feed.pump(), 0, 'never offered again');
  await feed.close();
  store.close();
});

function pick(s: Sample) {
  return {
    source: s.source,
    score: s.score,
    rlAdvantage: s.rlAdvantage,
    opdWeight: s.opdWeight,
    teacherLogprobs: s.teacherLogprobs,
    teacherVersion: s.teacherVersion,
    policyVersion: s.policyVersion,
    status: s.status,
  };
}

function zeroCounters() {
  return {
    samples: 0,
    no_next_state: 0,
    abstained: 0,
    no_hint: 0,
    teacher_failed: 0,
    too_long: 0,
    'teacher/prompt_not_reproducible': 0,
    'teacher/too_long': 0,
    'teacher/scoring_failed': 0,
    commit_failed: 0,
    excluded_after_failures: 0,
    not_a_step: 0,
    step_groups: 0,
  };
}
