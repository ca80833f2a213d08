// ScriptedSampler: a TEST DOUBLE of the engine's Sampler that emits given token ids, so tests can
// make the gateway see exactly the completion they need (a tool call, reasoning, a stop string)
// from a random model's tokenizer. It records every call, honours maxTokens, stop ids and the
// abort signal like the real engine, and throws when a call has no script.

import type { PolicyVersion } from '../../src/engine/policy-version.js';
import type { GenerationEvent, Sampler, SamplingParams } from '../../src/engine/types.js';
import type { TextTokenizer } from '../../src/chat/tokenizer/tokenizer.js';
import type { ToolCall } from '../../src/chat/messages.js';

export interface Script {
  ids: number[];
  /** Milliseconds between tokens (default 0). */
  delayMs?: number;
  /** After emitting `ids`, wait for the abort signal instead of finishing (a generation that hangs). */
  hang?: boolean;
  /** Throw this after emitting `ids` (an engine failure mid-stream). */
  error?: string;
}

export interface ScriptedCall {
  promptIds: number[];
  params: SamplingParams;
  /** The signal the caller passed: aborted once the caller cancelled this generation. */
  signal: AbortSignal | undefined;
}

export class ScriptedSampler implements Sampler {
  readonly calls: ScriptedCall[] = [];
  /** Generations asked for and not yet ended (run to their finish, or closed by the caller). */
  open = 0;
  private readonly queue: Script[] = [];
  private servingVersion: number;

  constructor(
    private readonly opts: {
      version?: number;
      stopIds?: number[];
      fallback?: (promptIds: readonly number[]) => Script;
      /** Act as a router that reads params.routingKey (the gateway then identifies the session first). */
      routesBySession?: boolean;
    } = {},
  ) {
    this.servingVersion = opts.version ?? 0;
  }

  get routesBySession(): boolean {
    return this.opts.routesBySession ?? false;
  }

  /** Queues what the next generate() call emits. */
  push(script: Script | number[]): this {
    this.queue.push(Array.isArray(script) ? { ids: script } : script);
    return this;
  }

  get queued(): number {
    return this.queue.length;
  }

  /** Later generations report `version` in their finish event (no weights to load). */
  use(version: PolicyVersion): Promise<number> {
    this.servingVersion = version.version;
    return Promise.resolve(0);
  }

  generate(promptIds: readonly number[], params: SamplingParams, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    this.calls.push({ promptIds: [...promptIds], params: { ...params }, signal });
    const script = this.queue.shift() ?? this.opts.fallback?.(promptIds);
    if (!script) throw new Error('ScriptedSampler: no script queued for this call');
    const version = this.servingVersion;
    const stopIds = new Set([...(this.opts.stopIds ?? []), ...(params.stopTokenIds ?? [])]);
    const maxTokens = params.maxTokens ?? Infinity;
    const events = async function* (): AsyncGenerator<GenerationEvent> {
      const finish = (reason: Extract<GenerationEvent, { type: 'finish' }>['reason'], n: number): GenerationEvent => ({
        type: 'finish',
        reason,
        version,
        promptTokens: promptIds.length,
        completionTokens: n,
      });
      let n = 0;
      for (const id of script.ids) {
        if (script.delayMs) await new Promise((r) => setTimeout(r, script.delayMs));
        if (signal?.aborted) return yield finish('cancelled', n);
        n++;
        const logprob = -(1 + (id % 7) / 10);
        yield {
          type: 'token',
          token: {
            id,
            logprob,
            sampledLogprob: logprob / 2,
            ...(params.topLogprobs
              ? {
                  top: [
                    { id, logprob },
                    { id: id + 1, logprob: logprob - 1 },
                  ].slice(0, params.topLogprobs),
                }
              : {}),
          },
        };
        if (stopIds.has(id)) return yield finish('stop_token', n);
        if (n >= maxTokens) return yield finish('length', n);
      }
      if (script.error) throw new Error(script.error);
      if (script.hang) {
        if (!signal) throw new Error('ScriptedSampler: a hanging script needs an abort signal');
        if (!signal.aborted) await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
        return yield finish('cancelled', n);
      }
      yield finish('length', n);
    };
    this.open++;
    const ended = () => this.open--;
    return {
      async *[Symbol.asyncIterator]() {
        try {
          yield* events();
        } finally {
          ended();
        }
      },
    };
  }
}

/** What a Qwen3-style model generates for an assistant message, as ids ending in <|im_end|>. */
export function replyIds(
  tokenizer: TextTokenizer,
  reply: { content?: string | null; reasoning?: string; toolCalls?: Pick<ToolCall, 'function'>[] },
): number[] {
  let text = reply.reasoning !== undefined ? `<think>\n${reply.reasoning}\n</think>\n\n` : '';
  text += reply.content ?? '';
  (reply.toolCalls ?? []).forEach((call, i) => {
    if (reply.content || i > 0) text += '\n';
    text += `<tool_call>\n{"name": ${JSON.stringify(call.function.name)}, "arguments": ${call.function.arguments}}\n</tool_call>`;
  });
  const end = tokenizer.tokenToId('<|im_end|>');
  if (end === undefined) throw new Error('the tokenizer has no <|im_end|>');
  return [...tokenizer.encode(text), end];
}
