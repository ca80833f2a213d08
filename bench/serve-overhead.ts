// What serve adds to a request, per sampler backend: the same generation (same prompt ids, seed and
// length, hence the same tokens) asked of the backend directly and through serve's gateway.
//   - embedded, llama.cpp: directly = `sampler.generate` in-process; through serve = a streamed chat
//     completion over HTTP from a client process. The added time includes the client's HTTP work
//     and the loopback round trip; the gateway's own time (its access log) is reported beside it.
//   - vLLM, SGLang: directly = the request their own client would send (token ids, streamed, with
//     log-probs) from the same client process; through serve = the chat completion, which serve
//     turns into that same request. Both sides go through HTTP, so the difference is serve's.
// Rounds alternate the two ways, so both see the same machine. The vLLM and SGLang servers are
// the project's test doubles (test/helpers), run in a child process: real vLLM or SGLang need a
// GPU and Python packages this machine lacks; the doubles answer in their wire formats, with the
// embedded engine computing.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ChatMessage } from '../src/chat/messages.js';
import { renderPrompt } from '../src/chat/prompt.js';
import type { Sampler } from '../src/engine/types.js';
import type { ChatBackend } from '../src/gateway/backend.js';
import { DEFAULT_CONFIG } from '../src/gateway/config.js';
import { memoryLogger } from '../src/gateway/log.js';
import { Gateway } from '../src/gateway/server.js';
import { openStore } from '../src/store/store.js';

const MESSAGES: ChatMessage[] = [
  { role: 'system', content: 'You are a personal assistant running inside OpenClaw. Answer briefly.' },
  { role: 'user', content: 'Please summarise what we decided about the trip to Lisbon, and list what is still open.' },
];

/** One HTTP request the client process sends and reads to its end. */
export interface ClientRequest {
  url: string;
  body: unknown;
  headers?: Record<string, string>;
}

/** One request, sent and read to its end over the agent's keep-alive connection; ms it took. */
async function timedRequest(agent: Agent, r: ClientRequest): Promise<number> {
  const body = JSON.stringify(r.body);
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => {
    const req = request(
      r.url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...r.headers },
      },
      (res) => {
        res.on('data', () => {});
        res.on('end', () =>
          res.statusCode === 200 ? resolve() : reject(new Error(`${r.url} answered ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
  return performance.now() - t0;
}

/** Runs in the client process: each stdin line a batch of requests, sent in order; a line back with ms of each. */
async function clientMain(): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  for await (const line of createInterface({ input: process.stdin })) {
    const ms: number[] = [];
    for (const r of JSON.parse(line) as ClientRequest[]) ms.push(await timedRequest(agent, r));
    process.stdout.write(`${JSON.stringify(ms)}\n`);
  }
  agent.destroy();
}

const SELF = fileURLToPath(import.meta.url);

/**
 * The client: one long-lived process, as an agent is, so that its HTTP code is compiled by the time
 * it is timed (a fresh process per batch would time Node's warm-up, on the serve side only).
 */
export class ClientProcess {
  private readonly child: ChildProcess;
  private readonly replies: AsyncIterator<string>;

  constructor() {
    this.child = spawn(process.execPath, [SELF, '--client'], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.replies = createInterface({ input: this.child.stdout! })[Symbol.asyncIterator]();
  }

  /** Sends the requests in order; the ms of each as the client saw it. */
  async run(requests: ClientRequest[]): Promise<number[]> {
    this.child.stdin!.write(`${JSON.stringify(requests)}\n`);
    const reply = await this.replies.next();
    if (reply.done) throw new Error(`the client process exited (${this.child.exitCode})`);
    return JSON.parse(reply.value) as number[];
  }

  close(): void {
    this.child.stdin!.end();
  }
}

/** A vLLM or SGLang test double in a child process (its own event loop and engine worker). */
export async function startDoubleProcess(
  kind: 'vllm' | 'sglang',
  modelDir: string,
  threads: number,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [SELF, '--double', kind, modelDir, String(threads)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the ${kind} double exited ${code} before listening`)));
  });
  return { url: line.trim(), child };
}

