// A model's chat codec: its tokenizer and chat template, read from a Hugging Face model folder.
// Messages become prompt ids through it (prompt.ts) and sampled ids become text again, the same
// way for the gateway, the self-judge, the teacher and the simulation.

import { join } from 'node:path';
import { ChatTemplate } from './tokenizer/chat-template.js';
import { readModelJson } from './tokenizer/model-files.js';
import { TextTokenizer } from './tokenizer/tokenizer.js';

export interface ChatCodec {
  tokenizer: TextTokenizer;
  template: ChatTemplate;
}

/** The tokenizer (tokenizer.json) and the chat template (tokenizer_config.json) of a model folder. */
export async function loadChatCodec(modelDir: string): Promise<ChatCodec> {
  const tokenizer = await TextTokenizer.fromModelDir(modelDir);
  const config = await readModelJson(modelDir, 'tokenizer_config.json');
  const template = ChatTemplate.fromTokenizerConfig(config, join(modelDir, 'tokenizer_config.json'));
  return { tokenizer, template };
}
