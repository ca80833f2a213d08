// What the gateway needs from a model: a Sampler, the prompt codec that turns messages into prompt
// ids and sampled ids into text (src/chat/), and the model's limits and defaults. The cli builds
// one from a model folder and an engine (cli/chat-model.ts); tests build one around a scripted
// Sampler.

import type { PromptCodec } from '../chat/prompt-codec.js';
import type { Sampler, SamplingParams } from '../engine/types.js';

export interface ChatBackend extends PromptCodec {
  sampler: Sampler;
  /** max_position_embeddings: prompt + completion never exceed it. */
  contextLength: number;
  /** The model's own sampling settings (generation_config.json), for what a request leaves unset. */
  generationDefaults: Pick<SamplingParams, 'temperature' | 'topP' | 'topK'>;
  /** The id GET /v1/models lists first (default: the model folder's name). */
  modelId: string;
  /** Releases the sampler and the codec's tokenizer thread. */
  close(): Promise<void>;
}
