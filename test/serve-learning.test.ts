// `openclaw-rl serve` learning end to end, as a process: a scripted multi-session conversation
// over HTTP, a test-double judge endpoint (test/helpers/judge-double.ts) that answers from tags
// in the next state, then the store is checked: the right samples with the right advantages,
// teacher log-probs equal to PyTorch's on the hinted prompt, a training step, a new version
// serving later turns, every request answered.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadChatModel } from '../src/cli/chat-model.js';
import type { ChatMessage } from '../src/chat/messages.js';
import { renderPrompt } from '../src/chat/prompt.js';
import { hintedMessages } from '../src/learn/teacher.js';
import { openStore } from '../src/store/store.js';
import { freshDir, tinyModel } from './helpers/gateway.js';
import { startJudgeDouble } from './helpers/judge-double.js';
import { maxAbsDiff, referenceLogprobs } from './helpers/models.js';
import { chatAsMain, CLI, judgedServeArgs, startServe, stopServe } from './helpers/serve-process.js';

const ADMIN = 'admin-secret';

/** Plays one session: each user text after the first is the next state of the previous turn. */
async function conversation(url: string, session: string, userTexts: string[]): Promise<void> {
  const messages: ChatMessage[] = [];
  for (const text of userTexts) {
    messages.push({ role: 'user', content: text });
    messages.push(await chatAsMain(url, session, messages));
  }
}

