// Publication under load. Several clients stream chat completions without pause from a real
// Gateway over the embedded engine, while a real LocalLearner trains small batches of the turns
// they just produced and publishes ten versions to the engine (learner.publishTo). The issue's
// requirement: publication never rejects or stalls a request; new requests get the new version,
// in-flight ones finish on theirs; every turn records its version.
//
// Checked:
//   - every request answers 200 and its SSE stream ends with a finish chunk and [DONE], with no
//     error event, and every token reaches the client (the logprob entries add up to the ids);
//   - a generation that had tokens before publication k was posted to the engine runs on a
//     version < k; a request sent after publication k resolved runs on >= k;
//   - every publication lands mid-stream: some generation has tokens from before the swap and
//     after it, and it finishes on its starting version;
//   - one version per request, token by token: each recorded turn's per-token log-probs are
//     re-scored under its recorded version by a second engine given the same ten updates and
//     agree to 1e-4, while the neighbouring versions are far off; a generation that switched
//     weights part-way would fail this;
//   - every version 0..10 serves turns (each batch is trained on turns of the serving version);
//   - no stall beyond one decode step, and swaps far below one decode step (see stallCheck).
//
// Ordering is judged on the main thread, where the engine's messages arrive in the order its
// worker sent them: the sampler is wrapped to time-stamp every token event as it arrives, and
// engine.publish to time-stamp the post and the `published` reply. A token stamped after the
// reply was generated after the swap; a generation with a token stamped before the post was
// added to the scheduler before the publication.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chatBackendOf, loadChatModel } from '../src/cli/chat-model.js';
import { LocalEngine } from '../src/engine/local/engine.js';
import { LocalLearner, type Publication } from '../src/engine/local/learner.js';
import { DEFAULT_ADAMW } from '../src/engine/local/train/optimizer.js';
import type { GenerationEvent, PolicyUpdate, Sampler, TrainingSample } from '../src/engine/types.js';
import type { Turn } from '../src/types.js';
import { startGateway, tinyModel } from './helpers/gateway.js';
import { maxAbsDiff } from './helpers/models.js';
import { DEFAULT_PPO, trainBatch } from '../src/learn/ppo.js';

const CLIENTS = 4;
const PUBLICATIONS = 10;
const MAX_TOKENS = 240;
/** A publication waits until this many generations are running with 1..MAX_TOKENS/2 tokens so far. */
const IN_FLIGHT = 2;
/** Finished turns of the serving version that each batch is made of. */
const TURNS_PER_VERSION = 2;
const WAIT_MS = 120_000;

/** Token-bearing SSE events that one read of the socket delivered. */
interface Arrival {
  t: number;
  tokens: number;
}

interface StreamRecord {
  index: number;
  /** performance.now() just before fetch(). */
  sentAt: number;
  status: number;
  contentType: string | null;
  turnId: string | null;
  arrivals: Arrival[];
  events: unknown[];
  done: boolean;
  finishReason: string | null;
  errorEvents: unknown[];
  finishedAt: number | null;
}

/** One engine generation as the gateway's thread saw it: when each token event arrived. */
interface GenerationRecord {
  tokenTimes: number[];
  version: number | null;
}

