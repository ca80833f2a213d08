// Mutations of recorded OpenClaw requests for the stress test: each recorded chat body (as
// replayed: tool names turned into tool specs) changed by one to three operators drawn from a
// seeded generator, some leaving it valid and most breaking it the ways clients do. Every
// mutation is a plain HTTP request: method, headers, body text.

import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createRng } from '../../src/engine/local/sampling/random.js';
import { CAPTURED_DIR, loadCapture } from './replay.js';

export interface Mutation {
  headers: Record<string, string>;
  body: string;
  /** The operators applied, for failure messages. */
  why: string;
}

type Body = Record<string, any>;

/** The chat bodies of every capture, as the replay sends them. */
export function recordedBodies(): { body: Body; headers: Record<string, string> }[] {
  const out: { body: Body; headers: Record<string, string> }[] = [];
  for (const file of readdirSync(fileURLToPath(CAPTURED_DIR))
    .filter((f) => f.endsWith('.jsonl'))
    .sort()) {
    for (const e of loadCapture(file)) {
      if (!e.body?.messages) continue;
      const { tools, tools_chars: _chars, ...rest } = e.body;
      const specs = (tools ?? []).map((name) => ({
        type: 'function',
        function: { name, description: `the ${name} tool`, parameters: { type: 'object', properties: {} } },
      }));
      const headers: Record<string, string> = {};
      for (const k of ['x-session-affinity', 'session_id', 'x-turn-type', 'traceparent'])
        if (e.headers[k]) headers[k] = e.headers[k]!;
      out.push({ body: { ...rest, ...(specs.length > 0 ? { tools: specs } : {}) }, headers });
    }
  }
  return out;
}

export function mutator(seed: number, maxBodyBytes: number): () => Mutation {
  const rng = createRng(seed);
  const bodies = recordedBodies();
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]!;
  const int = (n: number) => Math.floor(rng.next() * n);
  const msgIndex = (b: Body) => int(Math.max(1, b.messages?.length ?? 1));
  const JUNK = [null, true, 0, -1, 1.5, 1e308, '', 'x', '\u0000', '💥', '\ud800', {}, [], [null], { a: 1 }];
  // Operators on the parsed body: [name, change]. Some keep it valid (the model answers).
  const ops: [string, (b: Body, h: Record<string, string>) => void][] = [
    [
      'valid:stream',
      (b) => {
        b.stream = !b.stream;
      },
    ],
    [
      'valid:unknown-field',
      (b) => {
        b[`x_${int(100)}`] = pick(JUNK);
      },
    ],
    [
      'valid:identity-unicode',
      (b) => {
        b.user = pick(['名前', 'ユーザー😀', 'Zoë', 'a b%c']);
      },
    ],
    [
      'valid:max-tokens',
      (b) => {
        b.max_completion_tokens = 1 + int(16);
      },
    ],
    [
      'field-junk',
      (b) => {
        b[
          pick([
            'temperature',
            'top_p',
            'max_tokens',
            'n',
            'stop',
            'tools',
            'tool_choice',
            'stream',
            'seed',
            'user',
            'logprobs',
          ])
        ] = pick(JUNK);
      },
    ],
    [
      'messages-junk',
      (b) => {
        b.messages = pick([null, 'hi', [], [1], {}, [{}]]);
      },
    ],
    [
      'role',
      (b) => {
        b.messages[msgIndex(b)].role = pick(['bot', 'USER', 5, null, 'function']);
      },
    ],
    [
      'content',
      (b) => {
        b.messages[msgIndex(b)].content = pick([
          5,
          {},
          [{ type: 'image_url', image_url: { url: 'x' } }],
          [{ type: 'text' }],
          [1],
        ]);
      },
    ],
    [
      'drop-content',
      (b) => {
        const m = b.messages[msgIndex(b)];
        if (m.role !== 'assistant') delete m.content;
        else m.content = 7;
      },
    ],
    [
      'orphan-tool',
      (b) => {
        b.messages.splice(1 + int(b.messages.length), 0, {
          role: 'tool',
          content: 'r',
          tool_call_id: pick(['', 'call_nope', 'x']),
        });
      },
    ],
    [
      'tool-args-type',
      (b) => {
        b.messages.push({
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c', type: 'function', function: { name: 'read', arguments: pick([{}, 5, null, []]) } }],
        });
      },
    ],
    [
      'tool-choice-unknown',
      (b) => {
        b.tool_choice = { type: 'function', function: { name: `missing_${int(9)}` } };
      },
    ],
    [
      'max-tokens-both',
      (b) => {
        b.max_completion_tokens = 5;
        b.max_tokens = pick(['abc', -1, 0.5]);
      },
    ],
    [
      'lone-surrogate-identity',
      (b) => {
        b[pick(['user', 'session_id', 'prompt_cache_key'])] = `id\ud800${int(9)}`;
      },
    ],
    [
      'bad-header',
      (_b, h) =>
        Object.assign(
          h,
          pick<Record<string, string>>([
            { 'x-turn-type': 'primary' },
            { 'x-session-id': 's'.repeat(300) },
            { 'x-learning-opt-out': 'perhaps' },
          ]),
        ),
    ],
    // Certainly over a 65,536-token context: refused by the tokenizer thread's count, without BPE.
    [
      'context',
      (b) => {
        b.messages.push({ role: 'user', content: 'the '.repeat(70_000 + int(30_000)) });
      },
    ],
  ];
  return () => {
    const base = pick(bodies);
    const body: Body = structuredClone(base.body);
    const headers: Record<string, string> = { 'content-type': 'application/json', ...base.headers };
    const r = rng.next();
    // Mutations of the text itself: truncated, a byte flipped, over the body limit.
    if (r < 0.08) {
      const text = JSON.stringify(body);
      return { headers, body: text.slice(0, 1 + int(text.length - 2)), why: 'truncated' };
    }
    if (r < 0.14) {
      const text = JSON.stringify(body);
      const at = int(text.length);
      return {
        headers,
        body: text.slice(0, at) + pick(['"', '{', ']', ',', '\\', '\u0001']) + text.slice(at + 1),
        why: 'flipped',
      };
    }
    if (r < 0.145)
      return { headers, body: JSON.stringify({ ...body, pad: 'p'.repeat(maxBodyBytes) }), why: 'over the body limit' };
    const applied: string[] = [];
    for (let i = 1 + int(3); i > 0; i--) {
      const [name, op] = pick(ops);
      if (name === 'context' && rng.next() < 0.85) continue; // long bodies are rarer (each costs a thread count)
      try {
        op(body, headers);
        applied.push(name);
      } catch {
        /* the body an earlier operator broke has no messages to change: skipped */
      }
    }
    return { headers, body: JSON.stringify(body), why: applied.join(',') };
  };
}