async function adminStatus(root: string): Promise<Record<string, any>> {
  const res = await fetch(`${root}/admin/status`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, any>;
}

test('serve judges closed turns, builds samples per the combine table, trains a batch and serves the new version', async (t) => {
  const hintA = 'Show the arithmetic one step at a time.';
  const hintB = 'Give the number first, then explain.';
  const judge = await startJudgeDouble({ hints: [hintA, hintB] });
  const data = freshDir('learn-e2e-');
  // fp32: the teacher's log-probs are compared below with the exact fp32 reference.
  const serve = await startServe(
    judgedServeArgs({ data, judgeUrl: judge.url, method: 'combine', batchSize: 3, adminKey: ADMIN }, [
      '--precision',
      'fp32',
    ]),
  );
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
  });

  await conversation(serve.url, 'sess-a', [
    'What is 2 plus 2?',
    'Thanks, that helps. {{eval: 1|1|-1}} {{hint: hint#0|hint#0|nohint}}', // turn 1: opd+rl, +1
    'No, that is wrong. {{eval: -1|-1|1}} {{hint: nohint}}', // turn 2: rl, -1
    'Hmm. {{eval: 0|0|1}} {{hint: nohint}}', // turn 3: abstains, no hint: nothing
  ]);
  await conversation(serve.url, 'sess-b', [
    'How many legs has a cat?',
    'Okay. {{eval: 0|1|-1}} {{hint: nohint|hint#1|hint#1}}', // turn 1: opd, score 0
    'Great, thanks! {{eval: 1|1|1}} {{hint: nohint}}', // turn 2: rl, +1
  ]);

  // Five closed turns make four samples; batch size 3: one batch trains and is published as version 1.
  const deadline = Date.now() + 120_000;
  let status = await adminStatus(serve.root);
  while (
    (status.steps < 1 || status.version < 1 || status.judge.judged < 5) &&
    status.trainer.state !== 'failed' &&
    Date.now() < deadline
  ) {
    await serve
      .waitForLog(
        (l) => l.event === 'batch_trained' || l.event === 'trainer_failed' || l.event === 'turn_judged',
        1_000,
      )
      .catch(() => {});
    status = await adminStatus(serve.root);
  }
  assert.equal(status.trainer.state === 'failed' ? status.trainer.error : null, null);
  assert.equal(status.steps, 1);
  assert.equal(status.version, 1);
  assert.equal(status.queues.samples, 1, JSON.stringify({ feed: status.feed, judge: status.judge }));
  assert.equal(status.samples.trained, 3);
  // Each turn of a session extends the one before: its prompt starts with keys and values the
  // prefix cache holds. The tiny model's whole context fits one training step here.
  assert.ok(
    status.prefixCache.hitTokens > 0 && status.prefixCache.missTokens > 0 && status.prefixCache.budgetBytes > 0,
    JSON.stringify(status.prefixCache),
  );
  const plan = serve.lines.find((l) => l.event === 'memory_plan')!;
  assert.equal(plan.maxTrainTokens, 4096);
  for (const [k, v] of Object.entries(status.memory))
    assert.equal(plan[k], v, `memory.${k}: the status and the startup log agree`);
  assert.deepEqual(status.tooLong, { maxTrainTokens: 4096, turns: 0 });
  await conversation(serve.url, 'sess-c', ['And 3 plus 3?']);
  assert.equal(await stopServe(serve), 0);

  const store = openStore({ dir: data, recoverQueue: false });
  t.after(() => store.close());
  const turns = [...store.exportLines('main')];
  const turnsOf = (session: string) => turns.filter((l) => l.session_id === session);
  assert.equal(turns.length, 8);
  const [a1, a2, a3] = turnsOf('sess-a');
  const [b1, b2] = turnsOf('sess-b');
  const sample = (turnId: string) => store.learning.sampleOfTurn(turnId);

  const sa1 = sample(a1!.turn_id)!;
  assert.equal(sa1.source, 'opd+rl');
  assert.equal(sa1.rlAdvantage, 1);
  assert.equal(sa1.opdWeight, 1);
  assert.equal(sa1.teacherVersion, 0);
  const sa2 = sample(a2!.turn_id)!;
  assert.deepEqual([sa2.source, sa2.rlAdvantage, sa2.teacherLogprobs], ['rl', -1, null]);
  assert.equal(sample(a3!.turn_id), undefined);
  const sb1 = sample(b1!.turn_id)!;
  assert.deepEqual([sb1.source, sb1.score, sb1.rlAdvantage], ['opd', 0, 0]);

  // The batch is the three oldest samples; the fourth waits for the next one.
  const sb2 = sample(b2!.turn_id)!;
  assert.deepEqual([sb2.source, sb2.rlAdvantage], ['rl', 1]);
  const all = [sa1, sa2, sb1, sb2].sort((x, y) => x.id - y.id);
  assert.deepEqual(
    all.map((s) => [s.status, s.trainedStep]),
    [
      ['trained', 1],
      ['trained', 1],
      ['trained', 1],
      ['queued', null],
    ],
  );
  const steps = store.learning.steps();
  assert.equal(steps.length, 1);
  assert.deepEqual([steps[0]!.step, steps[0]!.version, steps[0]!.samples], [1, 1, 3]);
  for (const l of turnsOf('sess-a').concat(turnsOf('sess-b'))) assert.equal(l.policy_version, 0);
  assert.equal(turnsOf('sess-c')[0]!.policy_version, 1, 'a request after the publication is served by version 1');

  // Every vote's raw text is stored with its judgment.
  const votes = store.db
    .prepare('SELECT kind, count(*) AS n FROM judge_votes WHERE turn_id = ? GROUP BY kind ORDER BY kind')
    .all(a1!.turn_id);
  assert.deepEqual(votes, [
    { kind: 'eval', n: 3 },
    { kind: 'hint', n: 3 },
  ]);

  // The teacher: the turn's prompt with the hint in its last user message, scoring the exact
  // sampled ids, token 0 included, equal to the PyTorch reference of the base model.
  const model = await loadChatModel(tinyModel(), { threads: 1 });
  try {
    for (const [line, s, hint] of [
      [a1!, sa1, hintA],
      [b1!, sb1, hintB],
    ] as const) {
      const hinted = renderPrompt(model.template, model.tokenizer, hintedMessages(line.messages, hint), {
        addGenerationPrompt: true,
      }).ids;
      assert.notDeepEqual(hinted, line.prompt_ids);
      const ref = referenceLogprobs(tinyModel(), [[...hinted, ...line.completion_ids]])[0]!.slice(hinted.length - 1);
      assert.equal(s.teacherLogprobs!.length, line.completion_ids.length);
      assert.ok(
        maxAbsDiff(s.teacherLogprobs!, ref) < 1e-4,
        `teacher log-probs differ from the reference by ${maxAbsDiff(s.teacherLogprobs!, ref)}`,
      );
    }
  } finally {
    await model.engine.close();
  }
});

