// The prefix cache inside the scheduler, stepped by hand (no worker thread), next to the same
// requests on a scheduler without it: what is copied and what computed (exact token counts),
// waiting for a job in flight that computes a shared prompt, the step budget, retirement of a
// version's entries once no request runs on it, and identical samples with the cache on and off.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { type ForwardSegment, Transformer } from '../src/engine/local/model/transformer.js';
import { loadWeights, paramStoreOver, type ParamStore } from '../src/engine/local/model/weights.js';
import { PrefixCache } from '../src/engine/local/runtime/prefix-cache.js';
import {
  createPrefixCacheStatsBuffer,
  PrefixCacheCounters,
  readPrefixCacheStats,
} from '../src/engine/local/runtime/prefix-cache-stats.js';
import type { ResolvedSampling } from '../src/engine/local/runtime/protocol.js';
import { type PolicyWeights, Scheduler } from '../src/engine/local/runtime/scheduler.js';
import { Lora } from '../src/engine/local/train/lora.js';
import { makeTinyModel, maxAbsDiff } from './helpers/models.js';
import { perturbedWeightsUpdate, randomLoraUpdate } from './helpers/policy-updates.js';

const dir = makeTinyModel({ family: 'qwen3', seed: 17, shape: { maxPositionEmbeddings: 4096 } });
const { config: cfg } = readModelFolder(dir);
const kernels = loadKernels();
const params: ParamStore = loadWeights(dir, cfg);
const STEP_TOKENS = 128;

/** A scheduler over its own transformer (so a spy on it sees only this scheduler's steps). */
function newScheduler(cacheBytes: number) {
  const stats = createPrefixCacheStatsBuffer();
  const prefix = new PrefixCache(cacheBytes, new PrefixCacheCounters(stats));
  const model = new Transformer(cfg, params, kernels);
  /** Tokens each forward call computed. */
  const forwards: number[] = [];
  const forward = model.forward.bind(model);
  model.forward = (segments: readonly ForwardSegment[]) => {
    forwards.push(segments.reduce((n, s) => n + s.tokens.length, 0));
    return forward(segments);
  };
  const base: PolicyWeights = { version: 0, model, lora: null };
  // No eos ids: every generation runs to maxTokens.
  const scheduler = new Scheduler(base, cfg, [], () => ({ push: () => '' }), STEP_TOKENS, null, prefix);
  return { scheduler, prefix, base, forwards, stats: () => readPrefixCacheStats(stats) };
}

type Harness = ReturnType<typeof newScheduler>;

interface Outcome {
  ids: number[];
  logprobs: number[];
  version?: number;
}

/** Steps until idle (failing instead of spinning if that never happens); returns each job's outcome. */
function drain(h: Harness, out = new Map<number, Outcome>(), maxSteps = 2000): Map<number, Outcome> {
  const get = (id: number) => out.get(id) ?? out.set(id, { ids: [], logprobs: [] }).get(id)!;
  for (let steps = 0; !h.scheduler.idle; steps++) {
    assert.ok(steps < maxSteps, `still busy after ${maxSteps} steps`);
    const before = h.forwards.length;
    const step = h.scheduler.step();
    const tokens = h.forwards.slice(before).reduce((a, b) => a + b, 0);
    assert.ok(tokens <= STEP_TOKENS, `a step computed ${tokens} tokens, the budget is ${STEP_TOKENS}`);
    for (const { id, event } of step.events) {
      if (event.type === 'finish') get(id).version = event.version;
      else {
        get(id).ids.push(event.token.id);
        get(id).logprobs.push(event.token.logprob);
      }
    }
    for (const { id, result } of step.scored) get(id).logprobs.push(...result.logprobs);
  }
  return out;
}

const sampling = (seed: number, maxTokens: number, version: number | null = null): ResolvedSampling => ({
  temperature: 1,
  topP: 1,
  topK: 0,
  maxTokens,
  stop: [],
  stopTokenIds: [],
  seed,
  topLogprobs: 0,
  version,
});
const tokens = (n: number, salt: number) =>
  Array.from({ length: n }, (_, i) => ((i + 1) * (salt * 2 + 7) + salt * 31) % 500);

/**
 * Different prefill chunkings and batch sizes do not give bit-identical results (see
 * prefix-cache-exactness.test.ts): ids must match exactly, log-probs to 1e-5.
 */
function assertSameOutcomes(cached: Map<number, Outcome>, plain: Map<number, Outcome>): void {
  assert.deepEqual([...cached.keys()].sort(), [...plain.keys()].sort());
  for (const [id, a] of cached) {
    const b = plain.get(id)!;
    assert.deepEqual(a.ids, b.ids, `request ${id}: sampled ids`);
    assert.equal(a.version, b.version, `request ${id}: version`);
    assert.ok(
      maxAbsDiff(a.logprobs, b.logprobs) < 1e-5,
      `request ${id}: log-probs differ by ${maxAbsDiff(a.logprobs, b.logprobs)}`,
    );
  }
}

