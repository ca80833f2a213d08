// The prefix cache changes no result: one sequence of requests (a growing session, a teacher
// score sharing the session's prompt, concurrent judge votes and sessions sharing a system
// prompt, a LoRA publication with a request in flight, a full-weights publication, requests on
// the frozen base) runs on an engine with the cache and on one without, with the same seeds.
//
// Not bit-exact, and not because of the cache: OpenBLAS computes a row of a matrix product with
// a different summation order depending on how many rows the product has (sgemv for one, small-M
// kernels for a few), so a token's keys, values and logits move in the last bits with the
// chunking of its prompt and with whatever else shares its step; that already happens without a
// cache when requests are batched. Measured: up to about 1e-5 in logits and 3e-6 in log-probs
// on this model, far below anything that changes a sampled id. So ids must match exactly and
// log-probs to 1e-5.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LocalEngine } from '../src/engine/local/engine.js';
import { defaultKvCacheBytes } from '../src/engine/local/kv-cache-budget.js';
import type { GenerationEvent, SamplingParams } from '../src/engine/types.js';
import { makeTinyModel, maxAbsDiff } from './helpers/models.js';
import { perturbedWeightsUpdate, randomLoraUpdate } from './helpers/policy-updates.js';

const dir = makeTinyModel({ family: 'qwen3', seed: 23, shape: { maxPositionEmbeddings: 4096 } });
const LOGPROB_TOLERANCE = 1e-5;

interface Outcome {
  what: string;
  ids: number[];
  logprobs: number[];
  version: number | null;
}

const tokens = (n: number, salt: number) =>
  Array.from({ length: n }, (_, i) => ((i + 1) * (salt * 2 + 7) + salt * 31) % 500);

async function collect(what: string, events: AsyncIterable<GenerationEvent>): Promise<Outcome> {
  const out: Outcome = { what, ids: [], logprobs: [], version: null };
  for await (const e of events) {
    if (e.type === 'token') {
      out.ids.push(e.token.id);
      out.logprobs.push(e.token.logprob);
    } else out.version = e.version;
  }
  return out;
}

/** The same requests, in the same order and with the same seeds, on either engine. */
async function scenario(engine: LocalEngine): Promise<Outcome[]> {
  const results: Outcome[] = [];
  const gen = (what: string, prompt: number[], seed: number, extra: SamplingParams = {}) =>
    collect(what, engine.generate(prompt, { maxTokens: 24, temperature: 1, seed, stopTokenIds: [], ...extra }));
  const score = async (what: string, prompt: number[], completion: number[], version = 0): Promise<Outcome> => ({
    what,
    ids: completion,
    logprobs: (await engine.logprobs(prompt, completion, { version })).logprobs,
    version,
  });

  const system = tokens(500, 1);
  let prompt = [...system, ...tokens(100, 2)];
  let answer: number[] = [];
  const nextTurn = async (turn: number) => {
    const r = await gen(`session turn ${turn}`, prompt, 100 + turn);
    results.push(r);
    answer = r.ids;
    prompt = [...prompt, ...answer, ...tokens(60, 10 + turn)];
  };
  for (let turn = 1; turn <= 3; turn++) await nextTurn(turn);

  // The teacher: the turn's prompt with a hint, scoring the answer, on the frozen base.
  const turnPrompt = prompt.slice(0, prompt.length - answer.length - 60);
  results.push(
    await score('teacher', [...turnPrompt.slice(0, -10), ...tokens(30, 30), ...turnPrompt.slice(-10)], answer),
  );
  // Judge votes (one prompt, three seeds) and two more sessions on the system prompt, all at once.
  const judge = [...turnPrompt, ...answer, ...tokens(40, 31)];
  results.push(
    ...(await Promise.all([
      ...[1, 2, 3].map((v) => gen(`judge vote ${v}`, judge, 200 + v, { maxTokens: 6 })),
      gen('session B', [...system, ...tokens(80, 32)], 301),
      gen('session C', [...system, ...tokens(90, 33)], 302),
    ])),
  );

  // A LoRA version published while a generation on version 0 is part-way. These two share steps
  // in a way that depends on timing (a loaded machine batches them differently in the two runs),
  // and the rounding of a row moves with what shares its step; greedy, a last-bit difference
  // cannot move a draw across a token boundary as it can at temperature 1.
  const inFlight = engine
    .generate(prompt, { maxTokens: 40, temperature: 0, seed: 400, stopTokenIds: [] })
    [Symbol.asyncIterator]();
  const first = await inFlight.next();
  await engine.publish(randomLoraUpdate(engine.folder.config, 1, 7));
  const onNew = gen('session turn 4 on version 1', prompt, 104, { temperature: 0 });
  const rest = collect('in flight across publication 1', { [Symbol.asyncIterator]: () => inFlight });
  const [turn4, across] = await Promise.all([onNew, rest]);
  const head = first.value as Extract<GenerationEvent, { type: 'token' }>;
  results.push(turn4, {
    ...across,
    ids: [head.token.id, ...across.ids],
    logprobs: [head.token.logprob, ...across.logprobs],
  });
  answer = turn4.ids;
  prompt = [...prompt, ...answer, ...tokens(60, 14)];
  await nextTurn(5);

  // Full weights as version 2; the base still serves the teacher and a self-judge.
  await engine.publish(perturbedWeightsUpdate(new Float32Array(engine.info.baseParams), 2, 8));
  results.push(
    ...(await Promise.all([
      gen('session turn 6 on version 2', prompt, 106),
      gen('self-judge on version 0', judge, 500, { version: 0, maxTokens: 6 }),
      score('teacher again', turnPrompt, answer),
    ])),
  );
  results.push(await score('score on version 2', prompt, tokens(12, 40), 2));
  return results;
}

