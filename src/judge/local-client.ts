// The self-judge: the embedded engine's frozen base model (policy version 0) judges the turns of
// the policy that is being trained from it. Version 0 is asked for explicitly on every request
// and checked on every answer, so publishing new weights never changes the judge.

import type { ChatCodec } from '../chat/codec.js';
import type { ChatMessage } from '../chat/messages.js';
import { renderPrompt } from '../chat/prompt.js';
import type { Sampler } from '../engine/types.js';
import { JudgeClientError } from './errors.js';
import type { CompleteOptions, JudgeClient } from './types.js';

/** The base model's sampler and chat codec (a loaded ChatModel, cli/chat-model.ts, is one). */
export interface SelfJudgeModel extends ChatCodec {
  engine: Pick<Sampler, 'generate'>;
}

/** The frozen base: the version the engine never replaces. */
export const BASE_VERSION = 0;

export class LocalJudgeClient implements JudgeClient {
  constructor(
    private readonly model: SelfJudgeModel,
    readonly name = 'self:base',
  ) {}

  async complete(messages: ChatMessage[], opts: CompleteOptions): Promise<string> {
    opts.signal?.throwIfAborted();
    // Thinking off: the prompts ask for brief reasoning in the answer, and a small model's
    // thinking often runs past maxTokens before reaching a verdict.
    const { template, tokenizer } = this.model;
    const prompt = renderPrompt(template, tokenizer, messages, { addGenerationPrompt: true, enableThinking: false });
    const params = {
      temperature: opts.temperature,
      maxTokens: opts.maxTokens,
      version: BASE_VERSION,
      ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
    };
    const ids: number[] = [];
    let version: number | null = null;
    try {
      for await (const e of this.model.engine.generate(prompt.ids, params, opts.signal)) {
        if (e.type === 'token') ids.push(e.token.id);
        else version = e.version;
      }
    } catch (e) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? e;
      const message = e instanceof Error ? e.message : String(e);
      // The engine checks the prompt against the context before sampling ("prompt is N tokens, ...").
      const hint = /context/.test(message) ? '; lower the judge prompt limits' : '';
      throw new JudgeClientError('error', `the self-judge failed: ${message}${hint}`, false);
    }
    if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
    if (version !== BASE_VERSION) {
      throw new JudgeClientError(
        'error',
        `the self-judge must sample from version ${BASE_VERSION} (the frozen base), the engine used ${version}`,
        false,
      );
    }
    const text = tokenizer.decode(ids, { skipSpecialTokens: true });
    // Templates of thinking-only models open <think> in the prompt; put it back so the parser
    // knows where the answer starts.
    return prompt.text.trimEnd().endsWith('<think>') ? `<think>${text}` : text;
  }
}
