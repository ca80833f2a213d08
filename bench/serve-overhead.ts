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
import { Agent, request } from 'node:http';
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

/** Runs in the client process: the requests in order over one keep-alive connection; ms of each. */
async function clientMain(requests: ClientRequest[]): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const ms: number[] = [];
  for (const r of requests) {
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
    ms.push(performance.now() - t0);
  }
  agent.destroy();
  process.stdout.write(JSON.stringify(ms));
}

const SELF = fileURLToPath(import.meta.url);

function runClient(requests: ClientRequest[]): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SELF, '--client'], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out) as number[]) : reject(new Error(`client exited ${code}`)),
    );
    child.stdin.end(JSON.stringify(requests));
  });
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
  /** p50 ms the gateway itself spent per request (receipt to last byte). */
  gateway: number;
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

/**
 * The added time through serve for one backend. `direct` times `n` generations of the prompt with
 * seeds `seeds` (in-process, or through the client process for a remote server).
 */
export async function measureOverhead(a: {
  name: string;
  backend: ChatBackend;
  direct: (ids: number[], seeds: number[]) => Promise<number[]>;
  tokens: number;
  rounds: number;
  perRound: number;
}): Promise<Overhead> {
  const dir = mkdtempSync(join(tmpdir(), 'ocrl-overhead-'));
  const store = openStore({ dir, checkpoints: 'background' });
  const logs = memoryLogger();
  const gateway = new Gateway({
    backend: a.backend,
    store,
    logger: logs,
    config: { ...DEFAULT_CONFIG, port: 0, dataDir: dir },
  });
  const { port } = await gateway.listen();
  const ids = renderPrompt(a.backend.template, a.backend.tokenizer, MESSAGES, { addGenerationPrompt: true }).ids;
  const chat = (seed: number): ClientRequest => ({
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    headers: { 'x-session-id': `overhead-${seed}` },
    body: { messages: MESSAGES, stream: true, max_tokens: a.tokens, temperature: 1, top_p: 1, top_k: 0, seed },
  });
  const gatewayMs = () => {
    const ms = logs.lines
      .filter((l) => l.event === 'request' && l.path === '/v1/chat/completions')
      .map((l) => l.ms as number);
    logs.lines.length = 0;
    return ms;
  };
  const direct: number[] = [];
  const via: number[] = [];
  const perRound: number[] = [];
  const cpu = { direct: 0, via: 0 };
  const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
  const seedsOf = (round: number) => Array.from({ length: a.perRound }, (_, i) => 1000 * round + i);
  try {
    // Warm-up: both ways once, so compilation and first-use allocations are not timed.
    await a.direct(ids, seedsOf(0));
    await runClient(seedsOf(0).map(chat));
    gatewayMs();
    for (let round = 1; round <= a.rounds; round++) {
      let c0 = process.cpuUsage();
      const d = await a.direct(ids, seedsOf(round));
      cpu.direct += cpuMs(process.cpuUsage(c0));
      c0 = process.cpuUsage();
      const v = await runClient(seedsOf(round).map(chat));
      cpu.via += cpuMs(process.cpuUsage(c0));
      direct.push(...d);
      via.push(...v);
      perRound.push(p50(v) - p50(d));
    }
    return {
      backend: a.name,
      direct: p50(direct),
      viaServe: p50(via),
      gateway: p50(gatewayMs()),
      perRound,
      requests: via.length,
      serveCpuMs: (cpu.via - cpu.direct) / via.length,
    };
  } finally {
    await gateway.close(1000);
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Directly through an in-process Sampler: ms per generation. */
export function inProcessDirect(sampler: Sampler, tokens: number) {
  return async (ids: number[], seeds: number[]): Promise<number[]> => {
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
export function remoteDirect(kind: 'vllm' | 'sglang', url: string, model: string, tokens: number) {
  return (ids: number[], seeds: number[]): Promise<number[]> =>
    runClient(seeds.map((seed) => directRequest(kind, url, model, ids, seed, tokens)));
}

if (process.argv[2] === '--client') {
  const chunks: Buffer[] = [];
  process.stdin.on('data', (c: Buffer) => chunks.push(c));
  process.stdin.on('end', () => {
    clientMain(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ClientRequest[]).catch((e) => {
      console.error(e);
      process.exit(1);
    });
  });
} else if (process.argv[2] === '--double') {
  doubleMain(process.argv[3]!, process.argv[4]!, Number(process.argv[5])).catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