test('every request gives the same ids and log-probs with the prefix cache as without it', async (t) => {
  const on = await LocalEngine.open(dir, { threads: 1, kvCacheBytes: 64 << 20 });
  const off = await LocalEngine.open(dir, { threads: 1, kvCacheBytes: 0 });
  try {
    const cached = await scenario(on);
    const plain = await scenario(off);
    assert.equal(cached.length, plain.length);
    let worst = 0;
    cached.forEach((a, i) => {
      const b = plain[i]!;
      assert.equal(a.what, b.what);
      assert.deepEqual(a.ids, b.ids, `${a.what}: ids`);
      assert.equal(a.version, b.version, `${a.what}: version`);
      const diff = maxAbsDiff(a.logprobs, b.logprobs);
      worst = Math.max(worst, diff);
      assert.ok(diff < LOGPROB_TOLERANCE, `${a.what}: log-probs differ by ${diff}`);
    });
    const across = cached.filter((r) => r.what.includes('across'));
    assert.deepEqual(
      across.map((r) => r.version),
      [0],
      'the in-flight generation finished on version 0',
    );

    const stats = on.prefixCacheStats();
    const without = off.prefixCacheStats();
    // The cache is not allowed to pass by doing nothing.
    assert.ok(stats.hitTokens > 2 * stats.missTokens, `hits ${stats.hitTokens}, misses ${stats.missTokens}`);
    assert.equal(
      stats.hitTokens + stats.missTokens,
      without.missTokens,
      'every prompt token is either copied or computed',
    );
    assert.ok(stats.entries > 0 && stats.bytes > 0 && stats.bytes <= stats.budgetBytes);
    const nothing = { hitTokens: 0, missTokens: 0, bytes: 0, entries: 0, evictions: 0, budgetBytes: 0 };
    assert.deepEqual({ ...without, missTokens: 0 }, nothing);
    t.diagnostic(`worst log-prob difference ${worst}; cache ${JSON.stringify(stats)}`);
  } finally {
    await on.close();
    await off.close();
  }
});

test("the default budget is defaultKvCacheBytes of the model in its precision's rows; a bad budget is refused before a thread starts", async () => {
  for (const [precision, dtype] of [
    ['fp32', 'f32'],
    ['bf16', 'bf16'],
  ] as const) {
    const engine = await LocalEngine.open(dir, { threads: 1, precision });
    try {
      const expected = defaultKvCacheBytes(engine.folder.config, dtype);
      assert.equal(engine.info.kvCacheBytes, expected, precision);
      assert.equal(engine.prefixCacheStats().budgetBytes, expected, precision);
      assert.ok(expected > 0);
    } finally {
      await engine.close();
    }
  }
  await assert.rejects(
    LocalEngine.open(dir, { kvCacheBytes: -1 }),
    /kvCacheBytes must be a non-negative integer, got -1/,
  );
});
