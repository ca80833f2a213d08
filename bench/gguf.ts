// Bench-only GGUF v3 writer: converts one of our Hugging Face model folders (Qwen3: config.json,
// model.safetensors, tokenizer.json, tokenizer_config.json) into a GGUF file llama.cpp loads, so
// the decode benchmark runs llama.cpp on exactly the weights our engine serves.
//
// Layout (GGUF v3, little-endian): "GGUF", version 3, tensor count (u64), metadata count (u64);
// the metadata key/values; one info record per tensor (name, dims innermost first, ggml type,
// offset into the data section); padding to the alignment (32); the tensor data, each tensor
// starting on an aligned offset.
//
// Weights: the 2-D projection and embedding tensors in the chosen type (Q8_0: blocks of 32
// values = one fp16 scale d = max|x|/127 and 32 int8 round(x/d); BF16; F32), 1-D norms in F32.
// Tensor and key names follow llama.cpp's qwen3 architecture (token_embd, blk.N.attn_q, ...,
// attn_q_norm/attn_k_norm, ffn_gate/up/down, output_norm, output when the head is not tied).
// The tokenizer is the gpt2-style byte-level BPE llama.cpp knows as model "gpt2", pre-tokenizer
// "qwen2" (the same split regex as our tokenizer.json): every token string, its type, the
// merges, eos/pad/bos ids and the chat template; ids between the tokenizer's size and
// vocab_size are padding tokens "[PADn]" of type UNUSED, as Hugging Face's converter pads them.

import { closeSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import {
  readSafetensorsHeader,
  readTensorInto,
  type SafetensorsHeader,
  type TensorEntry,
} from '../src/engine/local/model/safetensors.js';

export type GgufWeightType = 'Q8_0' | 'BF16' | 'F32';

// ggml_type ids and llama_ftype ("general.file_type") ids.
const GGML_TYPE = { F32: 0, Q8_0: 8, BF16: 30 } as const;
const FILE_TYPE: Record<GgufWeightType, number> = { F32: 0, Q8_0: 7, BF16: 32 };
// gguf_type ids of metadata values.
const T = { U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const;
// llama.cpp token types.
const TOKEN_NORMAL = 1,
  TOKEN_CONTROL = 3,
  TOKEN_USER_DEFINED = 4,
  TOKEN_UNUSED = 5;
const ALIGN = 32;
const QK8_0 = 32;

type Value =
  | { t: 'u32'; v: number }
  | { t: 'i32'; v: number }
  | { t: 'f32'; v: number }
  | { t: 'bool'; v: boolean }
  | { t: 'str'; v: string }
  | { t: 'strs'; v: string[] }
  | { t: 'i32s'; v: number[] };

/** A growable little-endian byte buffer for the header. */
class Bytes {
  private buf = Buffer.alloc(1 << 20);
  length = 0;
  private ensure(n: number) {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u32(v: number) {
    this.ensure(4);
    this.buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  i32(v: number) {
    this.ensure(4);
    this.buf.writeInt32LE(v, this.length);
    this.length += 4;
  }
  u64(v: number) {
    this.ensure(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  f32(v: number) {
    this.ensure(4);
    this.buf.writeFloatLE(v, this.length);
    this.length += 4;
  }
  u8(v: number) {
    this.ensure(1);
    this.buf[this.length++] = v;
  }
  str(s: string) {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.ensure(b.length);
    b.copy(this.buf, this.length);
    this.length += b.length;
  }
  pad(align: number) {
    while (this.length % align) this.u8(0);
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

function writeValue(b: Bytes, val: Value) {
  switch (val.t) {
    case 'u32':
      b.u32(T.U32);
      b.u32(val.v);
      break;
    case 'i32':
      b.u32(T.I32);
      b.i32(val.v);
      break;
    case 'f32':
      b.u32(T.F32);
      b.f32(val.v);
      break;
    case 'bool':
      b.u32(T.BOOL);
      b.u8(val.v ? 1 : 0);
      break;
    case 'str':
      b.u32(T.STRING);
      b.str(val.v);
      break;
    case 'strs':
      b.u32(T.ARRAY);
      b.u32(T.STRING);
      b.u64(val.v.length);
      for (const s of val.v) b.str(s);
      break;
    case 'i32s':
      b.u32(T.ARRAY);
      b.u32(T.I32);
      b.u64(val.v.length);
      for (const x of val.v) b.i32(x);
      break;
  }
}

// ------------------------------------------------------------------ number formats

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE half bits of x, round to nearest even, with subnormals, overflow to infinity. */
export function toFp16Bits(x: number): number {
  f32[0] = x;
  const bits = u32[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  let mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000; // implicit 1
    const shift = 14 - e; // 24-bit significand down to a 10-bit subnormal field
    const half = 1 << (shift - 1);
    let m = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    if (rest > half || (rest === half && m & 1)) m++;
    return sign | m; // a carry into bit 10 is the smallest normal, still correct
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && m & 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
}

export function fromFp16Bits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1,
    e = (h >>> 10) & 0x1f,
    m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

/** Q8_0 blocks of `x` (length a multiple of 32): 34 bytes each. */
export function quantizeQ8_0(x: Float32Array): Buffer {
  const nb = x.length / QK8_0;
  const out = Buffer.alloc(nb * 34);
  const q = new Int8Array(out.buffer, out.byteOffset, out.length);
  for (let b = 0; b < nb; b++) {
    const base = b * QK8_0;
    let amax = 0;
    for (let j = 0; j < QK8_0; j++) amax = Math.max(amax, Math.abs(x[base + j]!));
    const d = amax / 127,
      id = d ? 1 / d : 0;
    const o = b * 34;
    out.writeUInt16LE(toFp16Bits(d), o);
    // round half away from zero, as C's roundf
    for (let j = 0; j < QK8_0; j++) {
      const v = x[base + j]! * id;
      q[o + 2 + j] = v < 0 ? -Math.round(-v) : Math.round(v);
    }
  }
  return out;
}

function toBf16Buffer(x: Float32Array): Buffer {
  const out = Buffer.alloc(x.length * 2);
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  for (let i = 0; i < x.length; i++) {
    const v = bits[i]!;
    const r = (v & 0x7fffffff) > 0x7f800000 ? ((v >>> 16) & 0x8000) | 0x7fc0 : (v + 0x7fff + ((v >>> 16) & 1)) >>> 16;
    out.writeUInt16LE(r & 0xffff, 2 * i);
  }
  return out;
}

// ------------------------------------------------------------------ conversion

interface TensorPlan {
  name: string;
  source: TensorEntry;
  dims: number[]; // innermost first
  type: keyof typeof GGML_TYPE;
  bytes: number;
  offset: number;
}

function tensorBytes(type: keyof typeof GGML_TYPE, count: number): number {
  if (type === 'F32') return 4 * count;
  if (type === 'BF16') return 2 * count;
  return (count / QK8_0) * 34;
}

/** Our Hugging Face name -> llama.cpp's qwen3 tensor name. */
function ggufName(hf: string): string {
  if (hf === 'model.embed_tokens.weight') return 'token_embd.weight';
  if (hf === 'model.norm.weight') return 'output_norm.weight';
  if (hf === 'lm_head.weight') return 'output.weight';
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  const parts: Record<string, string> = {
    'input_layernorm.weight': 'attn_norm.weight',
    'post_attention_layernorm.weight': 'ffn_norm.weight',
    'self_attn.q_proj.weight': 'attn_q.weight',
    'self_attn.k_proj.weight': 'attn_k.weight',
    'self_attn.v_proj.weight': 'attn_v.weight',
    'self_attn.o_proj.weight': 'attn_output.weight',
    'self_attn.q_norm.weight': 'attn_q_norm.weight',
    'self_attn.k_norm.weight': 'attn_k_norm.weight',
    'mlp.gate_proj.weight': 'ffn_gate.weight',
    'mlp.up_proj.weight': 'ffn_up.weight',
    'mlp.down_proj.weight': 'ffn_down.weight',
  };
  if (!m || !parts[m[2]!]) throw new Error(`no GGUF name for tensor ${hf} (only Qwen3 without biases is supported)`);
  return `blk.${m[1]}.${parts[m[2]!]}`;
}

interface HfTokenizer {
  model: { type: string; vocab: Record<string, number>; merges: (string | [string, string])[] };
  added_tokens: { id: number; content: string; special: boolean }[];
}

function tokenizerMetadata(dir: string, vocabSize: number, eosId: number, padId: number | null): [string, Value][] {
  const tok = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as HfTokenizer;
  const cfg = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as { chat_template?: string };
  if (tok.model.type !== 'BPE') throw new Error(`tokenizer model ${tok.model.type} is not BPE`);
  const tokens: string[] = Array.from({ length: vocabSize }, (_, i) => `[PAD${i}]`);
  const types: number[] = new Array<number>(vocabSize).fill(TOKEN_UNUSED);
  for (const [s, id] of Object.entries(tok.model.vocab)) {
    if (id >= vocabSize) throw new Error(`token id ${id} >= vocab_size ${vocabSize}`);
    tokens[id] = s;
    types[id] = TOKEN_NORMAL;
  }
  for (const a of tok.added_tokens) {
    tokens[a.id] = a.content;
    types[a.id] = a.special ? TOKEN_CONTROL : TOKEN_USER_DEFINED;
  }
  const merges = tok.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
  const out: [string, Value][] = [
    ['tokenizer.ggml.model', { t: 'str', v: 'gpt2' }],
    ['tokenizer.ggml.pre', { t: 'str', v: 'qwen2' }],
    ['tokenizer.ggml.tokens', { t: 'strs', v: tokens }],
    ['tokenizer.ggml.token_type', { t: 'i32s', v: types }],
    ['tokenizer.ggml.merges', { t: 'strs', v: merges }],
    ['tokenizer.ggml.eos_token_id', { t: 'u32', v: eosId }],
    // Qwen has no BOS in use; llama.cpp wants an id anyway: <|endoftext|>, never added.
    ['tokenizer.ggml.bos_token_id', { t: 'u32', v: padId ?? eosId }],
    ['tokenizer.ggml.add_bos_token', { t: 'bool', v: false }],
  ];
  if (padId !== null) out.push(['tokenizer.ggml.padding_token_id', { t: 'u32', v: padId }]);
  if (cfg.chat_template) out.push(['tokenizer.chat_template', { t: 'str', v: cfg.chat_template }]);
  return out;
}

/** Writes `out` (atomically) from the model folder `dir`; returns the file size in bytes. */
export function writeGguf(
  dir: string,
  out: string,
  weightType: GgufWeightType,
  name = 'openclaw-rl bench model',
): number {
  const folder = readModelFolder(dir);
  const c = folder.config;
  if (c.family !== 'qwen3') throw new Error(`GGUF conversion supports the qwen3 family only (got ${c.family})`);
  const st: SafetensorsHeader = readSafetensorsHeader(join(dir, 'model.safetensors'));
  const genCfg = JSON.parse(readFileSync(join(dir, 'generation_config.json'), 'utf8')) as { pad_token_id?: number };
  const meta: [string, Value][] = [
    ['general.architecture', { t: 'str', v: 'qwen3' }],
    ['general.name', { t: 'str', v: name }],
    ['general.file_type', { t: 'u32', v: FILE_TYPE[weightType] }],
    ['general.alignment', { t: 'u32', v: ALIGN }],
    ['qwen3.context_length', { t: 'u32', v: c.maxPositionEmbeddings }],
    ['qwen3.embedding_length', { t: 'u32', v: c.hiddenSize }],
    ['qwen3.block_count', { t: 'u32', v: c.numLayers }],
    ['qwen3.feed_forward_length', { t: 'u32', v: c.intermediateSize }],
    ['qwen3.attention.head_count', { t: 'u32', v: c.numHeads }],
    ['qwen3.attention.head_count_kv', { t: 'u32', v: c.numKvHeads }],
    ['qwen3.attention.key_length', { t: 'u32', v: c.headDim }],
    ['qwen3.attention.value_length', { t: 'u32', v: c.headDim }],
    ['qwen3.attention.layer_norm_rms_epsilon', { t: 'f32', v: c.rmsNormEps }],
    ['qwen3.rope.freq_base', { t: 'f32', v: c.ropeTheta }],
    ...tokenizerMetadata(dir, c.vocabSize, c.eosTokenIds[0]!, genCfg.pad_token_id ?? null),
  ];
  if (c.ropeScaling) throw new Error('rope scaling is not supported by this converter');

  // Plan every tensor: the head is left out when tied (llama.cpp then uses token_embd).
  const plans: TensorPlan[] = [];
  let offset = 0;
  for (const e of [...st.tensors.values()].sort((a, b) => a.begin - b.begin)) {
    if (e.name === 'lm_head.weight' && c.tieWordEmbeddings) continue;
    const count = e.shape.reduce((a, b) => a * b, 1);
    const type = e.shape.length === 2 ? weightType : 'F32';
    if (type === 'Q8_0' && e.shape[1]! % QK8_0)
      throw new Error(`${e.name}: row length ${e.shape[1]} is not a multiple of 32`);
    const bytes = tensorBytes(type, count);
    plans.push({ name: ggufName(e.name), source: e, dims: [...e.shape].reverse(), type, bytes, offset });
    offset += Math.ceil(bytes / ALIGN) * ALIGN;
  }

  const h = new Bytes();
  h.u32(0x46554747); // "GGUF"
  h.u32(3);
  h.u64(plans.length);
  h.u64(meta.length);
  for (const [k, v] of meta) {
    h.str(k);
    writeValue(h, v);
  }
  for (const p of plans) {
    h.str(p.name);
    h.u32(p.dims.length);
    for (const d of p.dims) h.u64(d);
    h.u32(GGML_TYPE[p.type]);
    h.u64(p.offset);
  }
  h.pad(ALIGN);

  const tmp = `${out}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, h.bytes());
    let written = 0;
    const zeros = Buffer.alloc(ALIGN);
    for (const p of plans) {
      if (written !== p.offset) throw new Error('GGUF offsets out of step');
      const x = new Float32Array(p.source.shape.reduce((a, b) => a * b, 1));
      readTensorInto(st.path, p.source, x);
      const data =
        p.type === 'F32'
          ? Buffer.from(x.buffer, x.byteOffset, x.byteLength)
          : p.type === 'BF16'
            ? toBf16Buffer(x)
            : quantizeQ8_0(x);
      writeSync(fd, data);
      const padded = Math.ceil(p.bytes / ALIGN) * ALIGN;
      if (padded > p.bytes) writeSync(fd, zeros, 0, padded - p.bytes);
      written += padded;
    }
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, out);
  return h.length + offset;
}
