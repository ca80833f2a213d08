// Hugging Face model folders (the families the local engine runs: Qwen3, Qwen2/2.5, Llama 3) as
// GGUF files llama.cpp loads, cached next to the model: <model>/gguf/<name>-<type>.gguf.
//
// Weights: the 2-D projection and embedding tensors in the chosen type (F16, Q8_0; BF16 and F32
// for benchmarks), 1-D norms and biases in F32. Tensor and key names follow llama.cpp's qwen3,
// qwen2 and llama architectures (token_embd, blk.N.attn_q, ..., output_norm, output when the head
// is not tied). llama.cpp's llama architecture applies RoPE to adjacent pairs where Hugging Face
// rotates halves, so the q and k rows of a Llama model are permuted per head (the converter's
// well-known permutation); Qwen uses the halves layout in llama.cpp too and is written as is.
// Llama 3 RoPE scaling goes in as llama.cpp's rope_freqs tensor (per-frequency divisors).
//
// Tokenizer: the gpt2-style byte-level BPE llama.cpp knows as model "gpt2" (pre-tokenizer "qwen2"
// or "llama-bpe", the split regex of that family): every token string, its type, the merges,
// eos/bos/pad ids and the chat template; ids between the tokenizer's size and vocab_size are
// padding tokens "[PADn]" of type UNUSED. We always pass token ids, so llama.cpp's tokenizer only
// has to load; it tokenizes like ours for our families.

import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { type ModelConfig, ropeInvFreq } from '../local/model/config.js';
import { readModelFolder } from '../local/model/folder.js';
import { readTensorInto } from '../local/model/safetensors.js';
import { indexWeights, tensorSpecs } from '../local/model/weights.js';
import { type GgmlType, type GgufTensorSource, type GgufValue, writeGgufFile } from './gguf-format.js';

/** The weight types a model GGUF is written in. */
export type GgufWeightType = 'F16' | 'Q8_0' | 'BF16' | 'F32';

// llama_ftype ("general.file_type") ids.
const FILE_TYPE: Record<GgufWeightType, number> = { F32: 0, F16: 1, Q8_0: 7, BF16: 32 };
// llama.cpp token types.
const TOKEN_NORMAL = 1,
  TOKEN_CONTROL = 3,
  TOKEN_USER_DEFINED = 4,
  TOKEN_UNUSED = 5;

const LAYER_PARTS: Record<string, string> = {
  'input_layernorm.weight': 'attn_norm.weight',
  'post_attention_layernorm.weight': 'ffn_norm.weight',
  'self_attn.q_proj.weight': 'attn_q.weight',
  'self_attn.k_proj.weight': 'attn_k.weight',
  'self_attn.v_proj.weight': 'attn_v.weight',
  'self_attn.o_proj.weight': 'attn_output.weight',
  'self_attn.q_proj.bias': 'attn_q.bias',
  'self_attn.k_proj.bias': 'attn_k.bias',
  'self_attn.v_proj.bias': 'attn_v.bias',
  'self_attn.o_proj.bias': 'attn_output.bias',
  'self_attn.q_norm.weight': 'attn_q_norm.weight',
  'self_attn.k_norm.weight': 'attn_k_norm.weight',
  'mlp.gate_proj.weight': 'ffn_gate.weight',
  'mlp.up_proj.weight': 'ffn_up.weight',
  'mlp.down_proj.weight': 'ffn_down.weight',
};

/** A Hugging Face tensor name -> llama.cpp's. */
export function ggufTensorName(hf: string): string {
  if (hf === 'model.embed_tokens.weight') return 'token_embd.weight';
  if (hf === 'model.norm.weight') return 'output_norm.weight';
  if (hf === 'lm_head.weight') return 'output.weight';
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  const part = m && LAYER_PARTS[m[2]!];
  if (!part) throw new Error(`no GGUF name for tensor ${hf}`);
  return `blk.${m[1]}.${part}`;
}

/**
 * llama.cpp's llama architecture rotates adjacent pairs; Hugging Face rotates the two halves of
 * each head. Reorders the rows of a q or k projection (or its LoRA B, or bias) [heads*hd, cols]:
 * within a head, row i of the first half goes to 2i and row i of the second half to 2i+1.
 */
export function permuteRopeRows(x: Float32Array, heads: number, cols: number): Float32Array {
  const rows = x.length / cols;
  const hd = rows / heads;
  const half = hd / 2;
  const out = new Float32Array(x.length);
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < half; i++)
      for (const s of [0, 1]) {
        const src = (h * hd + s * half + i) * cols;
        out.set(x.subarray(src, src + cols), (h * hd + 2 * i + s) * cols);
      }
  return out;
}

