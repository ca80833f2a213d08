// A model folder ready for chat: the engine (in its worker) plus the tokenizer and chat
// template on this thread, which turn OpenAI-style messages into prompt ids.

import { join } from 'node:path';
import type { ChatMessage, ToolSpec } from '../chat/messages.js';
import { renderPrompt } from '../chat/prompt.js';
import { LocalEngine, type LocalEngineOptions } from './engine.js';
import { readJsonFile, readModelFolder } from './model/folder.js';
import { ChatTemplate } from './tokenizer/chat-template.js';
import { TextTokenizer } from './tokenizer/tokenizer.js';

export interface ChatModel {
  engine: LocalEngine;
  tokenizer: TextTokenizer;
  template: ChatTemplate;
  renderPrompt(
    messages: ChatMessage[],
    opts: { tools?: ToolSpec[]; addGenerationPrompt?: boolean; enableThinking?: boolean },
  ): { text: string; ids: number[] };
}

export async function loadChatModel(modelDir: string, opts: LocalEngineOptions = {}): Promise<ChatModel> {
  readModelFolder(modelDir); // the folder-level errors first: missing folder, config, tokenizer files
  const tokenizer = await TextTokenizer.fromModelDir(modelDir);
  const configPath = join(modelDir, 'tokenizer_config.json');
  const template = ChatTemplate.fromTokenizerConfig(readJsonFile(configPath) as object, configPath);
  const engine = await LocalEngine.open(modelDir, opts);
  return {
    engine,
    tokenizer,
    template,
    renderPrompt: (messages, o) => renderPrompt(template, tokenizer, messages, o),
  };
}
