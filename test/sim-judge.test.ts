// The simulated judge through the real judge client, prompts, parsing and voting: it decides from
// the next state, writes hints the hint choice accepts, errs at the configured rate, and answers
// anything that is not a judge prompt without a verdict.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { judgeTurn, OpenAIJudgeClient } from '../src/judge/index.js';
import { startSimJudge } from '../src/sim/judge-server.js';
import { makeClosedTurn } from './helpers/judge-double.js';

const reply = '**Step 1:** Compute 20 + 44 = 64.\n**Step 2:** Compute 100 - 64 = 36.\n\n**Final answer:** 36';
const correction = makeClosedTurn({
  request: 'can u help me solve this? ...',
  reply,
  next: [{ role: 'user', content: 'too robotic. drop the bold and no final answer line. make it sound like me.' }],
});
const approval = makeClosedTurn({
  request: 'can u help me solve this? ...',
  reply: 'So first you add 20 and 44, which gives 64.',
  next: [{ role: 'user', content: 'nice, that sounds like me. save it to the end of homework/3.txt.' }],
});
const unrelated = makeClosedTurn({
  request: 'hello',
  reply: 'Hi.',
  next: [{ role: 'user', content: 'what time is it in Lisbon?' }],
});

async function withJudge<T>(errorRate: number, run: (client: OpenAIJudgeClient) => Promise<T>): Promise<T> {
  const judge = await startSimJudge({ errorRate, seed: 7 });
  try {
    return await run(new OpenAIJudgeClient({ baseUrl: judge.url, model: judge.model }));
  } finally {
    await judge.close();
  }
}

test("a correction is -1 with a hint in the judge's own words; approval is +1 without one; the rest 0", async () => {
  await withJudge(0, async (client) => {
    const bad = await judgeTurn(client, correction, { votes: 3 });
    assert.deepEqual(
      bad.evalVotes.map((v) => v.score),
      [-1, -1, -1],
    );
    assert.equal(bad.score, -1);
    assert.equal(
      bad.hint,
      "Write plain text without any bold formatting. End naturally instead of with a 'Final answer' label.",
    );
    assert.deepEqual(bad.hintRejections, []);
    const good = await judgeTurn(client, approval, { votes: 3 });
    assert.equal(good.score, 1);
    assert.equal(good.hint, null);
    assert.deepEqual(
      good.hintVotes.map((v) => v.score),
      [-1, -1, -1],
    );
    assert.equal((await judgeTurn(client, unrelated, { votes: 1 })).score, 0);
  });
});

test('every vote wrong at error rate 1: flipped scores, missed hints and invented ones', async () => {
  await withJudge(1, async (client) => {
    const bad = await judgeTurn(client, correction, { votes: 3 });
    assert.equal(bad.score, 1);
    assert.equal(bad.hint, null);
    const good = await judgeTurn(client, approval, { votes: 3 });
    assert.equal(good.score, -1);
    assert.ok(good.hint !== null && good.hint.length > 10, 'an invented hint');
  });
});

test('at the default 20% error rate about a fifth of the votes are wrong, and three votes outvote most errors', async () => {
  await withJudge(0.2, async (client) => {
    const turns = Array.from({ length: 60 }, (_, i) =>
      makeClosedTurn({
        request: `problem ${i}`,
        reply,
        next: [{ role: 'user', content: `too robotic, drop the bold (${i})` }],
      }),
    );
    const judged = await Promise.all(turns.map((t) => judgeTurn(client, t, { votes: 3, hintVotes: 0 })));
    const votes = judged.flatMap((j) => j.evalVotes.map((v) => v.score));
    const wrong = votes.filter((v) => v !== -1).length / votes.length;
    assert.ok(wrong > 0.12 && wrong < 0.28, `wrong vote share ${wrong}`);
    const wrongMajority = judged.filter((j) => j.score !== -1).length / judged.length;
    assert.ok(wrongMajority < wrong, `majority error ${wrongMajority} should be below the vote error ${wrong}`);
  });
});

test('identical votes differ only by their seed or arrival, and a seed replays its answer', async () => {
  const run = () => withJudge(0.5, (client) => judgeTurn(client, correction, { votes: 8, hintVotes: 0, seed: 100 }));
  const [a, b] = [await run(), await run()];
  assert.deepEqual(
    a.evalVotes.map((v) => v.score),
    b.evalVotes.map((v) => v.score),
  );
  assert.ok(new Set(a.evalVotes.map((v) => v.score)).size > 1, 'votes at error rate 0.5 should disagree');
});

test('a prompt that is not a judge prompt gets an answer without a verdict', async () => {
  await withJudge(0, async (client) => {
    const text = await client.complete([{ role: 'user', content: 'Write a poem.' }], { temperature: 0, maxTokens: 20 });
    assert.doesNotMatch(text, /\\boxed/);
  });
});
