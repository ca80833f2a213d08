// The next state a closure records. Its messages are what the judge and the learner read, so they
// carry the user's own words: OpenClaw resends a message whose request failed (a 5xx, a restart of
// this server) wrapped in its retry text, and a judge reading "[Queued user message ...] ...
// Continue the current task ..." grades OpenClaw's wrapper rather than the user's reply. The
// messages exactly as received are kept beside them.

import type { ChatMessage } from '../chat/messages.js';
import type { NextState } from '../types.js';
import { withoutQueuedWrapper } from './openclaw.js';

/** A next state as stored: `rawMessages`, the messages as received, only when they differ from `messages`. */
export interface RecordedNextState extends NextState {
  rawMessages?: ChatMessage[];
}

export function recordedNextState(
  received: readonly ChatMessage[],
  nextTurnId: string,
  arrivedAt: number,
): RecordedNextState {
  const messages = received.map(withoutQueuedWrapper);
  const unwrapped = messages.some((m, i) => m !== received[i]);
  return { messages, nextTurnId, arrivedAt, ...(unwrapped ? { rawMessages: [...received] } : {}) };
}