async function doubleMain(kind: string, modelDir: string, threads: number): Promise<void> {
  const { startVllmDouble } = await import('../test/helpers/vllm-double.js');
  const { startSglangDouble } = await import('../test/helpers/sglang-double.js');
  const start = kind === 'vllm' ? startVllmDouble : startSglangDouble;
  const double = await start(modelDir, { threads });
  process.stdout.write(`${double.url}\n`);
  process.on('SIGTERM', () => void double.close().then(() => process.exit(0)));
}

/** The request a client of that server would send for the generation serve asks of it. */
export function directRequest(
  kind: 'vllm' | 'sglang',
  url: string,
  model: string,
  ids: number[],
  seed: number,
  n: number,
) {
  const body =
    kind === 'vllm'
      ? {
          model,
          prompt: ids,
          max_tokens: n,
          temperature: 1,
          seed,
          logprobs: 0,
          return_token_ids: true,
          return_tokens_as_token_ids: true,
          stream: true,
        }
      : {
          input_ids: ids,
          sampling_params: { max_new_tokens: n, temperature: 1, sampling_seed: seed },
          return_logprob: true,
          stream: true,
        };
  return { url: `${url}${kind === 'vllm' ? '/v1/completions' : '/generate'}`, body };
}

export interface Overhead {
  backend: string;
  /** p50 ms of the generation asked directly. */
  direct: number;
  /** p50 ms through serve, seen by the client. */
  viaServe: number;
  /** p50 ms the gateway itself spent per request (receipt to last byte); null for the bare floor server. */
  gateway: number | null;
  /** viaServe - direct per round, ms: the spread. */
  perRound: number[];
  /**
   * CPU ms per request this process spent through serve beyond what it spent asking directly: what
   * serve's work costs a machine whose cores are all busy (the client runs in another process).
   */
  serveCpuMs: number;
  requests: number;
}

const p50 = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

/** What the client talks to: serve's gateway, or the bare floor server. */
export interface ServerUnderTest {
  /** The chat completions URL. */
  url: string;
  /** ms the server itself spent on each request since the last call (receipt to last byte), when it logs them. */
  ownMs(): number[];
  close(): Promise<void>;
}

