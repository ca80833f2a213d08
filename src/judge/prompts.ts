// The two judge prompts: evaluative (+1 / -1 / 0) and hindsight hint (\boxed{1} + hint, or -1).
// Written for small judges: short instructions, one example of the output format, and inputs cut
// to a budget with explicit markers (a tool output can be megabytes). Unlike the reference, the
// judge also sees the user request the turn answered, and the next state's role is named.

import { contentToText, type ChatMessage } from '../chat/messages.js';
import type { NextState, Turn } from '../types.js';
import { HINT_END, HINT_START } from './parse.js';

/** Character budgets for each input (characters, not tokens, so any judge's tokenizer fits). */
export interface PromptLimits {
  /** The user request the turn answered. */
  requestChars: number;
  /** The assistant's reply content. */
  responseChars: number;
  /** Each tool call's arguments. */
  toolArgumentChars: number;
  /** All next-state messages together, shared evenly between them. */
  nextStateChars: number;
}

export const DEFAULT_PROMPT_LIMITS: PromptLimits = {
  requestChars: 2000,
  responseChars: 3000,
  toolArgumentChars: 500,
  nextStateChars: 3000,
};

const EVAL_ROLES = `The next state is one of:
- USER: the user's next message. Moving on, approval or thanks means the reply worked. Asking to redo or retry, correcting it ("no, I meant...", "change X to Y", "fix..."), or asking the same thing again in other words means it did not. A request to change the reply is negative feedback, not a neutral new task.
- TOOL: the output of a tool the assistant called in its reply. It exists only because of that call. A normal result means the call worked; an error or failure caused by the call means it did not.`;

const HINT_ROLES = `The next state is one of:
- USER: the user's next message. Corrections ("no, I meant..."), added preferences or details, complaints and repeated requests hold lessons; thanks or moving on usually holds none.
- TOOL: the output of a tool the assistant called in its reply; it did not exist before the call. A normal result means the call was right, and its content is not something the assistant should have known beforehand. An error can show what the call should have been.`;

export const EVAL_SYSTEM = `You grade one step of an AI assistant's work. You see the user's request, the assistant's reply, and what came right after it (the next state). Use the next state as evidence of whether the reply did what the user wanted.

${EVAL_ROLES}

Scores:
\\boxed{1} the next state shows progress: the reply worked.
\\boxed{-1} the reply was wrong, incomplete or unwanted: a redo, a correction, a rephrased request, or an error.
\\boxed{0} unclear: ambiguous, unrelated, or not enough information.

Think briefly, then end your answer with exactly one score in \\boxed{}.`;

// The format line uses a placeholder, not an example hint, so a small model that copies it
// verbatim writes "your hint", which is too short to be accepted.
export const HINT_SYSTEM = `You help an AI assistant learn from hindsight. You see the user's request, the assistant's reply, and what came right after it (the next state). Decide whether the next state reveals something that would have made the reply better had the assistant known it: a correction, a preference, a missing detail, the cause of an error.

${HINT_ROLES}

If there is such a lesson, answer \\boxed{1} followed by a hint of 1 to 3 sentences that tells the assistant what to do differently, concretely, in your own words (do not copy the next state):
\\boxed{1}
${HINT_START}your hint${HINT_END}

Otherwise answer \\boxed{-1} and nothing else.`;

/** Evaluative prompt: system + user, ready for any chat model. */
export function buildEvalPrompt(
  turn: Turn,
  nextState: NextState,
  limits: PromptLimits = DEFAULT_PROMPT_LIMITS,
): ChatMessage[] {
  const question =
    'Is the next state (a) progress, (b) a correction, redo, rephrased request or error, or (c) unclear? ' +
    'End with \\boxed{1}, \\boxed{-1} or \\boxed{0}.';
  return [
    { role: 'system', content: EVAL_SYSTEM },
    { role: 'user', content: `${inputs(turn, nextState, limits)}\n\n${question}` },
  ];
}