interface PublicationRecord extends Publication {
  calledAt: number;
  /** engine.publish called (the update posted to the worker) and its reply handled. */
  postedAt: number;
  resolvedAt: number;
  update: PolicyUpdate;
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const quantile = (xs: readonly number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
const round = (x: number, digits = 2) => +x.toFixed(digits);
const tokensOf = (s: StreamRecord) => s.arrivals.reduce((n, a) => n + a.tokens, 0);
/** Each request carries seed 1000 + its index, which is how its generation is found. */
const seedOf = (index: number) => 1000 + index;

/**
 * The engine as the gateway's Sampler, with every event time-stamped the moment it arrives on
 * this thread: the inner iterator is drained eagerly (its next() resolves within the message
 * event that delivered the token) and the events are handed on from a queue.
 */
function timedSampler(inner: Sampler, generations: Map<number, GenerationRecord>): Sampler {
  return {
    use: (version) => inner.use(version),
    generate(promptIds, params, signal) {
      const record: GenerationRecord = { tokenTimes: [], version: null };
      generations.set(params.seed!, record);
      const it = inner.generate(promptIds, params, signal)[Symbol.asyncIterator]();
      const queue: IteratorResult<GenerationEvent>[] = [];
      // Typed through `as`: the drain below is an IIFE, which TypeScript would narrow these to null in.
      let failure = null as unknown;
      let wake = null as (() => void) | null;
      void (async () => {
        try {
          for (;;) {
            const r = await it.next();
            if (!r.done && r.value.type === 'token') record.tokenTimes.push(performance.now());
            if (!r.done && r.value.type === 'finish') record.version = r.value.version;
            queue.push(r);
            wake?.();
            if (r.done) return;
          }
        } catch (e) {
          failure = e;
          wake?.();
        }
      })();
      return {
        async *[Symbol.asyncIterator]() {
          for (;;) {
            while (queue.length > 0) {
              const r = queue.shift()!;
              if (r.done) return;
              yield r.value;
            }
            if (failure) throw failure;
            await new Promise<void>((resolve) => {
              wake = resolve;
            });
            wake = null;
          }
        },
      };
    },
  };
}

/** The clients: each sends one streamed request after another until stopped. */
class Load {
  readonly streams: StreamRecord[] = [];
  private readonly waiters = new Set<() => void>();
  private stopping = false;
  private clients: Promise<void>[] = [];

  constructor(private readonly url: string) {}

  start(n: number): void {
    this.clients = Array.from({ length: n }, (_, c) => this.client(c));
  }

  /** Lets running streams finish normally (nothing is cancelled) and waits for every client. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.clients);
  }

  /** Resolves once `ok()` holds, re-checked after every read of any stream; rejects after WAIT_MS. */
  until(ok: () => boolean, what: string): Promise<void> {
    if (ok()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}`));
      }, WAIT_MS);
      const check = () => {
        if (!ok()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      this.waiters.add(check);
    });
  }

  private changed(): void {
    for (const w of [...this.waiters]) w();
  }

  private async client(c: number): Promise<void> {
    for (let round = 0; !this.stopping; round++) await this.one(this.streams.length, c, round);
  }

  private async one(index: number, client: number, round: number): Promise<void> {
    const s: StreamRecord = {
      index,
      sentAt: performance.now(),
      status: 0,
      contentType: null,
      turnId: null,
      arrivals: [],
      events: [],
      done: false,
      finishReason: null,
      errorEvents: [],
      finishedAt: null,
    };
    this.streams.push(s);
    try {
      const res = await fetch(`${this.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-turn-type': 'main', 'x-session-id': `load-${index}` },
        body: JSON.stringify({
          messages: [
            {
              role: 'user',
              content: `Client ${client}, round ${round}: tell me a long story about the number ${index}.`,
            },
          ],
          stream: true,
          logprobs: true,
          max_tokens: MAX_TOKENS,
          temperature: 1,
          top_p: 1,
          seed: seedOf(index),
          // The random model samples <tool_call> now and then; the gateway holds a tool call back
          // until it closes, which would hide the token timing (a hold is not a stall). Stopping
          // there keeps every stream token by token.
          stop: ['<tool_call>'],
        }),
      });
      s.status = res.status;
      s.contentType = res.headers.get('content-type');
      s.turnId = res.headers.get('x-turn-id');
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        const t = performance.now();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let tokens = 0;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!block.startsWith('data: ')) continue;
          const data = block.slice(6);
          if (data === '[DONE]') {
            s.done = true;
            s.events.push(data);
            continue;
          }
          const e = JSON.parse(data) as {
            error?: unknown;
            choices?: { finish_reason: string | null; logprobs: { content: unknown[] } | null }[];
          };
          s.events.push(e);
          if (e.error) s.errorEvents.push(e);
          const choice = e.choices?.[0];
          tokens += choice?.logprobs?.content.length ?? 0;
          if (choice?.finish_reason) s.finishReason = choice.finish_reason;
        }
        if (tokens > 0) s.arrivals.push({ t, tokens });
        this.changed();
      }
    } catch (e) {
      s.errorEvents.push(String(e));
    }
    s.finishedAt = performance.now();
    this.changed();
  }
}