/** serve's gateway around the backend, with a store in a temporary folder, as `serve` runs it. */
export async function startGateway(backend: ChatBackend): Promise<ServerUnderTest> {
  const dir = mkdtempSync(join(tmpdir(), 'ocrl-overhead-'));
  const store = openStore({ dir, checkpoints: 'background' });
  const logs = memoryLogger();
  const gateway = new Gateway({ backend, store, logger: logs, config: { ...DEFAULT_CONFIG, port: 0, dataDir: dir } });
  const { port } = await gateway.listen();
  return {
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    ownMs() {
      const ms = logs.lines
        .filter((l) => l.event === 'request' && l.path === '/v1/chat/completions')
        .map((l) => l.ms as number);
      logs.lines.length = 0;
      return ms;
    },
    async close() {
      await gateway.close(1000);
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The floor: the least any HTTP server in front of the sampler can add on this machine. A bare
 * node:http handler that parses the body, samples the already-rendered prompt and streams the
 * chunks as serve does for a short answer (the first at once, the rest with the end), with no
 * validation, template, sessions or store. What serve adds beyond this is its own work.
 */
export function startBareServer(sampler: Sampler, ids: readonly number[]): Promise<ServerUnderTest> {
  return bareServer(async ({ seed, max_tokens }, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    res.write('data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n');
    let rest = '';
    for await (const e of sampler.generate(ids, { maxTokens: max_tokens, temperature: 1, seed })) {
      if (e.type === 'token')
        rest += `data: ${JSON.stringify({ choices: [{ index: 0, delta: { id: e.token.id } }] })}\n\n`;
    }
    res.end(`${rest}data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n`);
  });
}

/**
 * The floor for a remote server: a bare node:http proxy that forwards the request a client of that
 * server would send for the generation and pipes its stream back, unparsed. It is the extra HTTP
 * hop any front of a remote server adds; what serve adds beyond it is its own work.
 */
export function startBareProxy(
  kind: 'vllm' | 'sglang',
  serverUrl: string,
  model: string,
  ids: number[],
): Promise<ServerUnderTest> {
  const agent = new Agent({ keepAlive: true });
  return bareServer(
    ({ seed, max_tokens }, res) => {
      const forward = directRequest(kind, serverUrl, model, ids, seed, max_tokens);
      const payload = JSON.stringify(forward.body);
      const up = request(forward.url, {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      });
      up.on('response', (answer) => {
        res.writeHead(answer.statusCode ?? 502, { 'content-type': 'text/event-stream; charset=utf-8' });
        answer.pipe(res);
      });
      up.on('error', () => res.destroy());
      up.end(payload);
    },
    () => agent.destroy(),
  );
}

/** A node:http server on loopback that hands each request's parsed body (seed, max_tokens) to `answer`. */
async function bareServer(
  answer: (body: { seed: number; max_tokens: number }, res: ServerResponse) => void | Promise<void>,
  onClose: () => void = () => {},
): Promise<ServerUnderTest> {
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      body += c;
    });
    req.on('end', () => void answer(JSON.parse(body) as { seed: number; max_tokens: number }, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    ownMs: () => [],
    close: () =>
      new Promise<void>((resolve) => {
        onClose();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * The added time through `server` for one backend. `direct` times generations of the prompt with
 * the given seeds (in-process, or through the client process for a remote server); rounds
 * alternate the two ways.
 */
export async function measureOverhead(a: {
  name: string;
  client: ClientProcess;
  server: ServerUnderTest;
  direct: (seeds: number[]) => Promise<number[]>;
  tokens: number;
  rounds: number;
  perRound: number;
}): Promise<Overhead> {
  const chat = (seed: number): ClientRequest => ({
    url: a.server.url,
    headers: { 'x-session-id': `overhead-${seed}` },
    body: { messages: MESSAGES, stream: true, max_tokens: a.tokens, temperature: 1, top_p: 1, top_k: 0, seed },
  });
  const direct: number[] = [];
  const via: number[] = [];
  const perRound: number[] = [];
  const cpu = { direct: 0, via: 0 };
  const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
  const seedsOf = (round: number) => Array.from({ length: a.perRound }, (_, i) => 1000 * round + i);
  // Warm-up: both ways once, so compilation and first-use allocations are not timed.
  await a.direct(seedsOf(0));
  await a.client.run(seedsOf(0).map(chat));
  a.server.ownMs();
  for (let round = 1; round <= a.rounds; round++) {
    let c0 = process.cpuUsage();
    const d = await a.direct(seedsOf(round));
    cpu.direct += cpuMs(process.cpuUsage(c0));
    c0 = process.cpuUsage();
    const v = await a.client.run(seedsOf(round).map(chat));
    cpu.via += cpuMs(process.cpuUsage(c0));
    direct.push(...d);
    via.push(...v);
    perRound.push(p50(v) - p50(d));
  }
  const own = a.server.ownMs();
  return {
    backend: a.name,
    direct: p50(direct),
    viaServe: p50(via),
    gateway: own.length > 0 ? p50(own) : null,
    perRound,
    requests: via.length,
    serveCpuMs: (cpu.via - cpu.direct) / via.length,
  };
}

/** The prompt ids serve renders for the benchmark's messages. */
export function benchPromptIds(backend: ChatBackend): number[] {
  return renderPrompt(backend.template, backend.tokenizer, MESSAGES, { addGenerationPrompt: true }).ids;
}

/** Directly through an in-process Sampler: ms per generation. */
export function inProcessDirect(sampler: Sampler, ids: readonly number[], tokens: number) {
  return async (seeds: number[]): Promise<number[]> => {
    const ms: number[] = [];
    for (const seed of seeds) {
      const t0 = performance.now();
      for await (const _ of sampler.generate(ids, { maxTokens: tokens, temperature: 1, seed }));
      ms.push(performance.now() - t0);
    }
    return ms;
  };
}

/** Directly to a vLLM or SGLang server from the client process: ms per generation. */
export function remoteDirect(
  client: ClientProcess,
  kind: 'vllm' | 'sglang',
  url: string,
  model: string,
  ids: number[],
  tokens: number,
) {
  return (seeds: number[]): Promise<number[]> =>
    client.run(seeds.map((seed) => directRequest(kind, url, model, ids, seed, tokens)));
}

if (process.argv[2] === '--client') {
  clientMain().catch((e) => {
    console.error(e);
    process.exit(1);
  });
} else if (process.argv[2] === '--double') {
  doubleMain(process.argv[3]!, process.argv[4]!, Number(process.argv[5])).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
