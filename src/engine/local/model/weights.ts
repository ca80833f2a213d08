// The parameters of a decoder model: which tensors a config needs (Hugging Face names and
// shapes), one float32 buffer holding all of them with a named view per tensor, and loading
// that buffer from a model folder's safetensors files (single or sharded).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelConfig } from './config.js';
import { readSafetensorsHeader, readTensorInto, type TensorEntry } from './safetensors.js';

export interface TensorSpec {
  name: string;
  shape: number[];
  /** Offset in floats inside the parameter buffer. */
  offset: number;
  size: number;
  /** Norm weights start at 1; they take no weight decay and no LoRA. */
  kind: 'matrix' | 'norm' | 'bias' | 'embedding';
}

/** All parameters in one (shareable) buffer, one named view per tensor. */
export interface ParamStore {
  specs: TensorSpec[];
  data: Float32Array;
  get(name: string): Float32Array;
  has(name: string): boolean;
}

export function tensorSpecs(cfg: ModelConfig): TensorSpec[] {
  const D = cfg.hiddenSize,
    F = cfg.intermediateSize,
    hd = cfg.headDim;
  const qDim = cfg.numHeads * hd,
    kvDim = cfg.numKvHeads * hd;
  const specs: TensorSpec[] = [];
  let offset = 0;
  const add = (name: string, shape: number[], kind: TensorSpec['kind']): void => {
    const size = shape.reduce((a, d) => a * d, 1);
    specs.push({ name, shape, offset, size, kind });
    offset += size;
  };
  add('model.embed_tokens.weight', [cfg.vocabSize, D], 'embedding');
  for (let l = 0; l < cfg.numLayers; l++) {
    const p = `model.layers.${l}.`;
    add(`${p}input_layernorm.weight`, [D], 'norm');
    add(`${p}self_attn.q_proj.weight`, [qDim, D], 'matrix');
    add(`${p}self_attn.k_proj.weight`, [kvDim, D], 'matrix');
    add(`${p}self_attn.v_proj.weight`, [kvDim, D], 'matrix');
    if (cfg.qkvBias) {
      add(`${p}self_attn.q_proj.bias`, [qDim], 'bias');
      add(`${p}self_attn.k_proj.bias`, [kvDim], 'bias');
      add(`${p}self_attn.v_proj.bias`, [kvDim], 'bias');
    }
    if (cfg.qkNorm) {
      add(`${p}self_attn.q_norm.weight`, [hd], 'norm');
      add(`${p}self_attn.k_norm.weight`, [hd], 'norm');
    }
    add(`${p}self_attn.o_proj.weight`, [D, qDim], 'matrix');
    if (cfg.oBias) add(`${p}self_attn.o_proj.bias`, [D], 'bias');
    add(`${p}post_attention_layernorm.weight`, [D], 'norm');
    add(`${p}mlp.gate_proj.weight`, [F, D], 'matrix');
    add(`${p}mlp.up_proj.weight`, [F, D], 'matrix');
    add(`${p}mlp.down_proj.weight`, [D, F], 'matrix');
  }
  add('model.norm.weight', [D], 'norm');
  if (!cfg.tieWordEmbeddings) add('lm_head.weight', [cfg.vocabSize, D], 'matrix');
  return specs;
}

/** Allocates the parameter buffer (shared, so worker threads can use the same weights). */
export function allocateParams(specs: TensorSpec[]): ParamStore {
  const total = specs.reduce((a, s) => a + s.size, 0);
  const data = new Float32Array(new SharedArrayBuffer(total * 4));
  return paramStoreOver(specs, data);
}

export function paramStoreOver(specs: TensorSpec[], data: Float32Array): ParamStore {
  const views = new Map<string, Float32Array>();
  for (const s of specs) views.set(s.name, data.subarray(s.offset, s.offset + s.size));
  return {
    specs,
    data,
    get(name) {
      const v = views.get(name);
      if (!v) throw new Error(`no parameter named ${name}`);
      return v;
    },
    has: (name) => views.has(name),
  };
}

export class ModelFolderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ModelFolderError';
  }
}

/** Where each tensor of the folder lives: `model.safetensors`, or the shards of its index. */
export function indexWeights(dir: string): Map<string, { path: string; entry: TensorEntry }> {
  const single = join(dir, 'model.safetensors');
  const indexPath = join(dir, 'model.safetensors.index.json');
  const found = new Map<string, { path: string; entry: TensorEntry }>();
  if (existsSync(indexPath)) {
    let index: { weight_map?: Record<string, string> };
    try {
      index = JSON.parse(readFileSync(indexPath, 'utf8')) as typeof index;
    } catch (e) {
      throw new ModelFolderError(`${indexPath} is not valid JSON: ${(e as Error).message}`);
    }
    const weightMap = index.weight_map;
    if (!weightMap || typeof weightMap !== 'object')
      throw new ModelFolderError(`${indexPath} has no "weight_map" object`);
    const shards = [...new Set(Object.values(weightMap))];
    for (const shard of shards) {
      const path = join(dir, shard);
      if (!existsSync(path))
        throw new ModelFolderError(`${indexPath} names shard ${shard}, which is missing from ${dir}`);
      const header = readSafetensorsHeader(path);
      for (const [name, entry] of header.tensors) {
        if (weightMap[name] === shard) found.set(name, { path, entry });
      }
    }
    for (const [name, shard] of Object.entries(weightMap)) {
      if (!found.has(name))
        throw new ModelFolderError(
          `${indexPath} maps tensor "${name}" to ${shard}, but that shard does not contain it`,
        );
    }
    return found;
  }
  if (existsSync(single)) {
    for (const [name, entry] of readSafetensorsHeader(single).tensors) found.set(name, { path: single, entry });
    return found;
  }
  throw new ModelFolderError(`${dir} has no weights: expected model.safetensors or model.safetensors.index.json`);
}

/** Loads every tensor the config needs from the folder, checking presence and shapes first. */
export function loadWeights(dir: string, cfg: ModelConfig): ParamStore {
  const specs = tensorSpecs(cfg);
  const index = indexWeights(dir);
  for (const s of specs) {
    const hit = index.get(s.name);
    if (!hit) {
      const hint = s.name === 'lm_head.weight' ? ' (or set "tie_word_embeddings": true in config.json)' : '';
      throw new ModelFolderError(`${dir}: missing tensor "${s.name}" with shape [${s.shape.join(', ')}]${hint}`);
    }
    const shape = hit.entry.shape;
    if (shape.length !== s.shape.length || shape.some((d, i) => d !== s.shape[i])) {
      throw new ModelFolderError(
        `${hit.path}: tensor "${s.name}" has shape [${shape.join(', ')}], config.json implies [${s.shape.join(', ')}]`,
      );
    }
  }
  const params = allocateParams(specs);
  for (const s of specs) {
    const hit = index.get(s.name)!;
    readTensorInto(hit.path, hit.entry, params.get(s.name));
  }
  return params;
}