/**
 * "No stall beyond one decode step", from the clients' side.
 *
 * Per stream, a gap is the time between two consecutive reads that delivered tokens (the time to
 * the first token is left out: that is queueing and prefill, not decoding). The scheduler gives
 * every running generation one token per step, so a gap is normally one decode step as the
 * client experiences it: the worker's step, the message to the main thread, the gateway, HTTP.
 * When the main thread falls behind, one read delivers several tokens and the gap covers
 * several steps; that is real waiting and is counted as it is.
 *
 * `step` is the median gap of reads that brought exactly one token, over the whole run: the
 * typical decode step under this run's own load, measured at the same time as the publications,
 * so nothing assumes how fast this machine is. The median ignores the occasional hiccup of a
 * loaded machine, which a mean or a maximum would not.
 *
 * A publication's window runs from engine.publish being called to its reply being handled; every
 * gap that overlaps a window spans that swap. A publication that stalled serving (weights copied
 * on a serving thread, in-flight requests drained first, requests refused and retried) shows as
 * such gaps many steps long, and at every publication. `bound` = max(5 * step, step + 250 ms)
 * leaves room for a time slice or two lost to other processes on a two-core machine.
 *
 * On a shared two-core machine other processes can also hold both cores for hundreds of ms at any
 * moment (runs here saw gaps of 450-650 ms away from any publication), and nothing tells such a
 * hiccup from a stall when it falls in a publication's window. Two assertions keep the test
 * sharp and steady:
 *   - systematic: the median over the ten publications of each one's worst spanning gap is below
 *     `bound`. A stall that publishing causes happens at every publication; a hiccup at one or
 *     two does not move the median. A 300 ms pause injected into the worker's publish fails
 *     this (median about 310 ms against a bound of about 252 ms).
 *   - every publication: its worst spanning gap is below 2 * max(bound, the worst control gap),
 *     the control gaps being those of the same run that span no publication and fall outside
 *     training (the conditions of a publication's window, which never overlaps training here).
 *     A publication may not be an outlier far beyond what the machine did on its own in the same
 *     run. A one-off stall shorter than that (e.g. 300 ms at a single publication on a quiet
 *     machine) is, by design, not told apart from a hiccup.
 *
 * The swap itself (Publication.swapMs, timed by the worker between two steps) must be far below
 * one decode step. It is wall time, so a worker preempted in the middle of it reports the
 * preemption too: the median swap is held to one step, every swap to `bound`.
 */
function stallCheck(
  streams: readonly StreamRecord[],
  pubs: readonly PublicationRecord[],
  training: readonly [number, number][],
) {
  const gaps: { from: number; to: number; tokens: number }[] = [];
  for (const s of streams) {
    for (let i = 1; i < s.arrivals.length; i++)
      gaps.push({ from: s.arrivals[i - 1]!.t, to: s.arrivals[i]!.t, tokens: s.arrivals[i]!.tokens });
  }
  const len = (g: (typeof gaps)[number]) => g.to - g.from;
  const overlaps = (g: (typeof gaps)[number], [a, b]: readonly [number, number]) => g.from <= b && g.to >= a;
  const step = median(gaps.filter((g) => g.tokens === 1).map(len));
  const spanning = gaps.filter((g) => pubs.some((p) => overlaps(g, [p.postedAt, p.resolvedAt])));
  const rest = gaps.filter((g) => !spanning.includes(g));
  const duringTraining = rest.filter((g) => training.some((w) => overlaps(g, w))).map(len);
  const control = rest.filter((g) => !training.some((w) => overlaps(g, w))).map(len);
  const perPublication = pubs
    .map((p) => spanning.filter((g) => overlaps(g, [p.postedAt, p.resolvedAt])).map(len))
    .map((xs) => (xs.length > 0 ? Math.max(...xs) : null));
  const measured = perPublication.filter((x): x is number => x !== null);
  return {
    step,
    bound: Math.max(5 * step, step + 250),
    worst: Math.max(...measured),
    medianWorst: median(measured),
    perPublication,
    gaps: gaps.length,
    spanning: spanning.length,
    controlMedian: median(control),
    controlP99: quantile(control, 0.99),
    controlMax: Math.max(...control),
    trainingP99: duringTraining.length ? quantile(duringTraining, 0.99) : NaN,
    trainingMax: Math.max(...duringTraining),
  };
}

