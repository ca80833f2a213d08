// The Sampler and Scorer contracts (src/engine/types.ts, docs/engine.md "Conformance suite") as
// tests any backend runs by calling samplerContract / scorerContract with a factory of its own.

import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { PolicyVersion } from '../../src/engine/policy-version.js';
import type { GenerationEvent, Sampler, SamplingParams, Scorer } from '../../src/engine/types.js';

export interface SamplerFixture {
  sampler: Sampler;
  /** Scores under the sampler's versions (the same backend, or one that loads the same folders). */
  scorer: Scorer;
  /** Token ids the model takes; prompts are drawn below this. */
  vocab: number;
  /** The version new requests run on (the suite updates it after its use()). */
  servingVersion: number;
  /** A new policy version with other weights, numbered after every earlier one, for sampler.use. */
  nextVersion(): Promise<PolicyVersion>;
  /**
   * Requests the backend still runs, read without a round trip; a backend that cannot tell omits
   * it and the cancellation checks stop at what the stream shows.
   */
  inFlight?(): number;
  close(): Promise<void>;
}

type Finish = Extract<GenerationEvent, { type: 'finish' }>;

export interface Generated {
  ids: number[];
  logprobs: number[];
  finish: Finish;
  /** Every event in order, to check the stream's shape. */
  events: GenerationEvent[];
}

export async function collect(
  sampler: Sampler,
  promptIds: number[],
  params: SamplingParams,
  signal?: AbortSignal,
): Promise<Generated> {
  return read(sampler.generate(promptIds, params, signal));
}

/** Reads a stream to its end. */
export async function read(stream: AsyncIterable<GenerationEvent>): Promise<Generated> {
  const events: GenerationEvent[] = [];
  for await (const e of stream) events.push(e);
  const tokens = events.flatMap((e) => (e.type === 'token' ? [e.token] : []));
  const finish = events[events.length - 1];
  assert.ok(finish?.type === 'finish', 'the stream ends with a finish event');
  return { ids: tokens.map((t) => t.id), logprobs: tokens.map((t) => t.logprob), finish, events };
}

/** Resolves once `holds()` is true, checking every 10 ms; fails with `message` after 20 s. */
async function waitFor(holds: () => boolean, message: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!holds()) {
    if (Date.now() > deadline) assert.fail(message);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  assert.equal(a.length, b.length, 'lengths differ');
  return a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);
}

function promptOf(vocab: number, n: number, salt: number): number[] {
  return Array.from({ length: n }, (_, i) => (i * 37 + salt * 11 + 5) % vocab);
}

/**
 * Scores agree with what generation reported to this tolerance: the same weights, but a row of a
 * matrix product may be summed in another order with other rows beside it (docs/engine.md).
 */
export const SCORE_TOLERANCE = 1e-4;

export interface ContractOptions {
  /**
   * How far scores may be from what generation reported, when a backend's numerics force a looser
   * bound than SCORE_TOLERANCE (say why where it is given).
   */
  scoreTolerance?: number;
}

function withFixture(open: () => Promise<SamplerFixture>): () => SamplerFixture {
  let f: SamplerFixture | null = null;
  before(async () => {
    f = await open();
  });
  after(async () => {
    await f?.close();
  });
  return () => f ?? assert.fail('the fixture did not open');
}