test('a judge that never answers does not hold up serving: its votes time out, are retried, and the turns abstain', async (t) => {
  const judge = await startJudgeDouble();
  judge.force = 'hang';
  const data = freshDir('learn-hang-');
  const config = join(data, 'config.json');
  // 1 s, not less: on a loaded machine a shorter timeout can fire before the request reaches the
  // double, which then counts fewer than the 24 attempts the store records.
  writeFileSync(config, JSON.stringify({ judge: { timeoutMs: 1000, retries: 1 } }));
  const serve = await startServe(
    judgedServeArgs({ data, judgeUrl: judge.url, votes: 2, adminKey: ADMIN }, ['--config', config]),
  );
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
  });

  // Three sessions of three turns: six closed turns go to the judge while the talk goes on.
  await Promise.all(
    ['h1', 'h2', 'h3'].map((s) => conversation(serve.url, s, ['How far is Lisbon?', 'Thanks.', 'And Porto?'])),
  );
  const deadline = Date.now() + 60_000;
  let status = await adminStatus(serve.root);
  while (status.judge.judged < 6 && Date.now() < deadline) {
    await serve.waitForLog((l) => l.event === 'turn_judged', 1_000).catch(() => {});
    status = await adminStatus(serve.root);
  }
  assert.equal(status.judge.judged, 6);
  assert.deepEqual([status.steps, status.queues.samples], [0, 0], 'abstentions make no samples');
  await conversation(serve.url, 'h4', ['Still there?']);
  assert.equal(await stopServe(serve), 0);

  const store = openStore({ dir: data, recoverQueue: false });
  t.after(() => store.close());
  assert.deepEqual(store.db.prepare('SELECT score, count(*) AS n FROM judgments GROUP BY score').all(), [
    { score: 0, n: 6 },
  ]);
  assert.deepEqual(
    store.db
      .prepare('SELECT kind, failure, attempts, count(*) AS n FROM judge_votes GROUP BY kind, failure, attempts')
      .all(),
    [{ kind: 'eval', failure: 'timeout', attempts: 2, n: 12 }],
    'two votes per turn, each tried twice',
  );
  assert.equal(judge.requests.length, 24);
  assert.equal([...store.exportLines('main')].length, 10, 'every turn recorded');
});

test('serve rejects contradictory or invalid learning settings with a message naming the setting', () => {
  const run = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
    spawnSync(process.execPath, [CLI, 'serve', '--model', tinyModel(), '--data', freshDir('learn-bad-'), ...args], {
      encoding: 'utf8',
      env,
    });
  const cases: [string[], RegExp][] = [
    [['--method', 'ppo'], /method must be one of rl, opd, combine/],
    [['--judge-model', 'x'], /judge\.model was set without judge\.url/],
    [['--judge-url', 'http://127.0.0.1:9/v1'], /judge\.model is required with judge\.url/],
    [['--judge-url', 'ftp://x', '--judge-model', 'j'], /judge\.url must be an http\(s\) URL/],
    [['--judge', 'gpt'], /--judge takes only "self"/],
    [['--batch-size', '0'], /--batch-size must be an integer >= 1/],
    [['--lora-rank=-1'], /--lora-rank must be an integer >= 0/],
  ];
  for (const [args, message] of cases) {
    const r = run(args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});

test('--max-train-tokens: turns longer than the bound are judged, never trained, and counted as too long', async (t) => {
  const judge = await startJudgeDouble();
  judge.force = '1';
  const data = freshDir('learn-too-long-');
  const serve = await startServe(
    judgedServeArgs({ data, judgeUrl: judge.url, batchSize: 1, votes: 1, adminKey: ADMIN }, [
      '--max-train-tokens',
      '8',
    ]),
  );
  t.after(async () => {
    await stopServe(serve);
    await judge.close();
  });
  assert.equal(serve.lines.find((l) => l.event === 'memory_plan')!.maxTrainTokens, 8);
  await conversation(serve.url, 'sess-long', ['What is 2 plus 2?', 'Thanks.', 'And 3 plus 3?']);
  const tooLongLines = () => serve.lines.filter((l) => l.event === 'sample_too_long');
  await serve.waitForLog(() => tooLongLines().length >= 2);
  for (const line of tooLongLines())
    assert.ok((line.tokens as number) > 8 && line.maxTrainTokens === 8, JSON.stringify(line));
  const status = await adminStatus(serve.root);
  assert.deepEqual(status.tooLong, { maxTrainTokens: 8, turns: 2 });
  assert.equal(status.samples.queued + status.samples.trained, 0);
  assert.equal(status.steps, 0);
});
