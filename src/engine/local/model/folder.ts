// A Hugging Face model folder as the engine reads it: config.json, generation_config.json,
// tokenizer.json + tokenizer_config.json, and the weights (read separately, in the worker that
// computes with them). Every problem is reported with the file it concerns.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ModelConfig, parseModelConfig } from './config.js';
import { ModelFolderError } from './weights.js';

export interface GenerationDefaults {
  temperature?: number;
  topP?: number;
  topK?: number;
}

export interface ModelFolder {
  dir: string;
  config: ModelConfig;
  /** eos ids from generation_config.json and config.json together. */
  eosTokenIds: number[];
  generationDefaults: GenerationDefaults;
}

export function readJsonFile(path: string): unknown {
  if (!existsSync(path)) throw new ModelFolderError(`${path} is missing`);
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new ModelFolderError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

export function readModelFolder(dir: string): ModelFolder {
  if (!existsSync(dir)) throw new ModelFolderError(`model folder ${dir} does not exist`);
  const config = parseModelConfig(readJsonFile(join(dir, 'config.json')), join(dir, 'config.json'));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    if (!existsSync(join(dir, f)))
      throw new ModelFolderError(`${join(dir, f)} is missing: a model folder needs its tokenizer files`);
  }
  const eos = new Set(config.eosTokenIds);
  const generationDefaults: GenerationDefaults = {};
  const genPath = join(dir, 'generation_config.json');
  if (existsSync(genPath)) {
    const gen = readJsonFile(genPath) as Record<string, unknown>;
    const ids = gen.eos_token_id == null ? [] : Array.isArray(gen.eos_token_id) ? gen.eos_token_id : [gen.eos_token_id];
    for (const id of ids) {
      if (!Number.isInteger(id) || (id as number) < 0)
        throw new ModelFolderError(`${genPath}: eos_token_id must be an id or a list of ids`);
      eos.add(id as number);
    }
    if (typeof gen.temperature === 'number') generationDefaults.temperature = gen.temperature;
    if (typeof gen.top_p === 'number') generationDefaults.topP = gen.top_p;
    if (typeof gen.top_k === 'number') generationDefaults.topK = gen.top_k;
  }
  for (const id of eos) {
    if (id >= config.vocabSize)
      throw new ModelFolderError(`${dir}: eos id ${id} is outside the vocabulary of ${config.vocabSize}`);
  }
  return { dir, config, eosTokenIds: [...eos].sort((a, b) => a - b), generationDefaults };
}
