// Splits generated text into what the OpenAI API reports separately: reasoning (<think>...</think>),
// tool calls (Qwen-style <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks) and content.
// One state machine serves both the streaming parser and parseCompletion, so they cannot disagree.

import { randomBytes } from 'node:crypto';
import type { ToolCall } from './messages.js';

const THINK_OPEN = '<think>';
const THINK_CLOSE = '</think>';
const CALL_OPEN = '<tool_call>';
const CALL_CLOSE = '</tool_call>';

export interface ToolCallError {
  /** The markup as generated, from <tool_call> to </tool_call> (or the end, when it never closed). */
  raw: string;
  message: string;
}

export type StreamDelta =
  | { type: 'content'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool_call'; index: number; id: string; name: string; arguments: string }
  | { type: 'tool_call_error'; raw: string; message: string };

export interface CompletionParseOptions {
  /** The prompt already opened <think>, so the text starts inside the reasoning. */
  thinkingOpen?: boolean;
  /** Makes tool-call ids; default `call_` + 24 random hex digits. */
  newToolCallId?: () => string;
}

export interface ParsedCompletion {
  /** Text outside reasoning and tool calls, trimmed; null when empty and there are tool calls. */
  content: string | null;
  /** Text of all reasoning blocks, trimmed; null when there is none. */
  reasoningContent: string | null;
  toolCalls: ToolCall[];
  toolCallErrors: ToolCallError[];
}

export function parseCompletion(text: string, opts: CompletionParseOptions = {}): ParsedCompletion {
  const parser = new CompletionStreamParser(opts);
  const deltas = [...parser.push(text), ...parser.finish()];
  let content = '';
  let reasoning = '';
  const toolCalls: ToolCall[] = [];
  const toolCallErrors: ToolCallError[] = [];
  for (const delta of deltas) {
    if (delta.type === 'content') content += delta.text;
    else if (delta.type === 'reasoning') reasoning += delta.text;
    else if (delta.type === 'tool_call') {
      toolCalls.push({ id: delta.id, type: 'function', function: { name: delta.name, arguments: delta.arguments } });
    } else toolCallErrors.push({ raw: delta.raw, message: delta.message });
  }
  return {
    content: content === '' && toolCalls.length > 0 ? null : content,
    reasoningContent: reasoning === '' ? null : reasoning,
    toolCalls,
    toolCallErrors,
  };
}

type Mode = 'content' | 'reasoning' | 'tool_call';

/**
 * Incremental parser: feed text deltas as they are decoded. Text that might be the start of a tag
 * ("<", "<tool_") is held back until the next delta settles it, so markup never leaks into content;
 * a tool call is emitted whole once its closing tag arrives.
 */
export class CompletionStreamParser {
  private mode: Mode;
  /** Unsettled text: a possible tag prefix, or in tool_call mode the call's body so far. */
  private pending = '';
  /** In tool_call mode, how much of `pending` is known not to contain the start of </tool_call>. */
  private scanned = 0;
  private readonly content = new TrimmedChannel();
  private readonly reasoning = new TrimmedChannel();
  private toolCallCount = 0;
  private readonly newToolCallId: () => string;

  constructor(opts: CompletionParseOptions = {}) {
    this.mode = opts.thinkingOpen ? 'reasoning' : 'content';
    this.newToolCallId = opts.newToolCallId ?? (() => `call_${randomBytes(12).toString('hex')}`);
  }

  push(textDelta: string): StreamDelta[] {
    this.pending += textDelta;
    const out: StreamDelta[] = [];
    this.drain(out, false);
    return out;
  }

  /** Ends the text: held-back text counts as text, an unclosed tool call is an error. */
  finish(): StreamDelta[] {
    const out: StreamDelta[] = [];
    this.drain(out, true);
    if (this.mode === 'tool_call') {
      out.push({ type: 'tool_call_error', raw: CALL_OPEN + this.pending, message: 'tool call never closed' });
      this.pending = '';
    }
    return out;
  }

  private drain(out: StreamDelta[], final: boolean): void {
    for (;;) {
      if (this.mode === 'tool_call') {
        const end = this.pending.indexOf(CALL_CLOSE, this.scanned);
        if (end < 0) {
          // Long arguments arrive in many small deltas; do not rescan them every time.
          this.scanned = Math.max(0, this.pending.length - CALL_CLOSE.length + 1);
          return;
        }
        this.scanned = 0;
        out.push(this.toolCall(this.pending.slice(0, end)));
        this.pending = this.pending.slice(end + CALL_CLOSE.length);
        this.mode = 'content';
        continue;
      }
      const tags = this.mode === 'content' ? [THINK_OPEN, CALL_OPEN] : [THINK_CLOSE];
      const found = earliest(this.pending, tags);
      if (found) {
        this.emit(out, this.pending.slice(0, found.at));
        this.pending = this.pending.slice(found.at + found.tag.length);
        this.mode = found.tag === THINK_OPEN ? 'reasoning' : found.tag === CALL_OPEN ? 'tool_call' : 'content';
        continue;
      }
      const held = final ? 0 : tagPrefixLength(this.pending, tags);
      this.emit(out, this.pending.slice(0, this.pending.length - held));
      this.pending = this.pending.slice(this.pending.length - held);
      return;
    }
  }

  private emit(out: StreamDelta[], text: string): void {
    const type = this.mode === 'reasoning' ? 'reasoning' : 'content';
    const settled = (type === 'reasoning' ? this.reasoning : this.content).take(text);
    if (settled !== '') out.push({ type, text: settled });
  }

  private toolCall(body: string): StreamDelta {
    const raw = CALL_OPEN + body + CALL_CLOSE;
    const parsed = parseToolCallBody(body);
    if ('error' in parsed) return { type: 'tool_call_error', raw, message: parsed.error };
    return { type: 'tool_call', index: this.toolCallCount++, id: this.newToolCallId(), ...parsed };
  }
}

/**
 * Releases text so that the concatenation of everything released equals the trimmed whole:
 * leading whitespace is dropped, and trailing whitespace is held until more text follows it.
 */
class TrimmedChannel {
  private started = false;
  private heldWhitespace = '';

  take(text: string): string {
    const joined = this.heldWhitespace + (this.started ? text : text.trimStart());
    const body = joined.trimEnd();
    this.heldWhitespace = joined.slice(body.length);
    if (body !== '') this.started = true;
    return body;
  }
}

function earliest(text: string, tags: readonly string[]): { at: number; tag: string } | undefined {
  let best: { at: number; tag: string } | undefined;
  for (const tag of tags) {
    const at = text.indexOf(tag);
    if (at >= 0 && (best === undefined || at < best.at)) best = { at, tag };
  }
  return best;
}

/** Length of the longest end of `text` that could grow into one of `tags`. */
function tagPrefixLength(text: string, tags: readonly string[]): number {
  for (let length = Math.min(text.length, Math.max(...tags.map((t) => t.length)) - 1); length > 0; length--) {
    const end = text.slice(text.length - length);
    if (tags.some((tag) => tag.startsWith(end))) return length;
  }
  return 0;
}

/** Reads `{"name": string, "arguments": object | JSON-object string}`; arguments default to {}. */
function parseToolCallBody(body: string): { name: string; arguments: string } | { error: string } {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    return { error: `tool call is not valid JSON: ${(error as Error).message}` };
  }
  if (!isObject(value)) return { error: 'tool call is not a JSON object' };
  if (typeof value.name !== 'string' || value.name === '') return { error: 'tool call has no "name"' };
  const args = value.arguments ?? {};
  if (isObject(args)) return { name: value.name, arguments: JSON.stringify(args) };
  if (typeof args === 'string' && isObject(parseOrUndefined(args))) return { name: value.name, arguments: args };
  return { error: 'tool call "arguments" is not a JSON object' };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