/** The permutation above for `hf` (a Llama q or k weight or bias), else the identity. */
export function ropeLayoutOf(cfg: ModelConfig, hf: string, cols: number): ((x: Float32Array) => Float32Array) | null {
  if (cfg.family !== 'llama') return null;
  if (/\.self_attn\.q_proj\./.test(hf)) return (x) => permuteRopeRows(x, cfg.numHeads, cols);
  if (/\.self_attn\.k_proj\./.test(hf)) return (x) => permuteRopeRows(x, cfg.numKvHeads, cols);
  return null;
}

/** llama.cpp's architecture name for a family. */
export function ggufArchitecture(cfg: ModelConfig): string {
  return cfg.family;
}

interface HfTokenizer {
  model: { type: string; vocab: Record<string, number>; merges: (string | [string, string])[] };
  added_tokens: { id: number; content: string; special: boolean }[];
}

function tokenizerMetadata(dir: string, cfg: ModelConfig): [string, GgufValue][] {
  const tok = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as HfTokenizer;
  const tcfgPath = join(dir, 'tokenizer_config.json');
  const tcfg = existsSync(tcfgPath) ? (JSON.parse(readFileSync(tcfgPath, 'utf8')) as { chat_template?: unknown }) : {};
  if (tok.model.type !== 'BPE') throw new Error(`${dir}/tokenizer.json: model ${tok.model.type} is not BPE`);
  const vocabSize = cfg.vocabSize;
  const tokens: string[] = Array.from({ length: vocabSize }, (_, i) => `[PAD${i}]`);
  const types: number[] = new Array<number>(vocabSize).fill(TOKEN_UNUSED);
  for (const [s, id] of Object.entries(tok.model.vocab)) {
    if (id >= vocabSize) throw new Error(`token id ${id} >= vocab_size ${vocabSize}`);
    tokens[id] = s;
    types[id] = TOKEN_NORMAL;
  }
  for (const a of tok.added_tokens) {
    if (a.id >= vocabSize) throw new Error(`added token id ${a.id} >= vocab_size ${vocabSize}`);
    tokens[a.id] = a.content;
    types[a.id] = a.special ? TOKEN_CONTROL : TOKEN_USER_DEFINED;
  }
  const merges = tok.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
  const eos = cfg.eosTokenIds[0];
  if (eos === undefined) throw new Error(`${dir}: the model names no eos token`);
  const out: [string, GgufValue][] = [
    ['tokenizer.ggml.model', { t: 'str', v: 'gpt2' }],
    ['tokenizer.ggml.pre', { t: 'str', v: cfg.family === 'llama' ? 'llama-bpe' : 'qwen2' }],
    ['tokenizer.ggml.tokens', { t: 'strs', v: tokens }],
    ['tokenizer.ggml.token_type', { t: 'i32s', v: types }],
    ['tokenizer.ggml.merges', { t: 'strs', v: merges }],
    ['tokenizer.ggml.eos_token_id', { t: 'u32', v: eos }],
    // llama.cpp wants a bos id even where the model has none in use; we pass ids, never adding one.
    ['tokenizer.ggml.bos_token_id', { t: 'u32', v: cfg.bosTokenId ?? eos }],
    ['tokenizer.ggml.add_bos_token', { t: 'bool', v: false }],
  ];
  if (typeof tcfg.chat_template === 'string')
    out.push(['tokenizer.chat_template', { t: 'str', v: tcfg.chat_template }]);
  return out;
}

function architectureMetadata(cfg: ModelConfig, type: GgufWeightType, name: string): [string, GgufValue][] {
  const a = ggufArchitecture(cfg);
  return [
    ['general.architecture', { t: 'str', v: a }],
    ['general.name', { t: 'str', v: name }],
    ['general.file_type', { t: 'u32', v: FILE_TYPE[type] }],
    [`${a}.context_length`, { t: 'u32', v: cfg.maxPositionEmbeddings }],
    [`${a}.embedding_length`, { t: 'u32', v: cfg.hiddenSize }],
    [`${a}.block_count`, { t: 'u32', v: cfg.numLayers }],
    [`${a}.feed_forward_length`, { t: 'u32', v: cfg.intermediateSize }],
    [`${a}.attention.head_count`, { t: 'u32', v: cfg.numHeads }],
    [`${a}.attention.head_count_kv`, { t: 'u32', v: cfg.numKvHeads }],
    [`${a}.attention.key_length`, { t: 'u32', v: cfg.headDim }],
    [`${a}.attention.value_length`, { t: 'u32', v: cfg.headDim }],
    [`${a}.attention.layer_norm_rms_epsilon`, { t: 'f32', v: cfg.rmsNormEps }],
    [`${a}.rope.freq_base`, { t: 'f32', v: cfg.ropeTheta }],
    [`${a}.rope.dimension_count`, { t: 'u32', v: cfg.headDim }],
    [`${a}.vocab_size`, { t: 'u32', v: cfg.vocabSize }],
  ];
}

