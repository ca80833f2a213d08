// Canonical keys for comparing histories across requests. Two requests of one conversation render
// the same message differently (OpenClaw sanitises tool-call ids, re-wraps retried user text, adds
// transient context messages), so attribution compares keys, never raw JSON. Pure functions.

import { createHash } from 'node:crypto';
import type { ChatMessage } from '../chat/messages.js';
import {
  isHeartbeatPoll,
  isInternalContext,
  isRetryContinuation,
  isTurnAborted,
  textOf,
  userMessageBody,
} from './openclaw.js';

/** One message of a request that is part of the persistent history (transient ones are left out). */
export interface CanonicalEntry {
  /** Index into the request's messages. */
  index: number;
  key: string;
  /** "[ts] <turn_aborted>": kept in history, but a retry adds it, so retry comparison skips it. */
  turnAborted: boolean;
  heartbeatPoll: boolean;
}

/** A request's history in canonical form, with the hashes attribution compares. */
export interface CanonicalHistory {
  entries: CanonicalEntry[];
  /** chain[k] = hash of the first k entries; chain[0] is the empty history. */
  chain: string[];
  /** Hash of the entries without turn-aborted messages: equal for a request and its retries. */
  retryHash: string;
}

/** OpenClaw rewrites `call_abc` to `callabc`; compare ids on their letters and digits only. */
export function toolCallIdKey(id: string | undefined): string {
  return (id ?? '').replace(/[^A-Za-z0-9]/g, '');
}

/** Tool-call arguments compared as parsed JSON (key order and spacing may change on replay). */
function argumentsKey(text: string): string {
  try {
    return stableJson(JSON.parse(text));
  } catch {
    return text.trim();
  }
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The comparable form of one message: role, whitespace-trimmed text (user text reduced to the body
 * that survives retry rewrites), tool calls by name, parsed arguments and sanitised id, and the
 * sanitised id a tool result answers. Reasoning is left out: clients may or may not replay it.
 */
export function messageKey(message: ChatMessage): string {
  const role = message.role === 'developer' ? 'system' : message.role;
  const text = role === 'user' ? userMessageBody(textOf(message)) : textOf(message).trim();
  const calls = (message.tool_calls ?? []).map((c) => [
    c.function.name,
    argumentsKey(c.function.arguments),
    toolCallIdKey(c.id),
  ]);
  const parts: unknown[] = [role, text];
  if (calls.length > 0) parts.push(calls);
  if (role === 'tool') parts.push(toolCallIdKey(message.tool_call_id));
  return JSON.stringify(parts);
}

export function hashStep(previous: string, key: string): string {
  return createHash('sha256').update(previous).update('\u0000').update(key).digest('base64url').slice(0, 32);
}

const EMPTY = hashStep('', 'history');

/** A request's messages with their canonical history, kept so the session's next request can reuse it. */
export interface CanonicalizedRequest {
  messages: readonly ChatMessage[];
  history: CanonicalHistory;
}

/**
 * The canonical history of `messages`. With `previous` (the same session's last request), the
 * messages both share from the start keep their entries and chain hashes: an agent resends its
 * whole history each turn, and keying and hashing hundreds of messages cost about 1 ms per request.
 */
export function canonicalize(messages: readonly ChatMessage[], previous?: CanonicalizedRequest): CanonicalHistory {
  let same = 0;
  if (previous) {
    const n = Math.min(messages.length, previous.messages.length);
    while (same < n && sameMessage(messages[same]!, previous.messages[same]!)) same++;
  }
  const reused = previous ? countBelow(previous.history.entries, same) : 0;
  const entries: CanonicalEntry[] = previous ? previous.history.entries.slice(0, reused) : [];
  const chain = previous ? previous.history.chain.slice(0, reused + 1) : [EMPTY];
  for (let index = same; index < messages.length; index++) {
    const m = messages[index]!;
    if (isInternalContext(m) || isRetryContinuation(m)) continue;
    const e = { index, key: messageKey(m), turnAborted: isTurnAborted(m), heartbeatPoll: isHeartbeatPoll(m) };
    entries.push(e);
    chain.push(hashStep(chain[chain.length - 1]!, e.key));
  }
  // Without turn-aborted messages the retry hash is the chain's last: one hash per message, not two.
  let retryHash = chain[chain.length - 1]!;
  if (entries.some((e) => e.turnAborted)) {
    retryHash = EMPTY;
    for (const e of entries) if (!e.turnAborted) retryHash = hashStep(retryHash, e.key);
  }
  return { entries, chain, retryHash };
}

/** Entries (sorted by index) of messages before `index`. */
function countBelow(entries: readonly CanonicalEntry[], index: number): number {
  let k = 0;
  while (k < entries.length && entries[k]!.index < index) k++;
  return k;
}

/** Equal in everything a canonical entry reads (role, content, tool calls, tool-call id) and the name. */
function sameMessage(a: ChatMessage, b: ChatMessage): boolean {
  return (
    a === b ||
    (a.role === b.role &&
      a.tool_call_id === b.tool_call_id &&
      a.name === b.name &&
      sameValue(a.content, b.content) &&
      sameValue(a.tool_calls, b.tool_calls))
  );
}

function sameValue(a: unknown, b: unknown): boolean {
  return (
    a === b ||
    (typeof a === 'object' &&
      typeof b === 'object' &&
      a !== null &&
      b !== null &&
      JSON.stringify(a) === JSON.stringify(b))
  );
}

/** Hash of a history followed by one more message (a turn's prompt + its response). */
export function extendChain(chainHash: string, message: ChatMessage): string {
  return hashStep(chainHash, messageKey(message));
}
