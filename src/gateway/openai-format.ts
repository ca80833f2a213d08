// The OpenAI wire shapes for chat completions: non-streamed completion objects and streamed
// chunks. Pure mapping functions.

import type { ChatMessage } from '../chat/messages.js';
import type { AnswerDelta, LogprobEntry } from './assembler.js';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** OpenAI's field for prompt tokens served from a cache (here: the engine's prefix cache). */
  prompt_tokens_details?: { cached_tokens: number };
}

export interface CompletionIds {
  id: string;
  created: number;
  model: string;
}

export function usageOf(promptTokens: number, completionTokens: number, cachedTokens?: number): Usage {
  const usage: Usage = {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
  if (cachedTokens !== undefined) usage.prompt_tokens_details = { cached_tokens: cachedTokens };
  return usage;
}

export function completionObject(
  ids: CompletionIds,
  message: ChatMessage,
  finishReason: string,
  usage: Usage,
  logprobs: LogprobEntry[] | null,
) {
  const msg: Record<string, unknown> = { role: 'assistant', content: message.content ?? null };
  if (message.reasoning_content) msg.reasoning_content = message.reasoning_content;
  if (message.tool_calls?.length) msg.tool_calls = message.tool_calls;
  return {
    id: ids.id,
    object: 'chat.completion',
    created: ids.created,
    model: ids.model,
    choices: [
      {
        index: 0,
        message: msg,
        logprobs: logprobs === null ? null : { content: logprobs },
        finish_reason: finishReason,
      },
    ],
    usage,
  };
}

interface ChunkOptions {
  logprobs?: LogprobEntry[] | null;
  finishReason?: string | null;
  /** With stream_options.include_usage every chunk carries `usage: null` except the last. */
  includeUsage: boolean;
}

export function chunkObject(ids: CompletionIds, delta: Record<string, unknown>, opts: ChunkOptions) {
  return {
    id: ids.id,
    object: 'chat.completion.chunk',
    created: ids.created,
    model: ids.model,
    choices: [
      {
        index: 0,
        delta,
        logprobs: opts.logprobs && opts.logprobs.length > 0 ? { content: opts.logprobs } : null,
        finish_reason: opts.finishReason ?? null,
      },
    ],
    ...(opts.includeUsage ? { usage: null } : {}),
  };
}

/**
 * Streamed chunks without log-probs or a finish reason, serialised from a template: the parts
 * every chunk of a response shares are serialised once, so a token costs one JSON.stringify of its
 * delta. The text is exactly JSON.stringify(chunkObject(ids, delta, ...)) (a test compares them).
 */
export class ChunkTemplate {
  private readonly head: string;
  private readonly tail: string;

  constructor(ids: CompletionIds, includeUsage: boolean) {
    const whole = JSON.stringify(chunkObject(ids, {}, { includeUsage }));
    // The last match is the key: an id or model with the same text is escaped (\") inside its string.
    const at = whole.lastIndexOf('"delta":{}') + '"delta":'.length;
    this.head = whole.slice(0, at);
    this.tail = whole.slice(at + '{}'.length);
  }

  chunk(delta: Record<string, unknown>): string {
    return this.head + JSON.stringify(delta) + this.tail;
  }
}

export function usageChunk(ids: CompletionIds, usage: Usage) {
  return { id: ids.id, object: 'chat.completion.chunk', created: ids.created, model: ids.model, choices: [], usage };
}

/**
 * The chunk deltas for answer pieces. A tool call goes out as OpenAI streams one: a first delta
 * with index, id, type and name (empty arguments), then a delta with the argument text.
 */
export function deltasOf(pieces: readonly AnswerDelta[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const p of pieces) {
    if (p.type === 'content') out.push({ content: p.text });
    else if (p.type === 'reasoning') out.push({ reasoning_content: p.text });
    else {
      out.push({
        tool_calls: [{ index: p.index, id: p.id, type: 'function', function: { name: p.name, arguments: '' } }],
      });
      out.push({ tool_calls: [{ index: p.index, function: { arguments: p.arguments } }] });
    }
  }
  return out;
}
