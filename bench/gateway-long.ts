// The gateway's own time per request as the conversation grows (an agent resends its whole
// history every turn): streamed requests with 2, 20 and 100 kB of messages against an instant
// sampler, so the time is the gateway's (body, validation, rendering, tokenization with the piece
// cache, sessions, the store commit, SSE). Two patterns per size:
//   fresh    every request opens a new session with the whole history (first turns, imports);
//   growing  one session, each request the previous one plus the gateway's answer and a new user
//            message, as an agent talks (attribution and next states run on every request).
// The client runs in a child process, so its work does not land on the server's event loop; the
// server-side ms come from the access log, the client's from its own clock. Each size first
// serves 40 requests (past the prompt encoder's 32 checked ones), then 60 measured. Last, the
// time the engine's generate() takes on the serving thread to hand a 50k-token prompt over.
//
//   npm run build && node dist/bench/gateway-long.js

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChatMessage } from '../src/chat/messages.js';
import type { GenerationEvent, Sampler, SamplingParams } from '../src/engine/types.js';
import { loadChatBackend } from '../src/cli/chat-model.js';
import { DEFAULT_CONFIG } from '../src/gateway/config.js';
import { memoryLogger } from '../src/gateway/log.js';
import { Gateway } from '../src/gateway/server.js';
import { openStore } from '../src/store/store.js';
import { PRESETS, writeModelFolder } from '../src/engine/local/model/init.js';
import { ROOT } from './models.js';

const WARMUP = 40;
const MEASURED = 60;
type Pattern = 'fresh' | 'growing';

const WORDS = 'the quick brown fox jumps over the lazy dog and then reads the notes about the trip to Lisbon'.split(
  ' ',
);
const text = (n: number, seed: number) =>
  Array.from({ length: n }, (_, i) => WORDS[(i * 7 + seed) % WORDS.length]).join(' ');

function conversation(kb: number): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: text(Math.min(2000, kb * 100), 1) }];
  while (JSON.stringify(messages).length < kb * 1024) {
    messages.push(
      { role: 'user', content: text(200, messages.length) },
      { role: 'assistant', content: text(300, messages.length) },
    );
  }
  messages.push({ role: 'user', content: 'and now?' });
  return messages;
}

// ---------------------------------------------------------------- client (child process)

async function clientMain(url: string, kb: number, pattern: Pattern): Promise<void> {
  const messages = conversation(kb);
  const ms: number[] = [];
  for (let i = 0; i < WARMUP + MEASURED; i++) {
    const session = pattern === 'fresh' ? `long-${kb}-${i}` : `long-${kb}-growing`;
    const t0 = performance.now();
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': session, 'x-turn-type': 'main' },
      body: JSON.stringify({ messages, stream: true, max_tokens: 32 }),
    });
    const body = await res.text();
    ms.push(performance.now() - t0);
    if (res.status !== 200) throw new Error(`status ${res.status}: ${body.slice(0, 300)}`);
    if (pattern === 'growing') {
      let content = '';
      for (const line of body.split('\n')) {
        if (!line.startsWith('data: {')) continue;
        const delta = (JSON.parse(line.slice(6)) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta;
        content += delta?.content ?? '';
      }
      messages.push({ role: 'assistant', content }, { role: 'user', content: text(20, i) });
    }
  }
  process.stdout.write(JSON.stringify(ms.slice(WARMUP)));
}

function runClient(url: string, kb: number, pattern: Pattern): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--client', url, String(kb), pattern], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out) as number[]) : reject(new Error(`client exited ${code}`)),
    );
  });
}

// ---------------------------------------------------------------- server

class InstantSampler implements Sampler {
  constructor(private readonly ids: number[]) {}
  use(): Promise<number> {
    return Promise.reject(new Error('InstantSampler serves fixed ids; it loads no policy version'));
  }
  async *generate(promptIds: readonly number[], params: SamplingParams): AsyncIterable<GenerationEvent> {
    const n = params.maxTokens ?? 32;
    for (let i = 0; i < n; i++)
      yield { type: 'token', token: { id: this.ids[i % this.ids.length]!, logprob: -1, sampledLogprob: -1 } };
    yield { type: 'finish', reason: 'length', version: 0, promptTokens: promptIds.length, completionTokens: n };
  }
}

const q = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;

async function serverMain(): Promise<void> {
  // The tiny shape with a context long enough for the biggest conversation.
  const modelDir = join(ROOT, '.cache', 'bench-models', 'tiny-64k');
  if (!existsSync(join(modelDir, 'config.json'))) {
    writeModelFolder({
      out: modelDir,
      shape: { family: 'qwen3', ...PRESETS.tiny!, maxPositionEmbeddings: 65_536 },
      seed: 0,
      dtype: 'F32',
      shards: 1,
      tokenizerVocab: 512,
      initStd: 0.02,
    });
  }
  const backend = await loadChatBackend(modelDir, 'bench', { threads: 1 });
  const dir = mkdtempSync(join(tmpdir(), 'ocrl-bench-long-'));
  const store = openStore({ dir, checkpoints: 'background' });
  const logs = memoryLogger();
  const sampler = new InstantSampler(backend.tokenizer.encode('Lisbon: flights booked, hotel open.'));
  const gateway = new Gateway({
    backend: { ...backend, sampler },
    store,
    logger: logs,
    config: { ...DEFAULT_CONFIG, port: 0, dataDir: dir },
  });
  const { port } = await gateway.listen();
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;

  console.log(
    'gateway time per streamed request (instant sampler, 32 tokens) by conversation size; client in a child process',
  );
  console.log('   messages   pattern    prompt tokens    server p50    p99     client p50    p99   (ms)');
  for (const kb of [2, 20, 100]) {
    for (const pattern of ['fresh', 'growing'] as const) {
      logs.lines.length = 0;
      const client = await runClient(url, kb, pattern);
      const requests = logs.lines.filter((l) => l.event === 'request').slice(WARMUP);
      if (requests.some((l) => l.status !== 200))
        throw new Error(`a ${kb} kB request failed: ${JSON.stringify(requests.find((l) => l.status !== 200))}`);
      const ms = requests.map((l) => l.ms as number);
      console.log(
        `   ${`${kb} kB`.padStart(8)}   ${pattern.padEnd(7)}    ${String(requests[0]!.promptTokens).padStart(13)}    ${q(ms, 0.5).toFixed(2).padStart(10)}  ${q(ms, 0.99).toFixed(2).padStart(6)}    ${q(client, 0.5).toFixed(2).padStart(10)}  ${q(client, 0.99).toFixed(2).padStart(6)}`,
      );
    }
  }
  // Handing a long prompt to the engine's worker, on the serving thread (the generation is cancelled at once).
  const longPrompt = Array.from({ length: 50_000 }, (_, i) => (i * 7) % 500);
  const handOff: number[] = [];
  for (let i = 0; i < 12; i++) {
    const stop = new AbortController();
    const t = performance.now();
    const events = backend.sampler.generate(longPrompt, { maxTokens: 1, seed: i }, stop.signal);
    handOff.push(performance.now() - t);
    stop.abort();
    for await (const e of events) void e;
  }
  console.log(`engine generate() on the serving thread for a 50k-token prompt: p50 ${q(handOff, 0.5).toFixed(2)} ms`);
  await gateway.close(1000);
  store.close();
  await backend.close();
  rmSync(dir, { recursive: true, force: true });
}

if (process.argv[2] === '--client')
  await clientMain(process.argv[3]!, Number(process.argv[4]), process.argv[5] as Pattern);
else await serverMain();
