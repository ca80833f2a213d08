// TEST DOUBLE: a fake OpenAI-compatible judge endpoint on 127.0.0.1, for the judge tests only.
// It answers deterministically from the prompt's content. A script tag anywhere in the prompt's
// user message (the last one, when several) says what the k-th vote with that tag gets, in arrival order (cycling), and
// `a>b>c` what its successive attempts get (a retry is a request with a seed seen before):
//   {{eval: 1|1|-1}}   {{hint: hint=Use metric units from the start.|nohint}}   {{eval: 500>1}}
// Entries: 1, +1, -1, 0 (an answer ending in that box); hint=TEXT (\boxed{1} + TEXT as the hint);
// hint#K (\boxed{1} + hints[K] of startJudgeDouble's options, so the hint need not appear in the prompt);
// nohint (\boxed{-1}); think=V (a box inside <think>, then \boxed{V}); garbage (no box);
// refuse (an OpenAI refusal); notjson (200 with HTML); close (the socket is destroyed);
// hang (no answer until the client gives up); any 3-digit number (that HTTP status).
// Votes of one turn share a prompt, so the multiset of their answers is deterministic even though
// their arrival order is not. Without a tag: eval says 1 if the next state thanks, -1 if it says
// "wrong" or starts with "no", else 0; hint says -1. `force` overrides everything.

import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventEmitter } from 'node:events';
import type { ChatMessage, ToolCall } from '../../src/chat/messages.js';
import type { ClosedTurn, Turn } from '../../src/types.js';

export interface DoubleRequest {
  kind: 'eval' | 'hint' | 'other';
  authorization: string | null;
  /** The parsed JSON body (model, messages, temperature, max_tokens, seed...). */
  body: {
    model?: string;
    messages?: { role: string; content: string }[];
    temperature?: number;
    max_tokens?: number;
    seed?: number;
    [k: string]: unknown;
  };
  /** The entry that answered it. */
  action: string;
}

export interface JudgeDouble {
  /** Base URL including /v1, for OpenAIJudgeClient. */
  url: string;
  requests: DoubleRequest[];
  /** When set, every request gets this entry regardless of tags. */
  force: string | null;
  /** Resolves once at least n requests have arrived in total. */
  arrived(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function startJudgeDouble(options: { hints?: string[] } = {}): Promise<JudgeDouble> {
  const scripts = new Map<string, { next: number; bySeed: Map<number, { alternative: number; attempt: number }> }>();
  const events = new EventEmitter();
  const requests: DoubleRequest[] = [];
  const double: JudgeDouble = {
    url: '',
    requests,
    force: null,
    arrived: (n) =>
      new Promise((resolve) => {
        const check = () => {
          if (requests.length >= n) {
            events.off('request', check);
            resolve();
          }
        };
        events.on('request', check);
        check();
      }),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const server = createServer((req, res) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      data += chunk;
    });
    req.on('end', () => handle(req, res, data));
  });

  function handle(req: IncomingMessage, res: ServerResponse, data: string): void {
    const body = JSON.parse(data) as DoubleRequest['body'];
    const system = body.messages?.find((m) => m.role === 'system')?.content ?? '';
    const user = body.messages?.find((m) => m.role === 'user')?.content ?? '';
    const kind = system.includes('[HINT_START]') ? 'hint' : system.includes('\\boxed') ? 'eval' : 'other';
    const chosen = double.force ?? scripted(kind, user, body.seed) ?? fallback(kind, user);
    const action = chosen.startsWith('hint#') ? `hint=${options.hints?.[Number(chosen.slice(5))] ?? ''}` : chosen;
    requests.push({ kind, authorization: req.headers.authorization ?? null, body, action });
    events.emit('request');
    respond(res, action);
  }

