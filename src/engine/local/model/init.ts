// `model init`: writes a complete, randomly initialised model folder in the Hugging Face format
// (config.json, generation_config.json, safetensors weights, tokenizer.json,
// tokenizer_config.json with our chat template), so tests and benchmarks run on the same
// loading code a downloaded Qwen3 would use.

import { mkdirSync, renameSync, rmSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';
import { configJson, type ModelConfig, type ModelFamily } from './config.js';
import { writeSafetensors, type TensorToWrite } from './safetensors.js';
import { allocateParams, type ParamStore, tensorSpecs } from './weights.js';
import { createRng } from '../sampling/random.js';
import { trainByteLevelBpe, builtinCorpus } from '../../../chat/tokenizer-training/train-bpe.js';

export interface ModelShape {
  family: ModelFamily;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
}

export interface InitOptions {
  out: string;
  shape: ModelShape;
  seed: number;
  /** Stored dtype of the weights. */
  dtype: 'F32' | 'BF16';
  /** Split the weights over this many shards with an index (1 = one model.safetensors). */
  shards: number;
  /** Target size of the trained tokenizer (at most shape.vocabSize). */
  tokenizerVocab: number;
  /** Extra text to train the tokenizer on. */
  corpus?: string[];
  /** Standard deviation of the random weights. */
  initStd: number;
}

export const PRESETS: Record<string, Omit<ModelShape, 'family'>> = {
  /** Small enough for unit tests: a forward pass in milliseconds. */
  tiny: {
    vocabSize: 512,
    hiddenSize: 64,
    intermediateSize: 160,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 16,
    maxPositionEmbeddings: 2048,
    tieWordEmbeddings: true,
  },
  /** A few million parameters: trainable on two CPU cores in seconds per step. */
  small: {
    vocabSize: 2048,
    hiddenSize: 256,
    intermediateSize: 768,
    numLayers: 4,
    numHeads: 8,
    numKvHeads: 4,
    headDim: 32,
    maxPositionEmbeddings: 4096,
    tieWordEmbeddings: true,
  },
  /** The exact tensor shapes of Qwen3-0.6B (596M parameters), for benchmarks. */
  'qwen3-0.6b': {
    vocabSize: 151936,
    hiddenSize: 1024,
    intermediateSize: 3072,
    numLayers: 28,
    numHeads: 16,
    numKvHeads: 8,
    headDim: 128,
    maxPositionEmbeddings: 40960,
    tieWordEmbeddings: true,
  },
};

export function modelConfigOf(shape: ModelShape, eosTokenIds: number[]): ModelConfig {
  return {
    ...shape,
    rmsNormEps: 1e-6,
    ropeTheta: shape.family === 'llama' ? 500000 : 1000000,
    ropeScaling:
      shape.family === 'llama'
        ? { factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 }
        : null,
    qkvBias: shape.family === 'qwen2',
    oBias: false,
    qkNorm: shape.family === 'qwen3',
    bosTokenId: null,
    eosTokenIds,
  };
}

/** Random weights: matrices and biases ~ N(0, std^2), norms 1. Deterministic in the seed. */
export function randomParams(cfg: ModelConfig, seed: number, std: number): ParamStore {
  const params = allocateParams(tensorSpecs(cfg));
  const rng = createRng(seed);
  for (const spec of params.specs) {
    const view = params.get(spec.name);
    if (spec.kind === 'norm') {
      view.fill(1);
      continue;
    }
    for (let i = 0; i < view.length; i += 2) {
      // Box-Muller: two normals per pair of uniforms.
      const r = Math.sqrt(-2 * Math.log(1 - rng.next())) * std;
      const a = 2 * Math.PI * rng.next();
      view[i] = r * Math.cos(a);
      if (i + 1 < view.length) view[i + 1] = r * Math.sin(a);
    }
  }
  return params;
}

export function writeModelFolder(opts: InitOptions): ModelConfig {
  const { shape } = opts;
  if (opts.tokenizerVocab > shape.vocabSize)
    throw new RangeError(
      `tokenizer vocabulary ${opts.tokenizerVocab} exceeds the model's vocab_size ${shape.vocabSize}`,
    );
  const tokenizer = trainByteLevelBpe([...builtinCorpus(), ...(opts.corpus ?? [])], {
    vocabSize: opts.tokenizerVocab,
    specialTokens: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'],
    addedTokens: ['<think>', '</think>', '<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>'],
  });
  const imEnd = tokenizer.idOf('<|im_end|>');
  const endOfText = tokenizer.idOf('<|endoftext|>');
  const cfg = modelConfigOf(shape, [imEnd]);
  const params = randomParams(cfg, opts.seed, opts.initStd);

  // Write everything into a sibling temp folder, then rename: no half-written model folder.
  const out = opts.out;
  if (existsSync(out) && readdirSync(out).length > 0)
    throw new Error(`${out} exists and is not empty; choose a new folder`);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = join(dirname(out), `.${basename(out)}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  try {
    const json = (name: string, value: unknown) =>
      writeFileSync(join(tmp, name), `${JSON.stringify(value, null, 2)}\n`);
    json('config.json', configJson(cfg));
    json('generation_config.json', {
      eos_token_id: [imEnd, endOfText],
      pad_token_id: endOfText,
      temperature: 0.7,
      top_p: 0.9,
    });
    json('tokenizer.json', tokenizer.tokenizerJson);
    json('tokenizer_config.json', tokenizer.tokenizerConfig);
    writeWeights(tmp, params, opts.dtype, opts.shards);
    if (existsSync(out)) rmSync(out, { recursive: true });
    renameSync(tmp, out);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  return cfg;
}

function writeWeights(dir: string, params: ParamStore, dtype: 'F32' | 'BF16', shards: number): void {
  const tensors: TensorToWrite[] = params.specs.map((s) => ({
    name: s.name,
    shape: s.shape,
    data: params.get(s.name),
  }));
  if (shards <= 1) {
    writeSafetensors(join(dir, 'model.safetensors'), tensors, dtype);
    return;
  }
  const total = tensors.reduce((a, t) => a + t.data.length, 0);
  const perShard = Math.ceil(total / shards);
  const groups: TensorToWrite[][] = [[]];
  let filled = 0;
  for (const t of tensors) {
    if (filled >= perShard && groups.length < shards) {
      groups.push([]);
      filled = 0;
    }
    groups[groups.length - 1]!.push(t);
    filled += t.data.length;
  }
  const weightMap: Record<string, string> = {};
  groups.forEach((group, i) => {
    const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(groups.length).padStart(5, '0')}.safetensors`;
    writeSafetensors(join(dir, file), group, dtype);
    for (const t of group) weightMap[t.name] = file;
  });
  const bytes = total * (dtype === 'F32' ? 4 : 2);
  writeFileSync(
    join(dir, 'model.safetensors.index.json'),
    `${JSON.stringify({ metadata: { total_size: bytes }, weight_map: weightMap }, null, 2)}\n`,
  );
}
