// The gateway's own time per request as the conversation grows (an agent session resends its
// whole history every turn): streamed requests with 2, 20 and 100 kB of messages against an
// instant sampler, so the time is the gateway's (validation, rendering, tokenization with the
// piece cache, sessions, the store commit, SSE). Each size first serves 40 requests, past the
// prompt encoder's 32 checked ones, then 60 measured; server-side ms from the access log. Then
// the time the engine's generate() takes on the serving thread to hand a 50k-token prompt over.
//
//   npm run build && node dist/bench/gateway-long.js

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChatMessage } from '../src/engine/chat/messages.js';
import type { GenerationEvent, Sampler, SamplingParams } from '../src/engine/types.js';
import { loadChatBackend } from '../src/gateway/backend.js';
import { DEFAULT_CONFIG } from '../src/gateway/config.js';
import { memoryLogger } from '../src/gateway/log.js';
import { Gateway } from '../src/gateway/server.js';
import { openStore } from '../src/store/store.js';
import { PRESETS, writeModelFolder } from '../src/engine/local/model/init.js';
import { ROOT } from './models.js';

const WORDS = 'the quick brown fox jumps over the lazy dog and then reads the notes about the trip to Lisbon'.split(' ');
const text = (n: number, seed: number) => Array.from({ length: n }, (_, i) => WORDS[(i * 7 + seed) % WORDS.length]).join(' ');

function conversation(kb: number): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: text(Math.min(2000, kb * 100), 1) }];
  while (JSON.stringify(messages).length < kb * 1024) {
    messages.push({ role: 'user', content: text(200, messages.length) }, { role: 'assistant', content: text(300, messages.length) });
  }
  messages.push({ role: 'user', content: 'and now?' });
  return messages;
}

class InstantSampler implements Sampler {
  constructor(private readonly ids: number[]) {}
  async *generate(promptIds: readonly number[], params: SamplingParams): AsyncIterable<GenerationEvent> {
    const n = params.maxTokens ?? 32;
    for (let i = 0; i < n; i++) yield { type: 'token', token: { id: this.ids[i % this.ids.length]!, logprob: -1, sampledLogprob: -1 } };
    yield { type: 'finish', reason: 'length', version: 0, promptTokens: promptIds.length, completionTokens: n };
  }
}

// The tiny shape with a context long enough for the biggest conversation.
const modelDir = join(ROOT, '.cache', 'bench-models', 'tiny-64k');
if (!existsSync(join(modelDir, 'config.json'))) {
  writeModelFolder({ out: modelDir, shape: { family: 'qwen3', ...PRESETS.tiny!, maxPositionEmbeddings: 65_536 }, seed: 0, dtype: 'F32', shards: 1, tokenizerVocab: 512, initStd: 0.02 });
}
const backend = await loadChatBackend(modelDir, 'bench', { threads: 1 });
const dir = mkdtempSync(join(tmpdir(), 'ocrl-bench-long-'));
const store = openStore({ dir, checkpoints: 'background' });
const logs = memoryLogger();
const sampler = new InstantSampler(backend.tokenizer.encode('Lisbon: flights booked, hotel open.'));
const gateway = new Gateway({ backend: { ...backend, sampler }, store, logger: logs, config: { ...DEFAULT_CONFIG, port: 0, dataDir: dir } });
const { port } = await gateway.listen();
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;

console.log('gateway time per streamed request (server side, instant sampler, 32 tokens) by conversation size');
console.log('   messages    prompt tokens    p50 ms    p99 ms');
for (const kb of [2, 20, 100]) {
  const messages = conversation(kb);
  const send = async (i: number) => {
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': `long-${kb}-${i}`, 'x-turn-type': 'main' },
      body: JSON.stringify({ messages, stream: true, max_tokens: 32 }),
    });
    await res.text();
  };
  for (let i = 0; i < 40; i++) await send(i);
  logs.lines.length = 0;
  for (let i = 40; i < 100; i++) await send(i);
  const requests = logs.lines.filter((l) => l.event === 'request');
  if (requests.some((l) => l.status !== 200)) throw new Error(`a ${kb} kB request failed: ${JSON.stringify(requests.find((l) => l.status !== 200))}`);
  const ms = requests.map((l) => l.ms as number);
  console.log(`   ${`${kb} kB`.padStart(8)}    ${String(requests[0]!.promptTokens).padStart(13)}    ${q(ms, 0.5).toFixed(2).padStart(6)}    ${q(ms, 0.99).toFixed(2).padStart(6)}`);
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