  function scripted(kind: string, user: string, seed: number | undefined): string | null {
    // The last tag wins: in a conversation, the request above the next state carries earlier tags.
    const tag = [...user.matchAll(new RegExp(`\\{\\{${kind}:([^}]*)\\}\\}`, 'g'))].pop();
    if (!tag) return null;
    const alternatives = tag[1]!.split('|').map((e) => e.split('>').map((a) => a.trim()));
    const key = `${kind}\u0000${user}`;
    const state = scripts.get(key) ?? { next: 0, bySeed: new Map<number, { alternative: number; attempt: number }>() };
    scripts.set(key, state);
    // A seed seen before is a retry of the same vote: it moves along its own chain.
    const known = seed === undefined ? undefined : state.bySeed.get(seed);
    const vote = known
      ? { alternative: known.alternative, attempt: known.attempt + 1 }
      : { alternative: state.next++, attempt: 0 };
    if (seed !== undefined) state.bySeed.set(seed, vote);
    const chain = alternatives[vote.alternative % alternatives.length]!;
    return chain[Math.min(vote.attempt, chain.length - 1)]!;
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  double.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return double;
}

function fallback(kind: string, user: string): string {
  if (kind !== 'eval') return kind === 'hint' ? 'nohint' : 'garbage';
  const next = (user.split('## Next state')[1] ?? '').toLowerCase();
  if (next.includes('thank')) return '1';
  if (next.includes('wrong') || /\]\n\s*no\b/.test(next)) return '-1';
  return '0';
}

function respond(res: ServerResponse, action: string): void {
  if (action === 'hang') return; // the client's timeout, or close(), ends it
  if (action === 'close') {
    res.socket?.destroy();
    return;
  }
  if (/^\d{3}$/.test(action))
    return json(res, Number(action), { error: { message: `double says ${action}`, type: 'server_error' } });
  if (action === 'notjson') {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<html>not an API</html>');
    return;
  }
  if (action === 'refuse') return completion(res, null, "I can't help with that.");
  let text: string;
  if (action.startsWith('hint='))
    text = `The user corrected the reply.\n\\boxed{1}\n[HINT_START] ${action.slice(5)} [HINT_END]`;
  else if (action === 'nohint') text = 'Nothing to learn here.\n\\boxed{-1}';
  else if (action.startsWith('think='))
    text = `<think>At first \\boxed{-1}? No.</think>Verdict: \\boxed{${action.slice(6)}}`;
  else if (action === 'garbage') text = 'I am not sure what to say about this.';
  else text = `(b) or (a)... after reading the next state: \\boxed{${action}}`;
  completion(res, text, null);
}

function completion(res: ServerResponse, content: string | null, refusal: string | null): void {
  json(res, 200, {
    id: 'chatcmpl-double',
    object: 'chat.completion',
    created: 0,
    model: 'double',
    choices: [{ index: 0, message: { role: 'assistant', content, refusal }, finish_reason: 'stop' }],
  });
}

function json(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

// Fixtures: closed turns as the sessions folder produces them, with only what the judge reads filled in.

export interface TurnFixture {
  id?: string;
  /** Messages of the prompt (the conversation before the reply). */
  prompt?: ChatMessage[];
  request?: string;
  reply?: string | null;
  toolCalls?: ToolCall[];
  /** The next state's messages; null: the turn closed without one. */
  next: ChatMessage[] | null;
}

let fixtureCount = 0;

export function makeClosedTurn(f: TurnFixture): ClosedTurn {
  const id = f.id ?? `turn_${(++fixtureCount).toString(16).padStart(24, '0')}`;
  const response: ChatMessage = {
    role: 'assistant',
    content: f.reply ?? null,
    ...(f.toolCalls ? { tool_calls: f.toolCalls } : {}),
  };
  const turn: Turn = {
    id,
    sessionId: 's1',
    sessionSource: 'x-session-id',
    kind: 'main',
    kindReason: 'default',
    compaction: null,
    traceId: null,
    model: 'policy',
    messages: f.prompt ?? [
      { role: 'system', content: 'You are helpful.' },
      { role: 'user', content: f.request ?? 'Hello' },
    ],
    tools: null,
    sampling: {
      temperature: 1,
      topP: 1,
      topK: 0,
      maxTokens: 100,
      stop: [],
      seed: 1,
      topLogprobs: 0,
      defaultsFrom: 'openai',
    },
    promptIds: [1, 2, 3],
    completionIds: [4, 5],
    logprobs: [-1, -1],
    sampledLogprobs: [-1, -1],
    response,
    finishReason: 'stop_token',
    policyVersion: 0,
    receivedAt: 0,
    firstTokenAt: 1,
    completedAt: 2,
    toolCallErrors: [],
    retemplate: null,
  };
  return {
    turn,
    nextState: f.next === null ? null : { messages: f.next, nextTurnId: `${id}_next`, arrivedAt: 3 },
    closure: f.next === null ? 'no_next_state' : 'next_state',
    closedAt: 4,
  };
}
