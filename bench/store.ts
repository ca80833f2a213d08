// Commit cost of one realistic turn (a 1500-token prompt, 128 completion tokens, 5 kB of
// messages) on the serving thread, with SQLite's inline WAL checkpoints against the background
// checkpoint thread `openclaw-rl serve` uses, and with the request side encoded ahead of the
// commit (Store.prepareInputs, as the gateway does while the engine generates). Alternating
// rounds, same process. BENCH_MESSAGES_KB (default 5) sets the conversation's size. Then the
// updates every main turn gets later (its re-template check, its closure) on a turn of a long agent
// session (100 kB of messages), against that turn's insert in the same run: they touch only the
// small turns row, so they must not cost like rewriting the payload.
//
//   npm run bench:store

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/store.js';
import type { Turn } from '../src/types.js';

const N = Number(process.env.BENCH_TURNS ?? 4000);
const LONG_TURNS = Number(process.env.BENCH_LONG_TURNS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const KB = Number(process.env.BENCH_MESSAGES_KB ?? 5);
// About 4 bytes of text per token, as in English prose.
const prompt = Array.from({ length: Math.round(KB * 300) }, (_, i) => i);
const completion = Array.from({ length: 128 }, (_, i) => i);
const messages = [
  { role: 'system' as const, content: 'x'.repeat(KB * 400) },
  { role: 'user' as const, content: 'y'.repeat(KB * 600) },
];

function turnOf(i: number, over: Partial<Turn> = {}): Turn {
  return {
    id: `turn_${String(i).padStart(12, '0')}`,
    sessionId: `s${i % 64}`,
    sessionSource: 'x-session-id',
    kind: 'main',
    kindReason: 'header',
    compaction: null,
    traceId: null,
    model: 'm',
    messages,
    tools: null,
    sampling: {
      temperature: 1,
      topP: 1,
      topK: 0,
      maxTokens: 128,
      stop: [],
      seed: i,
      topLogprobs: 0,
      defaultsFrom: 'openai',
    },
    promptIds: prompt,
    completionIds: completion,
    logprobs: completion.map(() => -1),
    sampledLogprobs: completion.map(() => -1),
    response: { role: 'assistant', content: 'z'.repeat(500) },
    finishReason: 'stop_token',
    policyVersion: 0,
    receivedAt: i,
    firstTokenAt: i,
    completedAt: i,
    toolCallErrors: [],
    retemplate: null,
    ...over,
  };
}

type Mode = 'inline' | 'background' | 'background, prepared';

async function run(mode: Mode): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), 'ocrl-bench-store-'));
  const store = openStore({ dir, checkpoints: mode === 'inline' ? 'inline' : 'background' });
  const ms: number[] = [];
  for (let i = 0; i < N; i++) {
    const turn = turnOf(i);
    if (mode === 'background, prepared') store.prepareInputs(turn.messages, turn.tools, turn.promptIds);
    const t = performance.now();
    store.recordTurn({ id: `s${i % 64}`, source: 'x-session-id', seenAt: i, learning: true }, turn);
    ms.push(performance.now() - t);
    // Let the checkpoint thread's messages in now and then, as a server's event loop would.
    if (i % 64 === 63) await new Promise((resolve) => setImmediate(resolve));
  }
  store.close();
  rmSync(dir, { recursive: true, force: true });
  return ms;
}

const q = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;
const us = (x: number) => `${(x * 1000).toFixed(0)} us`.padStart(9);
console.log(
  `store commit of one turn on the serving thread (${KB} kB of messages, ${prompt.length} prompt tokens), ${N} turns per round, ${ROUNDS} alternating rounds`,
);
console.log('   checkpoints, inputs        mean       p50       p99      p999       max');
const modes: Mode[] = ['inline', 'background', 'background, prepared'];
const all = new Map<Mode, number[]>(modes.map((m) => [m, []]));
for (let r = 0; r < ROUNDS; r++) for (const mode of modes) all.get(mode)!.push(...(await run(mode)));
const mean = (ms: number[]) => ms.reduce((a, b) => a + b, 0) / ms.length;
for (const [mode, ms] of all) {
  console.log(
    `   ${mode.padEnd(20)} ${us(mean(ms))} ${us(q(ms, 0.5))} ${us(q(ms, 0.99))} ${us(q(ms, 0.999))} ${us(Math.max(...ms))}`,
  );
}
const [inline, background, prepared] = modes.map((m) => all.get(m)!) as [number[], number[], number[]];
console.log(
  `   background / inline: mean ${(mean(background) / mean(inline)).toFixed(2)}, p99 ${(q(background, 0.99) / q(inline, 0.99)).toFixed(2)}; prepared / background: mean ${(mean(prepared) / mean(background)).toFixed(2)}`,
);

// A long agent session's turn: 100 kB of messages, 30,000 prompt ids.
const longMessages = [
  { role: 'system' as const, content: 'x'.repeat(40_000) },
  { role: 'user' as const, content: 'y'.repeat(60_000) },
];
const longPrompt = Array.from({ length: 30_000 }, (_, i) => i);
const dir = mkdtempSync(join(tmpdir(), 'ocrl-bench-store-'));
const store = openStore({ dir, checkpoints: 'background' });
const insert: number[] = [],
  retemplate: number[] = [],
  close: number[] = [];
const timed = (into: number[], f: () => void) => {
  const t = performance.now();
  f();
  into.push(performance.now() - t);
};
for (let i = 0; i < LONG_TURNS; i++) {
  const turn = turnOf(i, { messages: longMessages, promptIds: longPrompt });
  timed(insert, () =>
    store.recordTurn({ id: turn.sessionId!, source: 'x-session-id', seenAt: i, learning: true }, turn),
  );
  timed(retemplate, () =>
    store.setRetemplates([[turn.id, { match: true, renderedTokens: 30_128, recordedTokens: 30_128 }]]),
  );
  const nextState = {
    messages: [{ role: 'tool' as const, content: 'ok', tool_call_id: 'call_1' }],
    nextTurnId: `next_${i}`,
    arrivedAt: i + 1,
  };
  timed(close, () =>
    store.closeTurn({ turnId: turn.id, reason: 'next_state', closedAt: i + 1, nextState, learning: true }),
  );
  if (i % 16 === 15) await new Promise((resolve) => setImmediate(resolve));
}
store.close();
rmSync(dir, { recursive: true, force: true });
console.log(
  `updates of a turn with 100 kB of messages (${longPrompt.length} prompt tokens), ${LONG_TURNS} turns, background checkpoints`,
);
console.log('   commit                     mean       p50       p99   / insert: mean   p50');
for (const [name, ms] of [
  ['insert', insert],
  ['retemplate', retemplate],
  ['close (+ next state)', close],
] as const) {
  console.log(
    `   ${name.padEnd(20)} ${us(mean(ms))} ${us(q(ms, 0.5))} ${us(q(ms, 0.99))}   ${(mean(ms) / mean(insert)).toFixed(3).padStart(12)} ${(q(ms, 0.5) / q(insert, 0.5)).toFixed(3).padStart(5)}`,
  );
}
