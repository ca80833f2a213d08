// Replays captured OpenClaw traffic (shared/openclaw/captured/*.jsonl) through a running gateway,
// the way OpenClaw would have sent it had it been talking to us: each request as captured, except
// that the assistant messages it replays (and the tool-call ids it sanitised) are the answers our
// gateway actually gave, substituted for the stub's. Requests the client abandoned are aborted.

import { readFileSync } from 'node:fs';
import type { ChatMessage, ToolCall } from '../../src/chat/messages.js';
import { sseEvents } from './gateway.js';

export const CAPTURED_DIR = new URL('../../../../shared/openclaw/captured/', import.meta.url);

export interface CapturedEntry {
  seq: number;
  ts: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: { messages?: ChatMessage[]; tools?: string[]; tools_chars?: number; [k: string]: unknown } | null;
  response: {
    status: number | string;
    reply?: { content: string; tool_calls: ToolCall[]; reasoning_content?: string };
  };
}

export function loadCapture(name: string): CapturedEntry[] {
  return readFileSync(new URL(name, CAPTURED_DIR), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as CapturedEntry);
}

/** What our gateway answered one replayed request with. */
export interface ReplayedAnswer {
  seq: number;
  status: number;
  turnId: string | null;
  sessionId: string | null;
  kind: string | null;
  reply: ChatMessage | null;
}

export interface ReplayOptions {
  url: string;
  apiKey?: string;
  /** Called before each chat request with the stub's reply (null when the stub failed it). */
  beforeChat?: (entry: CapturedEntry) => void;
  /** Overrides applied to every chat body (e.g. a small max_completion_tokens for a real model). */
  bodyOverrides?: Record<string, unknown>;
  /** Sets the gateway's clock to a capture timestamp. */
  setClock?: (ms: number) => void;
}

const sanitize = (id: string) => id.replace(/_/g, '');
const SKIP_HEADERS = new Set(['host', 'content-length', 'connection', 'accept-encoding', 'authorization']);

export async function replay(entries: CapturedEntry[], opts: ReplayOptions): Promise<ReplayedAnswer[]> {
  const byContent = new Map<string, ChatMessage>(); // stub reply text -> our reply
  const byCallId = new Map<string, ChatMessage>(); // sanitised stub tool-call id -> our reply
  const callIds = new Map<string, string>(); // sanitised stub id -> sanitised id of ours
  const answers: ReplayedAnswer[] = [];
  for (const entry of entries) {
    opts.setClock?.(Date.parse(entry.ts));
    if (entry.method === 'GET') {
      // The e2e recipe polls the stub's own health route; ours is /healthz.
      const res = await fetch(opts.url + (entry.path === '/__stub/health' ? '/healthz' : entry.path));
      answers.push({ seq: entry.seq, status: res.status, turnId: null, sessionId: null, kind: null, reply: null });
      continue;
    }
    const body = rewriteBody(entry, { byContent, byCallId, callIds }, opts.bodyOverrides ?? {});
    opts.beforeChat?.(entry);
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    for (const [k, v] of Object.entries(entry.headers)) if (!SKIP_HEADERS.has(k)) headers[k] = v;
    if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
    const aborted = entry.response.status === 'client-aborted';
    const answer = await send(opts.url, body, headers, aborted);
    answers.push({ seq: entry.seq, ...answer });
    const stub = entry.response.reply;
    if (!stub || !answer.reply) continue;
    if (stub.tool_calls.length > 0) {
      stub.tool_calls.forEach((call, i) => {
        byCallId.set(sanitize(call.id), answer.reply!);
        const ours = answer.reply!.tool_calls?.[i]?.id;
        if (ours) callIds.set(sanitize(call.id), sanitize(ours));
      });
    } else {
      byContent.set(stub.content.trim(), answer.reply);
    }
  }
  return answers;
}

function rewriteBody(
  entry: CapturedEntry,
  maps: { byContent: Map<string, ChatMessage>; byCallId: Map<string, ChatMessage>; callIds: Map<string, string> },
  overrides: Record<string, unknown>,
): Record<string, unknown> {
  const { tools, tools_chars: _chars, ...rest } = entry.body ?? {};
  const messages = (entry.body?.messages ?? []).map((m): ChatMessage => {
    if (m.role === 'tool' && m.tool_call_id)
      return { ...m, tool_call_id: maps.callIds.get(m.tool_call_id) ?? m.tool_call_id };
    if (m.role !== 'assistant') return m;
    const ours = m.tool_calls?.length
      ? maps.byCallId.get(m.tool_calls[0]!.id)
      : maps.byContent.get(typeof m.content === 'string' ? m.content.trim() : '');
    if (!ours) return m;
    // As OpenClaw replays an answer: content verbatim, reasoning kept, tool-call ids without '_'.
    const out: ChatMessage = { role: 'assistant', content: ours.content ?? null };
    if (ours.reasoning_content) out.reasoning_content = ours.reasoning_content;
    if (ours.tool_calls?.length) out.tool_calls = ours.tool_calls.map((c) => ({ ...c, id: sanitize(c.id) }));
    return out;
  });
  const specs = (tools ?? []).map((name) => ({
    type: 'function',
    function: { name, description: `the ${name} tool`, parameters: { type: 'object', properties: {} } },
  }));
  return { ...rest, messages, ...(specs.length > 0 ? { tools: specs } : {}), ...overrides };
}

async function send(
  url: string,
  body: Record<string, unknown>,
  headers: Record<string, string>,
  abortEarly: boolean,
): Promise<Omit<ReplayedAnswer, 'seq'>> {
  const controller = new AbortController();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const meta = {
    status: res.status,
    turnId: res.headers.get('x-turn-id'),
    sessionId: res.headers.get('x-session-id'),
    kind: res.headers.get('x-turn-type'),
  };
  if (abortEarly) {
    const reader = res.body!.getReader();
    await reader.read(); // the role chunk: the request is being answered; then the client gives up
    controller.abort();
    await reader.closed.catch(() => {});
    return { ...meta, reply: null };
  }
  const text = await res.text();
  if (res.status !== 200) return { ...meta, reply: null };
  return { ...meta, reply: body.stream ? replyFromSse(text) : (JSON.parse(text).choices[0].message as ChatMessage) };
}

/** Accumulates streamed deltas into the assistant message, as an OpenAI client does. */
export function replyFromSse(text: string): ChatMessage {
  let content = '';
  let reasoning = '';
  const calls: ToolCall[] = [];
  for (const e of sseEvents(text)) {
    if (e === '[DONE]' || !e.choices?.length) continue;
    const d = e.choices[0].delta;
    if (d.content) content += d.content;
    if (d.reasoning_content) reasoning += d.reasoning_content;
    for (const tc of d.tool_calls ?? []) {
      const call = (calls[tc.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
      if (tc.id) call.id = tc.id;
      if (tc.function?.name) call.function.name = tc.function.name;
      if (tc.function?.arguments) call.function.arguments += tc.function.arguments;
    }
  }
  const out: ChatMessage = { role: 'assistant', content: content === '' && calls.length > 0 ? null : content };
  if (reasoning) out.reasoning_content = reasoning;
  if (calls.length > 0) out.tool_calls = calls;
  return out;
}
