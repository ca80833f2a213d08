// What OpenClaw (2026.9.x, observed in shared/openclaw/captured/) puts into requests, as pure text
// predicates: transient messages it never replays, the rewrites its retries make, and the
// signatures of its side tasks. See shared/docs/openclaw-client.md sections 4.4-4.6.

import { contentToText, type ChatMessage, type ToolSpec } from '../chat/messages.js';

/** Appended as the last user message of every agent request, never replayed. */
export const INTERNAL_CONTEXT_MARKER = '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>';
/** Wraps the user message on a retry: `[ts] [Queued ...below.]\n<original>\n\nContinue the current task ...`. */
const QUEUED_HEADER =
  '[Queued user message from a previous active turn; preserved as context only. Continue with the active prompt below.]';
/** Opens the transient retry message (and the paragraph the queued wrapper appends). */
const CONTINUE_PREFIX = 'Continue the current task from the existing transcript';
const TURN_ABORTED = '<turn_aborted>';
const HEARTBEAT_POLL = '[OpenClaw heartbeat poll]';
/** OpenClaw's main agent system prompt opens with this comment. */
const AGENT_SYSTEM_MARKER = '<!-- openclaw:attempt:STABLE -->';

/** `[Sun 2026-11-29 22:58 UTC] ` and similar: the timestamp OpenClaw puts before user text. */
const TIMESTAMP = /^\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?(?: [^\]\n]{1,40})?\] /;

export type SideTask = 'heartbeat' | 'memory_flush' | 'compaction' | 'activity_recap' | 'dreaming' | 'cron';

export function withoutTimestamp(text: string): string {
  return text.replace(TIMESTAMP, '');
}

export function textOf(message: ChatMessage): string {
  return contentToText(message.content);
}

/** OpenClaw's per-request context message: transient, never part of the replayed history. */
export function isInternalContext(message: ChatMessage): boolean {
  return message.role === 'user' && textOf(message).startsWith(INTERNAL_CONTEXT_MARKER);
}

/** The transient "[ts] Continue the current task ..." user message added to a retry after a timeout. */
export function isRetryContinuation(message: ChatMessage): boolean {
  return message.role === 'user' && withoutTimestamp(textOf(message)).startsWith(CONTINUE_PREFIX);
}

/** "[ts] <turn_aborted>...": persisted in history after a timed-out attempt. */
export function isTurnAborted(message: ChatMessage): boolean {
  return message.role === 'user' && withoutTimestamp(textOf(message)).startsWith(TURN_ABORTED);
}

/** A heartbeat prompt as it appears in later history: "[ts] [OpenClaw heartbeat poll]...". */
export function isHeartbeatPoll(message: ChatMessage): boolean {
  return message.role === 'user' && withoutTimestamp(textOf(message)).startsWith(HEARTBEAT_POLL);
}

/**
 * The part of a user message that survives OpenClaw's retry rewrites: the timestamp (renewed after
 * a minute), the queued-message wrapper and its "Continue the current task" paragraph, and the
 * `Runtime:` trailer are dropped. Two renderings of one user message give the same body.
 */
export function userMessageBody(text: string): string {
  let body = withoutTimestamp(text);
  if (body.startsWith(QUEUED_HEADER)) body = withoutTimestamp(body.slice(QUEUED_HEADER.length).replace(/^\n/, ''));
  for (const cut of [`\n\n${CONTINUE_PREFIX}`, '\n\nRuntime: ']) {
    const at = body.indexOf(cut);
    if (at >= 0) body = body.slice(0, at);
  }
  return body.trim();
}

/**
 * `sessionId=<id>` of the `Runtime:` line OpenClaw ends a session's first user message with (a
 * trailer of its text, or its own content part after a compaction; never the system prompt). Only
 * the first user message is read: a line pasted into a later message names no session.
 */
export function runtimeSessionId(messages: readonly ChatMessage[]): string | undefined {
  const first = messages.find((m) => m.role === 'user');
  if (!first) return undefined;
  const text = textOf(first);
  const trailer = text.lastIndexOf('\nRuntime: ');
  const start = trailer >= 0 ? trailer + 1 : text.startsWith('Runtime: ') ? 0 : -1;
  if (start < 0) return undefined;
  const line = text.slice(start).split('\n', 1)[0]!;
  return /\| sessionId=([^\s|]{1,128})/.exec(line)?.[1];
}

