// The stress test's clients (test/stress-gateway.test.ts), run on a worker thread so that they do
// not compete with the server for the test process's event loop, as real clients would not:
// mutations of recorded OpenClaw requests, clients that stall after the headers (or inside them),
// clients that abandon their requests, and one normal client whose latency is measured. Posts
// back a LoadTally.

import { createConnection, type Socket } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import { mutator } from './mutations.js';

export interface LoadOptions {
  url: string;
  seed: number;
  mutations: number;
  seconds: number;
  /** The other clients go on at least this long, so that stalled ones meet the body deadline. */
  minSeconds: number;
  stalled: number;
  maxBodyBytes: number;
  /** Fields put into every mutated body (the real engine: a small max_completion_tokens). */
  overrides?: Record<string, unknown>;
  /** The normal client sends one short request this often at most: a person or an agent, not more load. */
  normalEveryMs: number;
}

export interface LoadTally {
  statuses: [number, number][];
  failures: string[];
  /** x-turn-id of every 2xx answer. */
  answered: string[];
  mutations: number;
  stalledCut: number;
  abandoned: number;
  /** The normal client's latencies, ms. */
  normal: number[];
}

const opts = workerData as LoadOptions;
const statuses = new Map<number, number>();
const failures: string[] = [];
const answered: string[] = [];
const tally = { stalledCut: 0, abandoned: 0, mutations: 0 };
const normal: number[] = [];
const count = (status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1);
const deadline = Date.now() + opts.seconds * 1000;
const MUTATORS = 8;
let mutatorsLeft = MUTATORS;
const minEnd = Date.now() + opts.minSeconds * 1000;
const over = () => Date.now() > deadline || (mutatorsLeft === 0 && Date.now() > minEnd);

async function send(headers: Record<string, string>, body: string, why: string): Promise<void> {
  const res = await fetch(`${opts.url}/v1/chat/completions`, { method: 'POST', headers, body });
  const text = await res.text();
  count(res.status);
  if (res.status >= 200 && res.status < 300) return void answered.push(res.headers.get('x-turn-id')!);
  let shaped = false;
  try {
    const e = JSON.parse(text).error;
    shaped = typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string';
  } catch {
    /* not JSON: a failure */
  }
  if ((res.status >= 500 || !shaped) && failures.length < 10)
    failures.push(`${why}: ${res.status} ${text.slice(0, 200)}`);
}

async function mutate(next: ReturnType<typeof mutator>): Promise<void> {
  const extra = opts.overrides ? `${JSON.stringify(opts.overrides).slice(1, -1)},` : '';
  while (tally.mutations < opts.mutations && Date.now() < deadline) {
    tally.mutations++;
    const m = next();
    await send(m.headers, extra && m.body.startsWith('{"') ? `{${extra}${m.body.slice(1)}` : m.body, m.why);
  }
  mutatorsLeft--;
}

/** Sends headers and part of a body (or part of the headers), then nothing; reconnects when cut off. */
async function stalled(headersOnly: boolean): Promise<void> {
  const port = Number(new URL(opts.url).port);
  while (!over()) {
    const text = await new Promise<string>((resolve) => {
      let got = '';
      const socket: Socket = createConnection({ port, host: '127.0.0.1' }, () => {
        socket.write(
          headersOnly
            ? 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n'
            : 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 500\r\n\r\n{"messages": [',
        );
      });
      const stop = setInterval(() => {
        if (over()) socket.destroy();
      }, 200);
      socket
        .setEncoding('latin1')
        .on('data', (d: string) => {
          got += d;
        })
        .on('error', () => {});
      socket.once('close', () => {
        clearInterval(stop);
        resolve(got);
      });
    });
    if (/^HTTP\/1\.1 408/.test(text)) tally.stalledCut++;
  }
}

/** Starts requests and leaves: after the first stream event, or during a plain one. */
async function abandoning(n: number): Promise<void> {
  for (let i = 0; !over(); i++) {
    const stream = i % 2 === 0;
    const controller = new AbortController();
    const body = JSON.stringify({
      messages: [{ role: 'user', content: `please abandon ${i}` }],
      stream,
      session_id: `abandon-${n}-${i}`,
    });
    try {
      const pending = fetch(`${opts.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: controller.signal,
      });
      if (!stream) setTimeout(() => controller.abort(), 5);
      const res = await pending;
      if (res.status >= 500) count(res.status);
      if (stream) await res.body!.getReader().read();
      controller.abort();
    } catch {
      /* left before the answer: the point */
    }
    tally.abandoned++;
  }
}

async function normalClient(): Promise<void> {
  for (let i = 0; !over(); i++) {
    const paced = new Promise((resolve) => setTimeout(resolve, opts.normalEveryMs));
    const started = performance.now();
    const body = JSON.stringify({
      messages: [{ role: 'user', content: `normal question ${i}` }],
      max_completion_tokens: 8,
      session_id: `normal-${i}`,
    });
    const res = await fetch(`${opts.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-turn-type': 'main' },
      body,
    });
    const text = await res.text();
    normal.push(performance.now() - started);
    count(res.status);
    if (res.status === 200) answered.push(res.headers.get('x-turn-id')!);
    else if (failures.length < 10) failures.push(`normal request ${i}: ${res.status} ${text.slice(0, 200)}`);
    await paced;
  }
}

const next = mutator(opts.seed, opts.maxBodyBytes);
await Promise.all([
  ...Array.from({ length: MUTATORS }, () => mutate(next)),
  normalClient(),
  abandoning(0),
  abandoning(1),
  ...Array.from({ length: opts.stalled }, (_, i) => stalled(i % 10 === 0)),
]);
parentPort!.postMessage({ statuses: [...statuses], failures, answered, normal, ...tally } satisfies LoadTally);