/** Hint prompt: system + user. */
export function buildHintPrompt(
  turn: Turn,
  nextState: NextState,
  limits: PromptLimits = DEFAULT_PROMPT_LIMITS,
): ChatMessage[] {
  const question = `Give your decision, and the hint between ${HINT_START} and ${HINT_END} if it is \\boxed{1}.`;
  return [
    { role: 'system', content: HINT_SYSTEM },
    { role: 'user', content: `${inputs(turn, nextState, limits)}\n\n${question}` },
  ];
}

/** The next state in full (no budget), for the hint copy check. */
export function nextStateText(nextState: NextState): string {
  return nextState.messages.map((m) => contentToText(m.content)).join('\n');
}

/** Keeps the start and the end of a long text (two thirds / one third) around a marker saying how much was cut. */
export function clip(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const head = Math.ceil((maxChars * 2) / 3);
  const tail = maxChars - head;
  return `${text.slice(0, head)}\n[... ${text.length - maxChars} characters cut ...]\n${tail > 0 ? text.slice(-tail) : ''}`;
}

function inputs(turn: Turn, nextState: NextState, limits: PromptLimits): string {
  return [
    `## User request\n${renderRequest(turn.messages, limits)}`,
    `## Assistant reply\n${renderReply(turn.response, limits)}`,
    `## Next state (${describeRoles(nextState.messages)})\n${renderNextState(nextState.messages, turn.response, limits)}`,
  ].join('\n\n');
}

/**
 * The last user message of the prompt (text only), and how many assistant steps already followed
 * it: a turn that answers a tool result is still working on that request.
 */
function renderRequest(messages: readonly ChatMessage[], limits: PromptLimits): string {
  let last = -1;
  for (let i = messages.length - 1; i >= 0 && last < 0; i--) if (messages[i]!.role === 'user') last = i;
  if (last < 0) return '(the conversation has no user message)';
  const text = clip(contentToText(messages[last]!.content).trim(), limits.requestChars) || '(empty message)';
  const steps = messages.slice(last + 1).filter((m) => m.role === 'assistant').length;
  return steps === 0
    ? text
    : `${text}\n[The assistant already took ${steps} step${steps === 1 ? '' : 's'} on this request; the reply below is the next one.]`;
}

/**
 * The reply as the user or the tools received it: content and tool calls. The reasoning is left
 * out: the next state reacts to what was visible, and thinking would crowd a small judge's context.
 */
function renderReply(response: ChatMessage, limits: PromptLimits): string {
  const parts: string[] = [];
  const content = contentToText(response.content).trim();
  if (content !== '') parts.push(clip(content, limits.responseChars));
  for (const call of response.tool_calls ?? []) {
    parts.push(`[calls tool ${call.function.name}] ${clip(call.function.arguments, limits.toolArgumentChars)}`);
  }
  return parts.length > 0 ? parts.join('\n') : '(empty reply)';
}

function describeRoles(messages: readonly ChatMessage[]): string {
  const tool = messages.some((m) => m.role === 'tool');
  const user = messages.some((m) => m.role === 'user');
  if (tool && user) return 'tool output, then a user message';
  if (tool) return messages.length > 1 ? 'tool outputs' : 'tool output';
  return user ? 'a user message' : 'other messages';
}

/** Each message headed by its role; tool results named after the call they answer. */
function renderNextState(messages: readonly ChatMessage[], response: ChatMessage, limits: PromptLimits): string {
  if (messages.length === 0) return '(nothing)';
  const callNames = new Map((response.tool_calls ?? []).map((c) => [c.id, c.function.name]));
  const budget = Math.max(200, Math.floor(limits.nextStateChars / messages.length));
  return messages
    .map((m) => {
      const name = m.role === 'tool' ? (m.name ?? callNames.get(m.tool_call_id ?? '')) : undefined;
      const head =
        m.role === 'tool'
          ? `[TOOL${name ? ` ${name}` : ''}]`
          : `[${m.role === 'developer' ? 'SYSTEM' : m.role.toUpperCase()}]`;
      return `${head}\n${clip(contentToText(m.content).trim(), budget) || '(empty)'}`;
    })
    .join('\n');
}
