// Next-state attribution: given a session's live main turn (answered, waiting for what comes next)
// and the session's new main request, decide what happened to the live turn. Pure: no clock, no
// store, no throwing; every outcome is a value that says why.

import type { ChatMessage } from '../chat/messages.js';
import { hashStep, type CanonicalHistory } from './canonical.js';

/** What the tracker remembers of a session's last main turn: hashes, never text. */
export interface LiveTurn {
  turnId: string;
  /** Canonical entries in the turn's prompt. */
  promptLength: number;
  /** Hash of the canonical prompt followed by the response: chain[promptLength + 1] of a request that extends it. */
  extensionHash: string;
  /** Retry-insensitive hash of the prompt (CanonicalHistory.retryHash). */
  retryHash: string;
  traceId: string | null;
  completedAt: number;
  /** Hash of the response's canonical key (responseHash), to find it again after a compaction. */
  responseHash?: string;
  /** OpenClaw's compaction count when the turn was answered (the `:n` of its session key). */
  compaction?: number | null;
}

export type Attribution =
  /** The session had no live turn: nothing to attribute. */
  | { type: 'none' }
  /** The request extends the live turn: `messages` (as received) are its next state. */
  | { type: 'next_state'; turnId: string; messages: ChatMessage[] }
  /** The request repeats the live turn's prompt (OpenClaw retry or a regenerate): not a next state. */
  | { type: 'superseded'; turnId: string; sameTrace: boolean }
  /** The request does not continue the live turn (an edit, a branch, a compaction that dropped our answer). */
  | { type: 'diverged'; turnId: string; why: 'not_an_extension' | 'nothing_new' };

export function attribute(
  live: LiveTurn | undefined,
  history: CanonicalHistory,
  messages: readonly ChatMessage[],
  traceId: string | null,
  compaction: number | null = null,
): Attribution {
  if (!live) return { type: 'none' };
  const end = live.promptLength + 1;
  if (history.chain.length > end && history.chain[end] === live.extensionHash) {
    const next = nextStateMessages(history, messages, end);
    if (next.length === 0) return { type: 'diverged', turnId: live.turnId, why: 'nothing_new' };
    return { type: 'next_state', turnId: live.turnId, messages: next };
  }
  if (history.retryHash === live.retryHash) {
    return { type: 'superseded', turnId: live.turnId, sameTrace: traceId !== null && traceId === live.traceId };
  }
  // OpenClaw compacted the session since the turn (its count went up): the history before our
  // answer became a summary, but when the answer is kept as the last assistant message, what
  // follows it is still the reply to it.
  if (compaction !== null && live.compaction != null && compaction > live.compaction && live.responseHash) {
    for (let k = history.entries.length - 1; k >= 0; k--) {
      const entry = history.entries[k]!;
      if (messages[entry.index]?.role !== 'assistant') continue;
      if (responseHash(entry.key) !== live.responseHash) break;
      const next = nextStateMessages(history, messages, k + 1);
      if (next.length > 0) return { type: 'next_state', turnId: live.turnId, messages: next };
      break;
    }
  }
  return { type: 'diverged', turnId: live.turnId, why: 'not_an_extension' };
}

/** LiveTurn.responseHash of a response with this canonical key (messageKey). */
export function responseHash(key: string): string {
  return hashStep('', `response\u0000${key}`);
}

/**
 * The persistent messages after the first `from` canonical entries: a user reply, or every tool
 * result of the turn's calls (and whatever followed them). Heartbeat polls that ran in between,
 * with the reply right after each, are automation rather than the user's answer and are dropped,
 * unless nothing else is left.
 */
export function nextStateMessages(
  history: CanonicalHistory,
  messages: readonly ChatMessage[],
  from: number,
): ChatMessage[] {
  const tail = history.entries.slice(from);
  const kept = tail.filter((entry, i) => {
    if (entry.heartbeatPoll) return false;
    const previous = tail[i - 1];
    return !(previous?.heartbeatPoll && messages[entry.index]?.role === 'assistant');
  });
  return (kept.length > 0 ? kept : tail).map((entry) => messages[entry.index]!);
}