/**
 * The user's own message inside OpenClaw's retry wrapper, as its transcript keeps it:
 * `[ts] [Queued ...below.]\n<original>\n\nContinue the current task ...` becomes `[ts] <original>`
 * (anything after the wrapper's paragraph, such as the `Runtime:` trailer, stays). Undefined when
 * the text is not wrapped.
 */
export function unwrapQueuedText(text: string): string | undefined {
  const timestamp = TIMESTAMP.exec(text)?.[0] ?? '';
  if (!text.startsWith(QUEUED_HEADER, timestamp.length)) return undefined;
  let original = text.slice(timestamp.length + QUEUED_HEADER.length).replace(/^\n/, '');
  let after = '';
  // The wrapper's paragraph is the last one opening with these words: the user may have written them too.
  const at = original.lastIndexOf(`\n\n${CONTINUE_PREFIX}`);
  if (at >= 0) {
    const end = original.indexOf('\n\n', at + 2);
    after = end < 0 ? '' : original.slice(end);
    original = original.slice(0, at);
  }
  return (TIMESTAMP.test(original) ? '' : timestamp) + original + after;
}

/** A user message with OpenClaw's retry wrapper removed from its text (each text part); others as they are. */
export function withoutQueuedWrapper(message: ChatMessage): ChatMessage {
  if (message.role !== 'user') return message;
  const content = message.content;
  if (typeof content === 'string') {
    const unwrapped = unwrapQueuedText(content);
    return unwrapped === undefined ? message : { ...message, content: unwrapped };
  }
  if (!Array.isArray(content)) return message;
  const parts = content.map((p) => {
    const unwrapped = unwrapQueuedText(p.text);
    return unwrapped === undefined ? p : { ...p, text: unwrapped };
  });
  return parts.every((p, i) => p === content[i]) ? message : { ...message, content: parts };
}

/** The last user message that OpenClaw itself did not add (internal context, retry continuation). */
function lastRealUserText(messages: readonly ChatMessage[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'user') return undefined;
    if (isInternalContext(m) || isRetryContinuation(m)) continue;
    return userMessageBody(textOf(m));
  }
  return undefined;
}

/**
 * Recognises OpenClaw's housekeeping requests without any routing config. Heartbeat polls,
 * memory flushes, compaction summaries, activity recaps, dreaming and cron runs are side turns.
 */
export function openClawSideTask(
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[] | undefined,
  sessionKey: string | undefined,
): SideTask | undefined {
  const system = messages[0]?.role === 'system' || messages[0]?.role === 'developer' ? textOf(messages[0]) : '';
  if (system.startsWith('You are a context summarization assistant')) return 'compaction';
  if (system.startsWith('Write an Activity recap')) return 'activity_recap';
  if (system.startsWith('You are keeping a dream diary')) return 'dreaming';
  if (sessionKey?.startsWith('openclaw-cron-')) return 'cron';
  const last = lastRealUserText(messages);
  if (last !== undefined) {
    if (last.startsWith('Follow the heartbeat monitor scratch context')) return 'heartbeat';
    if (last.startsWith('Pre-compaction memory flush')) return 'memory_flush';
    if (last.startsWith('[cron:')) return 'cron';
  }
  const names = (tools ?? [])
    .map((t) => t.function.name)
    .sort()
    .join(',');
  if (system.startsWith(AGENT_SYSTEM_MARKER) && names === 'read,write') return 'memory_flush';
  return undefined;
}

/** An ordinary OpenClaw agent turn: its agent system prompt with tools, and no side-task signature. */
export function isOpenClawAgentTurn(messages: readonly ChatMessage[], tools: readonly ToolSpec[] | undefined): boolean {
  const first = messages[0];
  return (
    first !== undefined &&
    first.role === 'system' &&
    textOf(first).startsWith(AGENT_SYSTEM_MARKER) &&
    (tools?.length ?? 0) > 0
  );
}
