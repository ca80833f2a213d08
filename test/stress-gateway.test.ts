// Stress (issue 15): on loopback, at once, for a bounded time: seeded mutations of the recorded
// OpenClaw requests (10,000 against a test-double sampler, a few hundred against the real tiny
// engine), clients that send headers and stall, clients that abandon streamed and plain requests,
// and one normal client (all on a thread of their own, helpers/stress-load.ts).
// Asserted: no 5xx, every 4xx in the OpenAI error format, no row for a rejected request, stalled
// clients cut off by the body deadline, and the normal client's p99 under P99_BOUND_MS (see
// docs/gateway.md, Hardening, for why that bound).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import type { ChatBackend } from '../src/gateway/backend.js';
import { engineBackend, scriptedBackend, startGateway, type TestGateway } from './helpers/gateway.js';
import { replyIds, ScriptedSampler } from './helpers/scripted-sampler.js';
import type { LoadOptions, LoadTally } from './helpers/stress-load.js';

const SEED = Number(process.env.STRESS_SEED ?? 20261202);
const MUTATIONS = Number(process.env.STRESS_MUTATIONS ?? 10_000);
const MAX_BODY = 1024 * 1024;
/** The normal client's p99 bound, in ms (derivation in docs/gateway.md, Hardening). */
const P99_BOUND_MS = 500;
const NORMAL_EVERY_MS = 20;
/** Stalled clients are cut off after this, and reconnect. */
const BODY_TIMEOUT_MS = 5000;

const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;

/** Runs the clients' thread until its work or time is done; returns what it saw. */
async function storm(
  gw: TestGateway,
  opts: Pick<LoadOptions, 'mutations' | 'seconds' | 'stalled' | 'overrides'>,
): Promise<LoadTally> {
  const workerData: LoadOptions = {
    url: gw.url,
    seed: SEED,
    maxBodyBytes: MAX_BODY,
    normalEveryMs: NORMAL_EVERY_MS,
    minSeconds: BODY_TIMEOUT_MS / 1000 + 2,
    ...opts,
  };
  const worker = new Worker(new URL('./helpers/stress-load.js', import.meta.url), { workerData });
  try {
    return await new Promise<LoadTally>((resolve, reject) => {
      worker
        .once('message', resolve)
        .once('error', reject)
        .once('exit', (code) => reject(new Error(`the load thread exited (${code})`)));
    });
  } finally {
    await worker.terminate();
  }
}

async function verify(gw: TestGateway, load: LoadTally, label: string): Promise<void> {
  await gw.gateway.settled();
  assert.deepEqual(load.failures, [], `${label}: 5xx, unshaped errors or failed normal requests`);
  assert.ok(!load.statuses.some(([s]) => s >= 500), `${label}: statuses ${JSON.stringify(load.statuses)}`);
  const stored = [...gw.store.exportLines()].map((l) => ({ id: l.turn_id, session: l.session_id }));
  const ids = new Set(stored.map((s) => s.id));
  for (const id of load.answered) assert.ok(ids.has(id), `${label}: answered turn ${id} is not stored`);
  const answered = new Set(load.answered);
  const unexplained = stored.filter((s) => !answered.has(s.id) && !/^(abandon|normal)-/.test(s.session ?? ''));
  assert.deepEqual(unexplained, [], `${label}: rows that no answered request explains`);
  assert.ok(load.stalledCut > 0, `${label}: no stalled client was cut off by the body deadline`);
  assert.equal((await fetch(`${gw.url}/healthz`)).status, 200);
}

function report(label: string, r: LoadTally, seconds: number): string {
  const n = r.normal;
  return (
    `${label}: ${r.mutations} mutations, ${r.statuses
      .sort()
      .map(([s, c]) => `${s}x${c}`)
      .join(' ')} in ${seconds.toFixed(0)} s; ` +
    `normal requests ${n.length}, p50 ${quantile(n, 0.5).toFixed(1)} ms, p99 ${quantile(n, 0.99).toFixed(1)} ms, max ${Math.max(...n).toFixed(1)} ms; ` +
    `stalled cut off ${r.stalledCut}; abandoned ${r.abandoned}`
  );
}

test(`stress with a test-double sampler: ${MUTATIONS} mutations of recorded OpenClaw requests, stalled, abandoning and normal clients`, {
  timeout: 220_000,
}, async (t) => {
  const { backend } = await scriptedBackend(undefined, { thread: true });
  const answer = replyIds(backend.tokenizer, { content: 'All done.' });
  // TEST DOUBLE: answers every request at once; an abandoning client's request takes a while.
  const sampler = new ScriptedSampler({
    fallback: (promptIds) =>
      backend.tokenizer.decode(promptIds.slice(-24)).includes('abandon')
        ? { ids: answer, delayMs: 20 }
        : { ids: answer },
  });
  // The double does not care how long a prompt is: a large context lets recorded prompts through.
  const gw = await startGateway({ ...backend, sampler, contextLength: 65_536 } as ChatBackend, {
    maxBodyBytes: MAX_BODY,
    bodyTimeoutMs: BODY_TIMEOUT_MS,
    sideModels: ['side-model'],
  });
  const started = performance.now();
  try {
    const r = await storm(gw, { mutations: MUTATIONS, seconds: 170, stalled: 100 });
    t.diagnostic(report('test double', r, (performance.now() - started) / 1000));
    assert.ok(r.mutations >= MUTATIONS, `only ${r.mutations} mutations in the time allowed`);
    await verify(gw, r, 'test double');
    assert.ok(quantile(r.normal, 0.99) < P99_BOUND_MS, report('test double', r, 0));
  } finally {
    await gw.close();
    await backend.close();
  }
});

test('stress against the real tiny engine: mutations, stalled, abandoning and normal clients', {
  timeout: 90_000,
}, async (t) => {
  const backend = await engineBackend();
  const gw = await startGateway(backend, {
    maxBodyBytes: MAX_BODY,
    bodyTimeoutMs: BODY_TIMEOUT_MS,
    sideModels: ['side-model'],
  });
  const started = performance.now();
  try {
    const r = await storm(gw, { mutations: 400, seconds: 60, stalled: 50, overrides: { max_completion_tokens: 8 } });
    t.diagnostic(report('real engine', r, (performance.now() - started) / 1000));
    assert.ok(r.mutations >= 400, `only ${r.mutations} mutations in the time allowed`);
    await verify(gw, r, 'real engine');
  } finally {
    await gw.close();
    await backend.close();
  }
});