test('concurrent requests sharing a prompt: the first computes it, the others wait for it and copy; steps stay within budget', () => {
  const system = tokens(600, 1);
  const add = (h: Harness) => {
    for (const [id, seed] of [
      [1, 11],
      [2, 12],
      [3, 13],
    ] as const)
      h.scheduler.addGeneration(id, system, sampling(seed, 8));
    h.scheduler.addGeneration(4, [...system.slice(0, 400), ...tokens(200, 2)], sampling(14, 8));
    h.scheduler.addScore(5, system.slice(0, 500), tokens(20, 3), 0, 0);
  };
  const on = newScheduler(1 << 26),
    off = newScheduler(0);
  add(on);
  add(off);
  const cached = drain(on),
    plain = drain(off);
  assertSameOutcomes(cached, plain);
  // Generations 2 and 3 copy 599 rows from 1 and compute the last prompt token; 4 waits until 1
  // has passed their shared 400 tokens and computes its own 200; the score copies 499 of its 500
  // prompt tokens and computes the last one and 19 completion tokens (the last is never fed).
  assert.equal(on.stats().hitTokens, 599 + 599 + 400 + 499);
  assert.equal(on.stats().missTokens, 600 + 1 + 1 + 200 + 20);
  assert.equal(off.stats().hitTokens, 0);
  assert.equal(off.stats().missTokens, 3 * 600 + 600 + 519);
  assert.ok(
    on.forwards.length < off.forwards.length,
    `${on.forwards.length} steps with the cache, ${off.forwards.length} without`,
  );
});

test('a growing session computes only its new tokens: prompt, answer (but its last token), new message', () => {
  const on = newScheduler(1 << 26),
    off = newScheduler(0);
  const run = (h: Harness) => {
    const p1 = tokens(300, 4);
    h.scheduler.addGeneration(1, p1, sampling(21, 20));
    const turn1 = drain(h);
    const p2 = [...p1, ...turn1.get(1)!.ids, ...tokens(50, 5)];
    h.scheduler.addGeneration(2, p2, sampling(22, 20));
    drain(h, turn1);
    // The teacher's kind of request: the same conversation, scored with a completion.
    h.scheduler.addScore(3, [...p2, ...turn1.get(2)!.ids.slice(0, 10)], tokens(15, 6), 0, 0);
    return drain(h, turn1);
  };
  const cached = run(on);
  assertSameOutcomes(cached, run(off));
  // Turn 2 copies turn 1's prompt and answer but its last token; the score, all its prompt but the last token.
  assert.equal(on.stats().hitTokens, 300 + 20 - 1 + (380 - 1));
  assert.equal(on.stats().missTokens, 300 + 51 + (1 + 14));
  assert.equal(on.stats().entries, 2, "turn 1's entry went: turn 2's starts with it");
});

test('a job waiting on one that is cancelled takes what that one computed and goes on', () => {
  const on = newScheduler(1 << 26),
    off = newScheduler(0);
  const prompt = tokens(600, 7);
  on.scheduler.addGeneration(1, prompt, sampling(31, 50));
  on.scheduler.addGeneration(2, prompt, sampling(32, 6));
  on.scheduler.step();
  on.scheduler.cancel(1);
  const cached = drain(on);
  assert.equal(cached.get(1)!.ids.length, 0);
  assert.equal(on.stats().hitTokens, STEP_TOKENS, "the cancelled job's computed rows were handed over");
  assert.equal(on.stats().missTokens, 600);
  off.scheduler.addGeneration(2, prompt, sampling(32, 6));
  assertSameOutcomes(new Map([[2, cached.get(2)!]]), drain(off));
});

/** What the worker builds from a publication (runtime/worker.ts, policyOf). */
function loraPolicy(base: PolicyWeights, version: number, seed: number): PolicyWeights {
  const u = randomLoraUpdate(cfg, version, seed);
  return { version, model: base.model, lora: new Lora(cfg, u.spec, u.data) };
}

function fullPolicy(version: number, seed: number): PolicyWeights {
  const u = perturbedWeightsUpdate(params.data, version, seed);
  const weights = paramStoreOver(params.specs, new Float32Array(u.params));
  return { version, model: new Transformer(cfg, weights, kernels), lora: null };
}

test("entries serve their own version; a published version's entries go once no request runs on it; version 0 stays", () => {
  const h = newScheduler(1 << 26);
  const prompt = tokens(200, 8);
  const entryLength = (version: number) => h.prefix.longest(version, [...prompt, 0], prompt.length)?.length ?? 0;
  h.scheduler.addGeneration(1, prompt, sampling(41, 4));
  drain(h);
  assert.equal(entryLength(0), 200);

  h.scheduler.publish(loraPolicy(h.base, 1, 5));
  h.scheduler.addGeneration(2, prompt, sampling(42, 4));
  const v1 = drain(h);
  assert.equal(v1.get(2)!.version, 1);
  assert.equal(h.stats().hitTokens, 0, "version 1 cannot use version 0's keys and values");
  assert.equal(entryLength(1), 200);
  assert.equal(entryLength(0), 200, 'version 0, the frozen base, lives on');

  // A request still running on version 1 keeps its entries through the next publication.
  h.scheduler.addGeneration(3, prompt, sampling(43, 30));
  h.scheduler.step();
  assert.equal(h.stats().hitTokens, 199);
  h.scheduler.publish(fullPolicy(2, 6));
  assert.equal(entryLength(1), 200, 'kept while a request runs on version 1');
  h.scheduler.addGeneration(4, prompt, sampling(44, 4));
  const rest = drain(h);
  assert.equal(rest.get(3)!.version, 1);
  assert.equal(rest.get(4)!.version, 2);
  assert.equal(entryLength(1), 0, 'retired with the last request on version 1');
  assert.equal(entryLength(2), 200);
  assert.equal(entryLength(0), 200);
  assert.deepEqual(h.scheduler.liveVersions, [0, 2]);
  assert.equal(h.stats().entries, 2);

  // Scoring on the base (the teacher) uses version 0's entry.
  h.scheduler.addScore(5, prompt, tokens(5, 9), 0, 0);
  drain(h);
  assert.equal(h.stats().hitTokens, 199 + 199);
});
