// A model folder ready for chat: the engine (in its worker) plus the chat codec on this thread,
// which turns OpenAI-style messages into prompt ids; and the gateway's backend built from them.

import { loadChatCodec, type ChatCodec } from '../chat/codec.js';
import { openPromptCodec } from '../chat/prompt-codec.js';
import type { PromptEncoderOptions } from '../chat/prompt-encoder.js';
import { LocalEngine, type LocalEngineOptions } from '../engine/local/engine.js';
import { readModelFolder } from '../engine/local/model/folder.js';
import type { ChatBackend } from '../gateway/backend.js';

export interface ChatModel extends ChatCodec {
  engine: LocalEngine;
}

export async function loadChatModel(modelDir: string, opts: LocalEngineOptions = {}): Promise<ChatModel> {
  readModelFolder(modelDir); // the folder-level errors first: missing folder, config, tokenizer files
  const codec = await loadChatCodec(modelDir);
  const engine = await LocalEngine.open(modelDir, opts);
  return { ...codec, engine };
}

/** A backend over a model folder with the embedded engine (tests and benchmarks). */
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
  const codec = openPromptCodec(model.engine.folder.dir, model, encoder);
  return {
    ...codec,
    sampler: model.engine,
    contextLength: model.engine.folder.config.maxPositionEmbeddings,
    generationDefaults: model.engine.folder.generationDefaults,
    modelId,
    async close() {
      await codec.close();
      await model.engine.close();
    },
  };
}