export function samplerContract(
  name: string,
  open: () => Promise<SamplerFixture>,
  options: ContractOptions = {},
): void {
  const tolerance = options.scoreTolerance ?? SCORE_TOLERANCE;
  describe(`Sampler contract: ${name}`, () => {
    const fixture = withFixture(open);

    test('a stream is tokens, then exactly one finish naming the version and the counts', async () => {
      const f = fixture();
      const prompt = promptOf(f.vocab, 7, 1);
      const g = await collect(f.sampler, prompt, { maxTokens: 6, seed: 3, stopTokenIds: [] });
      assert.equal(g.events.filter((e) => e.type === 'finish').length, 1);
      assert.ok(g.events.slice(0, -1).every((e) => e.type === 'token'));
      assert.equal(g.finish.version, f.servingVersion);
      assert.equal(g.finish.promptTokens, prompt.length);
      assert.equal(g.finish.completionTokens, g.ids.length);
      assert.ok(g.ids.length >= 1 && g.ids.length <= 6);
      assert.ok(g.finish.reason === 'length' ? g.ids.length === 6 : g.finish.reason === 'stop_token');
      for (const lp of g.logprobs) assert.ok(Number.isFinite(lp) && lp <= 0, `log-prob ${lp}`);
    });

    test('a seeded request is reproducible; another seed samples otherwise', async () => {
      const f = fixture();
      const prompt = promptOf(f.vocab, 9, 2);
      const params = (seed: number): SamplingParams => ({ maxTokens: 12, temperature: 1.5, seed, stopTokenIds: [] });
      const [a, b] = [await collect(f.sampler, prompt, params(5)), await collect(f.sampler, prompt, params(5))];
      assert.deepEqual(b.ids, a.ids);
      assert.ok(maxAbsDiff(a.logprobs, b.logprobs) <= SCORE_TOLERANCE);
      const others = await Promise.all([6, 7, 8].map((s) => collect(f.sampler, prompt, params(s))));
      assert.ok(
        others.some((o) => o.ids.join() !== a.ids.join()),
        'three other seeds all gave the same sample: the seed is ignored',
      );
    });

    test('aborting ends the stream with a cancelled finish; breaking out cancels too', async () => {
      const f = fixture();
      const long: SamplingParams = { maxTokens: 1000, seed: 1, stopTokenIds: [] };
      const controller = new AbortController();
      const events: GenerationEvent[] = [];
      for await (const e of f.sampler.generate(promptOf(f.vocab, 5, 3), long, controller.signal)) {
        events.push(e);
        if (events.length === 2) controller.abort();
      }
      const last = events[events.length - 1]!;
      assert.ok(last.type === 'finish' && last.reason === 'cancelled', `ended with ${JSON.stringify(last)}`);
      // Tokens already sampled when the cancel reaches the engine still arrive, and how many
      // depends on the decode speed (the tiny model's went from about 20 to about 50 when its
      // kernels got faster): the bound says the cancel took effect long before the 1000 tokens.
      assert.ok(events.length < 250, `${events.length} events after the abort (of up to 1000)`);

      let n = 0;
      for await (const e of f.sampler.generate(promptOf(f.vocab, 5, 4), long))
        if (e.type === 'token' && ++n === 3) break;
      // A request sent after the break completes; the broken one, had it not been cancelled, would
      // still run (1000 tokens), so the backend's in-flight count shows it.
      const after = await collect(f.sampler, promptOf(f.vocab, 5, 5), { maxTokens: 2, seed: 2, stopTokenIds: [] });
      assert.ok(after.ids.length >= 1);
      if (f.inFlight) assert.equal(f.inFlight(), 0, 'the generation broken out of still runs');
    });

    test('generate() starts at once; a stream aborted before it is read ends cancelled, and one never read frees its place', async () => {
      const f = fixture();
      const long: SamplingParams = { maxTokens: 1000, seed: 3, stopTokenIds: [] };
      // As serve does: asked for, then stopped before reading (a request refused while it was recorded).
      const controller = new AbortController();
      const stream = f.sampler.generate(promptOf(f.vocab, 5, 6), long, controller.signal);
      if (f.inFlight) {
        const inFlight = f.inFlight;
        await waitFor(() => inFlight() > 0, 'generate() did not start the generation before its stream was read');
      }
      controller.abort();
      const stopped = await read(stream);
      assert.equal(stopped.finish.reason, 'cancelled');
      assert.ok(stopped.ids.length < 250, `${stopped.ids.length} tokens after the abort (of up to 1000)`);
      // More streams than any backend here runs at once, aborted and never read: each must give its
      // place back, or the request after them waits forever.
      for (let i = 0; i < 10; i++) {
        const c = new AbortController();
        f.sampler.generate(promptOf(f.vocab, 5, 10 + i), long, c.signal);
        c.abort();
      }
      const after = await collect(f.sampler, promptOf(f.vocab, 5, 7), { maxTokens: 2, seed: 2, stopTokenIds: [] });
      assert.equal(after.finish.reason, 'length');
      if (f.inFlight) {
        const inFlight = f.inFlight;
        await waitFor(() => inFlight() === 0, 'the aborted streams nobody read still run');
      }
    });

    test('use(v) switches new requests; one in flight finishes on its version, with its weights', async () => {
      const f = fixture();
      const prompt = promptOf(f.vocab, 6, 6);
      const old = f.servingVersion;
      const next = await f.nextVersion();
      const events: GenerationEvent[] = [];
      let switched = false;
      let tokensBeforeSwitch = -1;
      const inFlight = (async () => {
        for await (const e of f.sampler.generate(prompt, { maxTokens: 200, seed: 4, stopTokenIds: [] })) {
          events.push(e);
          if (events.length === 1) {
            await f.sampler.use(next);
            switched = true;
            tokensBeforeSwitch = events.length;
          }
        }
      })();
      await inFlight;
      assert.ok(switched);
      const finish = events[events.length - 1]!;
      assert.ok(finish.type === 'finish');
      assert.equal(finish.version, old, 'the request in flight finishes on the version it started on');
      assert.ok(events.length > tokensBeforeSwitch + 1, 'the request was over before the switch; nothing was shown');
      const ids = events.flatMap((e) => (e.type === 'token' ? [e.token.id] : []));
      const reported = events.flatMap((e) => (e.type === 'token' ? [e.token.logprob] : []));
      const underOld = await f.scorer.logprobs(prompt, ids, { version: old });
      assert.ok(maxAbsDiff(reported, underOld.logprobs) <= tolerance, 'its tokens came from the old weights');

      const fresh = await collect(f.sampler, prompt, { maxTokens: 8, seed: 4, stopTokenIds: [] });
      assert.equal(fresh.finish.version, next.version, 'a new request runs on the new version');
      const underNew = await f.scorer.logprobs(prompt, fresh.ids, { version: next.version });
      assert.ok(maxAbsDiff(fresh.logprobs, underNew.logprobs) <= tolerance);
      const againOld = await f.scorer.logprobs(prompt, fresh.ids, { version: old });
      assert.ok(maxAbsDiff(underNew.logprobs, againOld.logprobs) > 1e-3, 'the new version has the old weights');
      f.servingVersion = next.version;
    });

    test('use() of a folder that holds no version rejects, and requests stay on the serving version', async () => {
      const f = fixture();
      const missing = join(tmpdir(), `ocrl-contract-missing-${process.pid}`, 'v-1000');
      await assert.rejects(f.sampler.use({ version: 1000, kind: 'lora', path: missing }), /v-1000/);
      const g = await collect(f.sampler, promptOf(f.vocab, 4, 7), { maxTokens: 2, seed: 1, stopTokenIds: [] });
      assert.equal(g.finish.version, f.servingVersion);
    });
  });
}

