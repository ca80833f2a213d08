// Sampled tokens -> what the OpenAI API reports: text decoded token by token, stop strings cut,
// reasoning / content / tool calls split by the completion parser, and log-prob entries. It also
// keeps the exact ids and both log-probs per token, which is what gets recorded.

import { CompletionStreamParser, type StreamDelta } from '../chat/completion.js';
import type { ChatMessage, ToolCall } from '../chat/messages.js';
import type { StreamDecoder, TextTokenizer } from '../chat/tokenizer/tokenizer.js';
import type { FinishReason, SampledToken } from '../engine/types.js';

/** One entry of OpenAI's `logprobs.content`. */
export interface LogprobEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** A piece of the answer, in the order it should be streamed. */
export type AnswerDelta =
  | { type: 'content'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool_call'; index: number; id: string; name: string; arguments: string };

export interface AssemblerOptions {
  thinkingOpen: boolean;
  stop: readonly string[];
  /** Build log-prob entries (costs a decode per token). */
  logprobs: boolean;
  newToolCallId?: () => string;
}

/** Holds back text that could still become a stop string; cuts at the first one found. */
export class StopTrimmer {
  private held = '';
  private stopped = false;

  constructor(private readonly stops: readonly string[]) {}

  push(text: string): string {
    if (this.stopped || this.stops.length === 0) return this.stopped ? '' : text;
    this.held += text;
    let cut = -1;
    for (const s of this.stops) {
      const at = this.held.indexOf(s);
      if (at >= 0 && (cut < 0 || at < cut)) cut = at;
    }
    if (cut >= 0) {
      this.stopped = true;
      const out = this.held.slice(0, cut);
      this.held = '';
      return out;
    }
    let keep = 0;
    for (const s of this.stops) {
      for (let n = Math.min(s.length - 1, this.held.length); n > keep; n--) {
        if (this.held.endsWith(s.slice(0, n))) {
          keep = n;
          break;
        }
      }
    }
    const out = this.held.slice(0, this.held.length - keep);
    this.held = this.held.slice(this.held.length - keep);
    return out;
  }

  finish(): string {
    const out = this.stopped ? '' : this.held;
    this.held = '';
    return out;
  }
}

export class CompletionAssembler {
  readonly ids: number[] = [];
  readonly logprobs: number[] = [];
  readonly sampledLogprobs: number[] = [];
  /** Log-prob entries not yet handed out (streaming attaches them to the next chunk). */
  pendingLogprobs: LogprobEntry[] = [];
  private readonly allLogprobs: LogprobEntry[] = [];
  private content = '';
  private reasoning = '';
  private readonly toolCalls: ToolCall[] = [];
  readonly toolCallErrors: { raw: string; message: string }[] = [];
  private readonly decoder: StreamDecoder;
  private readonly trimmer: StopTrimmer;
  private readonly parser: CompletionStreamParser;

  constructor(
    private readonly tokenizer: TextTokenizer,
    private readonly opts: AssemblerOptions,
  ) {
    this.decoder = tokenizer.createStreamDecoder({ skipSpecialTokens: true });
    this.trimmer = new StopTrimmer(opts.stop);
    this.parser = new CompletionStreamParser({
      thinkingOpen: opts.thinkingOpen,
      ...(opts.newToolCallId ? { newToolCallId: opts.newToolCallId } : {}),
    });
  }

  /** Adds one sampled token; returns the deltas it settles (often none). */
  token(t: SampledToken): AnswerDelta[] {
    this.ids.push(t.id);
    this.logprobs.push(t.logprob);
    this.sampledLogprobs.push(t.sampledLogprob);
    if (this.opts.logprobs) {
      const entry = {
        ...this.piece(t.id, t.logprob),
        top_logprobs: (t.top ?? []).map((a) => this.piece(a.id, a.logprob)),
      };
      this.pendingLogprobs.push(entry);
      this.allLogprobs.push(entry);
    }
    return this.absorb(this.parser.push(this.trimmer.push(this.decoder.push(t.id))));
  }

  /** Ends the text: flushes held-back text and closes the parser. */
  finish(): AnswerDelta[] {
    const tail = this.trimmer.push(this.decoder.flush()) + this.trimmer.finish();
    return this.absorb([...this.parser.push(tail), ...this.parser.finish()]);
  }

  takeLogprobs(): LogprobEntry[] {
    const out = this.pendingLogprobs;
    this.pendingLogprobs = [];
    return out;
  }

  get allLogprobEntries(): LogprobEntry[] {
    return this.allLogprobs;
  }

  get hasToolCalls(): boolean {
    return this.toolCalls.length > 0;
  }

  /** The assistant message as returned to the client (and recorded). */
  message(): ChatMessage {
    const m: ChatMessage = {
      role: 'assistant',
      content: this.content === '' && this.toolCalls.length > 0 ? null : this.content,
    };
    if (this.reasoning !== '') m.reasoning_content = this.reasoning;
    if (this.toolCalls.length > 0) m.tool_calls = this.toolCalls.map((c) => ({ ...c, function: { ...c.function } }));
    return m;
  }

  /** OpenAI finish_reason for the engine's reason. */
  finishReason(reason: FinishReason): 'stop' | 'length' | 'tool_calls' {
    if (reason === 'length' || reason === 'context') return 'length';
    return this.toolCalls.length > 0 ? 'tool_calls' : 'stop';
  }

  private absorb(deltas: StreamDelta[]): AnswerDelta[] {
    const out: AnswerDelta[] = [];
    for (const d of deltas) {
      if (d.type === 'content') {
        this.content += d.text;
        pushText(out, 'content', d.text);
      } else if (d.type === 'reasoning') {
        this.reasoning += d.text;
        pushText(out, 'reasoning', d.text);
      } else if (d.type === 'tool_call') {
        this.toolCalls.push({ id: d.id, type: 'function', function: { name: d.name, arguments: d.arguments } });
        out.push({ type: 'tool_call', index: d.index, id: d.id, name: d.name, arguments: d.arguments });
      } else {
        // Malformed markup reaches the client as text rather than disappearing.
        this.toolCallErrors.push({ raw: d.raw, message: d.message });
        const text = (this.content === '' ? '' : '\n') + d.raw;
        this.content += text;
        pushText(out, 'content', text);
      }
    }
    return out;
  }

  private piece(id: number, logprob: number): { token: string; logprob: number; bytes: number[] } {
    const token = this.tokenizer.decode([id]);
    return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
  }
}

function pushText(out: AnswerDelta[], type: 'content' | 'reasoning', text: string): void {
  const last = out[out.length - 1];
  if (last && last.type === type) last.text += text;
  else out.push({ type, text });
}
