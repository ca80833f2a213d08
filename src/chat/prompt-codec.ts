// The codec on the request path: the model's tokenizer and template with the fast direct renderer
// (prompt-renderer.ts) and the caching piecewise encoder (prompt-encoder.ts), each checked against
// the plain path, and a tokenizer thread for long encodes and those checks. The gateway renders
// requests with it, and the teacher renders hinted prompts with the same one, so both get the ids
// the plain template and tokenizer would give.

import type { ChatMessage, ToolSpec } from './messages.js';
import type { ChatCodec } from './codec.js';
import { toTemplateMessage, type RenderedPrompt } from './prompt.js';
import { PromptEncoder, type BoundedEncoding, type PromptEncoderOptions } from './prompt-encoder.js';
import { PromptRenderer } from './prompt-renderer.js';
import { TokenizerThread } from './tokenizer-thread.js';

export interface PromptCodec extends ChatCodec {
  /** Renders prompts: openclaw-rl's own template directly, any other through `template`. */
  renderer: PromptRenderer;
  /** Tokenizes rendered prompts (with a cache of repeated pieces). */
  encoder: PromptEncoder;
}

export interface RenderInput {
  messages: readonly ChatMessage[];
  tools: readonly ToolSpec[] | undefined;
  enableThinking: boolean | undefined;
}

/** Messages (+ tools, + the thinking switch) to prompt ids, with the generation prompt. */
export type RenderIds = (
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[] | undefined,
  enableThinking: boolean | undefined,
) => number[];

/**
 * The prompt codec of a model folder over its loaded chat codec. Long encodes and the encoder's
 * full-encode checks run on a tokenizer thread of their own, which close() ends.
 * `encoder.onMismatch` also hears when the direct template renderer turns itself off.
 */
export function openPromptCodec(
  modelDir: string,
  codec: ChatCodec,
  encoder: PromptEncoderOptions = {},
): PromptCodec & { close(): Promise<void> } {
  const thread = TokenizerThread.start(modelDir);
  return {
    tokenizer: codec.tokenizer,
    template: codec.template,
    renderer: new PromptRenderer(codec.template, encoder.onMismatch ? { onMismatch: encoder.onMismatch } : {}),
    encoder: PromptEncoder.forModelDir(modelDir, codec.tokenizer, {
      check: thread.check,
      encodeAway: thread.encode,
      ...encoder,
    }),
    close: () => thread.close(),
  };
}

/** Like prompt.ts renderPrompt, but with the codec's renderer and caching encoder. */
export function renderRequest(codec: PromptCodec, input: RenderInput, addGenerationPrompt = true): RenderedPrompt {
  const text = renderText(codec, input, addGenerationPrompt);
  return { text, ids: codec.encoder.encode(text), thinkingOpen: text.trimEnd().endsWith('<think>') };
}

/** The prompt of a request, or how many tokens it has at least when it reaches `limit` (off the event loop). */
export async function renderRequestBounded(
  codec: PromptCodec,
  input: RenderInput,
  limit: number,
): Promise<{ prompt: RenderedPrompt } | { atLeast: number }> {
  const text = renderText(codec, input, true);
  const encoded: BoundedEncoding = await codec.encoder.encodeBounded(text, limit);
  if ('atLeast' in encoded) return encoded;
  return { prompt: { text, ids: encoded.ids, thinkingOpen: text.trimEnd().endsWith('<think>') } };
}

/** renderRequest's ids as a function (the teacher's renderer). */
export function renderIdsOf(codec: PromptCodec): RenderIds {
  return (messages, tools, enableThinking) => renderRequest(codec, { messages, tools, enableThinking }).ids;
}

function renderText(codec: PromptCodec, input: RenderInput, addGenerationPrompt: boolean): string {
  return codec.renderer.render(input.messages.map(toTemplateMessage), {
    ...(input.tools ? { tools: input.tools } : {}),
    addGenerationPrompt,
    ...(input.enableThinking !== undefined ? { enableThinking: input.enableThinking } : {}),
  });
}