export function scorerContract(name: string, open: () => Promise<SamplerFixture>, options: ContractOptions = {}): void {
  const tolerance = options.scoreTolerance ?? SCORE_TOLERANCE;
  describe(`Scorer contract: ${name}`, () => {
    const fixture = withFixture(open);

    test(`logprobs of a generated completion equal those generate reported (within ${tolerance})`, async () => {
      const f = fixture();
      for (const [temperature, seed] of [
        [1, 11],
        [0.7, 12],
        [0, 13],
      ] as const) {
        const prompt = promptOf(f.vocab, 8, seed);
        const g = await collect(f.sampler, prompt, { maxTokens: 10, temperature, seed, stopTokenIds: [] });
        const scored = await f.scorer.logprobs(prompt, g.ids, { version: g.finish.version });
        assert.equal(scored.logprobs.length, g.ids.length);
        const d = maxAbsDiff(g.logprobs, scored.logprobs);
        assert.ok(d <= tolerance, `temperature ${temperature}: differ by ${d}`);
      }
    });

    test('topK: the k most likely ids per position, sorted, the scored id never above the first', async () => {
      const f = fixture();
      const prompt = promptOf(f.vocab, 5, 21);
      const completion = promptOf(f.vocab, 4, 22);
      const scored = await f.scorer.logprobs(prompt, completion, { topK: 3, version: 0 });
      assert.equal(scored.top?.length, completion.length);
      scored.top!.forEach((top, i) => {
        assert.equal(top.length, 3);
        assert.ok(top[0]!.logprob >= top[1]!.logprob && top[1]!.logprob >= top[2]!.logprob);
        assert.ok(scored.logprobs[i]! <= top[0]!.logprob + 1e-6);
        const self = top.find((t) => t.id === completion[i]);
        if (self) assert.ok(Math.abs(self.logprob - scored.logprobs[i]!) <= 1e-6);
      });
    });
  });
}
