// What the gateway needs from a model: a Sampler, the tokenizer and chat template that turn
// messages into prompt ids, and the model's limits and defaults. loadChatBackend() builds it from
// a model folder with the embedded engine; tests build one around a scripted Sampler.

import { toTemplateMessage, type RenderedPrompt } from '../engine/chat/prompt.js';
import type { ChatMessage, ToolSpec } from '../engine/chat/messages.js';
import { loadChatModel, type ChatModel } from '../engine/local/chat-model.js';
import type { LocalEngineOptions } from '../engine/local/engine.js';
import type { GenerationDefaults } from '../engine/local/model/folder.js';
import type { ChatTemplate } from '../engine/local/tokenizer/chat-template.js';
import type { TextTokenizer } from '../engine/local/tokenizer/tokenizer.js';
import type { Sampler } from '../engine/types.js';
import type { RetemplateCheck } from '../types.js';
import { PromptEncoder, type BoundedEncoding, type PromptEncoderOptions } from './prompt-encoder.js';
import { PromptRenderer } from './prompt-renderer.js';
import { TokenizerThread } from './tokenizer-thread.js';

export interface ChatBackend {
  sampler: Sampler;
  tokenizer: TextTokenizer;
  template: ChatTemplate;
  /** Renders prompts: openclaw-rl's own template directly, any other through `template`. */
  renderer: PromptRenderer;
  /** Tokenizes rendered prompts (with a cache of repeated pieces). */
  encoder: PromptEncoder;
  /** max_position_embeddings: prompt + completion never exceed it. */
  contextLength: number;
  generationDefaults: GenerationDefaults;
  /** The id GET /v1/models lists first (default: the model folder's name). */
  modelId: string;
  /** Releases the engine. */
  close(): Promise<void>;
}

export interface RenderInput {
  messages: readonly ChatMessage[];
  tools: readonly ToolSpec[] | undefined;
  enableThinking: boolean | undefined;
}

export async function loadChatBackend(
  modelDir: string,
  modelId: string,
  opts: LocalEngineOptions & { encoder?: PromptEncoderOptions } = {},
): Promise<ChatBackend> {
  const { encoder, ...engineOptions } = opts;
  return chatBackendOf(await loadChatModel(modelDir, engineOptions), modelId, encoder);
}

/**
 * The backend over an already loaded chat model (serve keeps the model for its learner).
 * `encoder.onMismatch` also hears when the direct template renderer turns itself off.
 */
export function chatBackendOf(model: ChatModel, modelId: string, encoder?: PromptEncoderOptions): ChatBackend {
  const modelDir = model.engine.folder.dir;
  // Long encodes and the prompt encoder's full-encode checks run on a thread of their own.
  const thread = TokenizerThread.start(modelDir);
  return {
    sampler: model.engine,
    tokenizer: model.tokenizer,
    template: model.template,
    renderer: new PromptRenderer(model.template, encoder?.onMismatch ? { onMismatch: encoder.onMismatch } : {}),
    encoder: PromptEncoder.forModelDir(modelDir, model.tokenizer, {
      check: thread.check,
      encodeAway: thread.encode,
      ...encoder,
    }),
    contextLength: model.engine.folder.config.maxPositionEmbeddings,
    generationDefaults: model.engine.folder.generationDefaults,
    modelId,
    async close() {
      await thread.close();
      await model.engine.close();
    },
  };
}

/** Like engine/chat/prompt.ts renderPrompt, but with the backend's renderer and caching encoder. */
export function renderRequest(backend: ChatBackend, input: RenderInput, addGenerationPrompt = true): RenderedPrompt {
  const text = renderText(backend, input, addGenerationPrompt);
  return { text, ids: backend.encoder.encode(text), thinkingOpen: text.trimEnd().endsWith('<think>') };
}

/** The prompt of a request, or how many tokens it has at least when it reaches `limit` (off the event loop). */
export async function renderRequestBounded(
  backend: ChatBackend,
  input: RenderInput,
  limit: number,
): Promise<{ prompt: RenderedPrompt } | { atLeast: number }> {
  const text = renderText(backend, input, true);
  const encoded: BoundedEncoding = await backend.encoder.encodeBounded(text, limit);
  if ('atLeast' in encoded) return encoded;
  return { prompt: { text, ids: encoded.ids, thinkingOpen: text.trimEnd().endsWith('<think>') } };
}

function renderText(backend: ChatBackend, input: RenderInput, addGenerationPrompt: boolean): string {
  return backend.renderer.render(input.messages.map(toTemplateMessage), {
    ...(input.tools ? { tools: input.tools } : {}),
    addGenerationPrompt,
    ...(input.enableThinking !== undefined ? { enableThinking: input.enableThinking } : {}),
  });
}

/**
 * Token-exactness check: renders the prompt messages followed by the response through the chat
 * template (no generation prompt) and tests that its ids start with promptIds ++ completionIds.
 * A template may legitimately differ (it drops reasoning, re-serialises tool-call JSON, or the
 * model emitted text the parser trimmed); the result records where, and training always uses the
 * recorded ids, never this rendering.
 */
export function checkRetemplate(
  backend: ChatBackend,
  input: RenderInput & { response: ChatMessage; promptIds: readonly number[]; completionIds: readonly number[] },
): RetemplateCheck {
  const { promptIds, completionIds } = input;
  const recordedTokens = promptIds.length + completionIds.length;
  let rendered: number[];
  try {
    rendered = renderRequest(backend, { ...input, messages: [...input.messages, input.response] }, false).ids;
  } catch {
    return { match: false, firstMismatch: 0, renderedTokens: 0, recordedTokens };
  }
  // Compared in place: joining the recorded ids first cost 1 ms for a 50k-token prompt.
  const n = Math.min(rendered.length, recordedTokens);
  let i = 0;
  while (i < n && i < promptIds.length && promptIds[i] === rendered[i]) i++;
  if (i === promptIds.length) while (i < n && completionIds[i - promptIds.length] === rendered[i]) i++;
  const match = i === recordedTokens;
  return { match, ...(match ? {} : { firstMismatch: i }), renderedTokens: rendered.length, recordedTokens };
}