export interface ModelGgufSource {
  /** The folder whose tokenizer files (tokenizer.json, tokenizer_config.json) go into the file. */
  tokenizerDir: string;
  config: ModelConfig;
  /** One Hugging Face tensor's values, row-major float32. */
  tensor(hfName: string, shape: number[]): Float32Array;
}

/** Writes the model `src` as a GGUF file of `type` at `out` (atomically); returns its size in bytes. */
export function writeModelGguf(src: ModelGgufSource, out: string, type: GgufWeightType, name: string): number {
  const cfg = src.config;
  const meta = [...architectureMetadata(cfg, type, name), ...tokenizerMetadata(src.tokenizerDir, cfg)];
  const tensors: GgufTensorSource[] = [];
  for (const spec of tensorSpecs(cfg)) {
    const matrix = spec.shape.length === 2;
    const tensorType: GgmlType = matrix ? (type === 'Q8_0' && spec.shape[1]! % 32 ? 'F16' : type) : 'F32';
    const layout = ropeLayoutOf(cfg, spec.name, matrix ? spec.shape[1]! : 1);
    tensors.push({
      name: ggufTensorName(spec.name),
      shape: spec.shape,
      type: tensorType,
      values: () => {
        const x = src.tensor(spec.name, spec.shape);
        return layout ? layout(x) : x;
      },
    });
  }
  if (cfg.ropeScaling)
    tensors.push({
      name: 'rope_freqs.weight',
      shape: [cfg.headDim / 2],
      type: 'F32',
      values: () => ropeFreqFactors(cfg),
    });
  return writeGgufFile(out, meta, tensors);
}

/**
 * Llama 3 RoPE scaling as llama.cpp takes it: one factor per frequency that the unscaled
 * frequency is divided by, here the unscaled over our scaled one, so both rotate alike.
 */
function ropeFreqFactors(cfg: ModelConfig): Float32Array {
  const scaled = ropeInvFreq(cfg);
  return scaled.map((f, i) => cfg.ropeTheta ** (-(2 * i) / cfg.headDim) / f);
}

/** The model folder `dir` as a GGUF source (its safetensors, single or sharded). */
export function folderGgufSource(dir: string): ModelGgufSource {
  const config = readModelFolder(dir).config;
  const index = indexWeights(dir);
  return {
    tokenizerDir: dir,
    config,
    tensor(hfName, shape) {
      const found = index.get(hfName);
      // A tied head is not stored; tensorSpecs leaves it out too.
      if (!found) throw new Error(`${dir}: tensor ${hfName} is missing`);
      if (found.entry.shape.join() !== shape.join())
        throw new Error(`${dir}: tensor ${hfName} has shape [${found.entry.shape}], the config says [${shape}]`);
      const x = new Float32Array(shape.reduce((a, b) => a * b, 1));
      readTensorInto(found.path, found.entry, x);
      return x;
    },
  };
}

/** Newest modification time of the files a model GGUF is made from. */
function sourceMtime(dir: string): number {
  const names = ['config.json', 'tokenizer.json', 'tokenizer_config.json'];
  const weights = [...new Set([...indexWeights(dir).values()].map((w) => w.path))];
  return Math.max(
    ...[...names.map((n) => join(dir, n)), ...weights].filter((p) => existsSync(p)).map((p) => statSync(p).mtimeMs),
  );
}

/**
 * The GGUF of the model folder `dir` in `type`, at <dir>/gguf/<name>-<type>.gguf: converted when
 * missing or older than the folder's weights, config or tokenizer; reused otherwise.
 * `onConvert` hears when a conversion starts (it takes seconds to minutes).
 */
export function cachedModelGguf(dir: string, type: GgufWeightType, onConvert?: (path: string) => void): string {
  const out = join(dir, 'gguf', `${basename(dir)}-${type.toLowerCase()}.gguf`);
  if (existsSync(out) && statSync(out).mtimeMs >= sourceMtime(dir)) return out;
  mkdirSync(join(dir, 'gguf'), { recursive: true });
  onConvert?.(out);
  writeModelGguf(folderGgufSource(dir), out, type, `openclaw-rl ${basename(dir)}`);
  return out;
}