test('ten publications under continuous streaming load: no failure, no stall, each request on one version, new requests on the new one', async (t) => {
  const modelDir = tinyModel();
  const model = await loadChatModel(modelDir, { threads: 1 });
  const engine = model.engine;
  const generations = new Map<number, GenerationRecord>();
  // Every token written as it comes: a stream interval would hold tokens back on purpose and blur
  // the client-side gaps this test reads stalls from.
  const gw = await startGateway(
    { ...chatBackendOf(model, 'tiny'), sampler: timedSampler(engine, generations) },
    { streamIntervalMs: 0 },
  );
  // A large learning rate so that consecutive versions are far apart in log-prob (see the re-scoring).
  const learner = await LocalLearner.open(engine, {
    config: {
      mode: { kind: 'lora', spec: { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] } },
      optimizer: { ...DEFAULT_ADAMW, lr: 2e-2 },
    },
    threads: 1,
    maxYieldMs: 20,
  });
  let scorer: LocalEngine | undefined;
  t.after(async () => {
    await learner.close();
    await gw.close();
    await engine.close();
    await scorer?.close();
  });

  // publishTo calls engine.publish with the update: note when, and when the engine's reply arrives.
  const posted: { postedAt: number; resolvedAt?: number; update: PolicyUpdate }[] = [];
  const publish = engine.publish.bind(engine);
  engine.publish = (update) => {
    const p: (typeof posted)[number] = { postedAt: performance.now(), update };
    posted.push(p);
    return publish(update).then((swapMs) => {
      p.resolvedAt = performance.now();
      return swapMs;
    });
  };

  const load = new Load(gw.url);
  const pubs: PublicationRecord[] = [];
  const training: [number, number][] = [];
  const turnOf = (s: StreamRecord): Turn => {
    const found = s.turnId === null ? undefined : gw.store.getTurn(s.turnId);
    assert.ok(found, `request ${s.index} (HTTP ${s.status}) has no recorded turn`);
    return found.turn;
  };
  const finishedSince = (at: number) => load.streams.filter((s) => s.sentAt > at && s.finishedAt !== null);
  // Judged from the engine's events, which the clients' reads may lag behind.
  const midway = () =>
    [...generations.values()].filter(
      (g) => g.version === null && g.tokenTimes.length > 0 && g.tokenTimes.length <= MAX_TOKENS / 2,
    );
  const t0 = performance.now();
  load.start(CLIENTS);
  for (let k = 1; k <= PUBLICATIONS; k++) {
    // The batch: turns of the serving version (sent after the last publication resolved).
    const since = pubs[k - 2]?.resolvedAt ?? -Infinity;
    await load.until(
      () => finishedSince(since).length >= TURNS_PER_VERSION,
      `${TURNS_PER_VERSION} turns on version ${k - 1}`,
    );
    const samples: TrainingSample[] = finishedSince(since)
      .slice(-TURNS_PER_VERSION)
      .map(turnOf)
      .map((turn) => ({
        promptIds: turn.promptIds,
        completionIds: turn.completionIds,
        advantages: turn.completionIds.map(() => 1),
        rolloutLogprobs: turn.logprobs,
        // Not the end-of-turn token: the shortest turns finish first and make the batches, and
        // rewarding their ends would teach the model to stop early, leaving no streams to publish under.
        mask: turn.completionIds.map((_, j) =>
          turn.finishReason !== 'length' && j === turn.completionIds.length - 1 ? 0 : 1,
        ),
      }));
    const trainFrom = performance.now();
    const [metrics] = await trainBatch(learner, samples, { ...DEFAULT_PPO, miniBatchSize: TURNS_PER_VERSION });
    training.push([trainFrom, performance.now()]);
    assert.ok(metrics!.applied, `batch ${k} was not applied`);

    // Publish while streams are part-way through.
    await load.until(() => midway().length >= IN_FLIGHT, `${IN_FLIGHT} streams part-way before publication ${k}`);
    const calledAt = performance.now();
    const pub = await learner.publishTo(engine);
    assert.equal(posted.length, k, 'publishTo hands its update to engine.publish');
    const { postedAt, resolvedAt, update } = posted[k - 1]!;
    pubs.push({ ...pub, calledAt, postedAt, resolvedAt: resolvedAt!, update });
    assert.equal(pub.version, k, 'versions are published in order 1..10');
    assert.equal(engine.version, k);
  }
  await load.until(
    () => finishedSince(pubs.at(-1)!.resolvedAt).length >= TURNS_PER_VERSION,
    `${TURNS_PER_VERSION} turns on version ${PUBLICATIONS}`,
  );
  await load.stop();
  const wallMs = performance.now() - t0;
  await gw.gateway.settled();

  const streams = load.streams;
  const stall = stallCheck(streams, pubs, training);
  const swaps = pubs.map((p) => p.swapMs);
  t.diagnostic(
    JSON.stringify({
      requests: streams.length,
      wallMs: Math.round(wallMs),
      tokens: streams.reduce((n, s) => n + tokensOf(s), 0),
      stepMedianMs: round(stall.step, 3),
      boundMs: round(stall.bound),
      worstSpanningMs: round(stall.worst),
      spanningGaps: stall.spanning,
      medianWorstSpanningMs: round(stall.medianWorst),
      perPublicationWorstMs: stall.perPublication.map((x) => (x === null ? null : round(x, 1))),
      gaps: stall.gaps,
      controlGaps: {
        medianMs: round(stall.controlMedian),
        p99Ms: round(stall.controlP99),
        maxMs: round(stall.controlMax),
      },
      trainingGaps: { p99Ms: round(stall.trainingP99), maxMs: round(stall.trainingMax) },
      swapMs: swaps.map((x) => round(x, 3)),
      swapMedianMs: round(median(swaps), 3),
      snapshotMs: pubs.map((p) => round(p.snapshotMs, 1)),
      publishToMs: pubs.map((p) => round(p.resolvedAt - p.calledAt, 1)),
    }),
  );

  // Every request: 200, a complete stream, every token delivered, a recorded turn.
  const turns = new Map<number, Turn>();
  for (const s of streams) {
    assert.equal(s.status, 200, `request ${s.index}: HTTP ${s.status}`);
    assert.match(s.contentType ?? '', /^text\/event-stream/);
    assert.deepEqual(s.errorEvents, [], `request ${s.index}: errors`);
    assert.ok(s.done && s.events.at(-1) === '[DONE]', `request ${s.index} did not end with [DONE]`);
    assert.ok(
      s.finishReason === 'stop' || s.finishReason === 'length',
      `request ${s.index}: finish_reason ${s.finishReason}`,
    );
    const turn = turnOf(s);
    assert.equal(tokensOf(s), turn.completionIds.length, `request ${s.index}: streamed tokens vs recorded ids`);
    assert.equal(
      turn.policyVersion,
      generations.get(seedOf(s.index))!.version,
      `request ${s.index}: recorded version vs the engine's finish event`,
    );
    turns.set(s.index, turn);
  }

  // New requests get the new version; in-flight ones finish on theirs.
  const landedMidStream: number[] = [];
  for (const p of pubs) {
    const across: number[] = [];
    for (const s of streams) {
      const v = turns.get(s.index)!.policyVersion;
      const times = generations.get(seedOf(s.index))!.tokenTimes;
      if (times.length > 0 && times[0]! < p.postedAt) {
        assert.ok(
          v < p.version,
          `request ${s.index} had tokens before publication ${p.version} was posted but ran on version ${v}`,
        );
        if (times.at(-1)! > p.resolvedAt) across.push(s.index);
      }
      if (s.sentAt > p.resolvedAt)
        assert.ok(
          v >= p.version,
          `request ${s.index} was sent after publication ${p.version} resolved but ran on version ${v}`,
        );
    }
    if (across.length > 0) landedMidStream.push(p.version);
  }
  // Publications are timed for streams part-way, but on a loaded two-core machine the streams seen
  // part-way can all finish before the update reaches the engine (about 1 run in 12, always the
  // first publication, whose snapshot is the slowest). Such a publication tests nothing about
  // in-flight requests; most must land mid-stream.
  assert.ok(
    landedMidStream.length >= PUBLICATIONS - 2,
    `only publications ${landedMidStream.join(', ')} landed while a generation was part-way`,
  );
  const versions = [...new Set([...turns.values()].map((x) => x.policyVersion))].sort((a, b) => a - b);
  assert.deepEqual(
    versions,
    Array.from({ length: PUBLICATIONS + 1 }, (_, v) => v),
    'every version 0..10 served turns',
  );

  // One version per request, token by token: re-score every turn under its version and its neighbours.
  scorer = await LocalEngine.open(modelDir, { threads: 1 });
  const own = new Map<number, number>();
  const neighbour = new Map<number, number>();
  for (let v = 0; v <= PUBLICATIONS; v++) {
    if (v > 0) await scorer.publish(pubs[v - 1]!.update);
    for (const [i, turn] of turns) {
      if (Math.abs(turn.policyVersion - v) > 1 || turn.completionIds.length === 0) continue;
      const diff = maxAbsDiff(
        (await scorer.logprobs(turn.promptIds, turn.completionIds, { version: v })).logprobs,
        turn.logprobs,
      );
      if (turn.policyVersion === v) own.set(i, diff);
      else neighbour.set(i, Math.min(neighbour.get(i) ?? Infinity, diff));
    }
  }
  const long = [...turns].filter(([, turn]) => turn.completionIds.length >= 8).map(([i]) => i);
  t.diagnostic(
    JSON.stringify({
      ownVersionMaxDiff: Math.max(...own.values()),
      neighbourMinDiff: Math.min(...long.map((i) => neighbour.get(i)!)),
      turnsPerVersion: versions.map((v) => [...turns.values()].filter((x) => x.policyVersion === v).length),
    }),
  );
  for (const [i, turn] of turns) {
    if (turn.completionIds.length > 0)
      assert.ok(
        own.get(i)! < 1e-4,
        `request ${i}: its log-probs differ from version ${turn.policyVersion}'s by ${own.get(i)}`,
      );
  }
  assert.ok(long.length >= turns.size / 2, 'most turns have 8 tokens or more');
  for (const i of long)
    assert.ok(
      neighbour.get(i)! > 1e-2,
      `request ${i}: a neighbouring version is as close as ${neighbour.get(i)}; versions must be told apart`,
    );

  // No stall beyond one decode step; the swap itself well within one.
  assert.ok(stall.spanning >= PUBLICATIONS, `only ${stall.spanning} gaps span a publication`);
  assert.ok(
    stall.medianWorst < stall.bound,
    `publications stall streams: the median publication's worst gap is ${stall.medianWorst.toFixed(1)} ms; the median decode step is ${stall.step.toFixed(2)} ms (bound ${stall.bound.toFixed(1)} ms)`,
  );
  assert.ok(
    stall.worst < 2 * Math.max(stall.bound, stall.controlMax),
    `a publication stalled a stream for ${stall.worst.toFixed(1)} ms; the median decode step is ${stall.step.toFixed(2)} ms (bound ${stall.bound.toFixed(1)} ms), the worst gap away from publications and training ${stall.controlMax.toFixed(1)} ms`,
  );
  assert.ok(
    median(swaps) < stall.step,
    `the median swap took ${median(swaps).toFixed(3)} ms, more than the median decode step ${stall.step.toFixed(3)} ms`,
  );
  assert.ok(Math.max(...swaps) < stall.bound, `a swap took ${Math.max(...swaps).toFixed(1)} ms`);
});
