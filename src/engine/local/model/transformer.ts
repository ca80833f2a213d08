// Inference forward pass of the decoder families (Qwen3, Qwen2, Llama 3) over a batch of
// segments: each segment is some new tokens of one sequence, continuing its KV cache. All
// segments' tokens go through the linear layers together (one GEMM per weight, or GEMV when a
// single token is in flight); attention runs per segment against its own cache, one query row
// at a time for decoding, in blocks of rows through GEMMs for prompts (segment-attention.ts).
//
// At bf16 (precision.ts) every projection, adapter and LM-head product runs through gemmBf16 on
// the weights' bf16 copies, decode rows included (no sgemv: a decode step then reads half the
// weight bytes); attention and the KV cache stay fp32. At int8 the same, except that a step of at
// most INT8_MAX_ROWS tokens runs the projections and the LM head on the int8 copies (gemmInt8).
//
// Shapes: T = tokens in the step (all segments), D = hidden, F = ffn, H = q heads, KV = kv heads,
// hd = head dim, V = vocab, R = rows whose logits are wanted.

import { INT8_BLOCK } from '../kernels/int8.js';
import type { Kernels } from '../kernels/kernels.js';
import { type ModelConfig, ropeInvFreq } from './config.js';
import {
  checkKvDtype,
  createKvCache,
  isInt8Rows,
  type KvCache,
  type KvDtype,
  type KvRows,
  reserveKvCache,
} from './kv-cache.js';
import { segmentAttention } from './segment-attention.js';
import type { ParamStore, TensorSpec } from './weights.js';
import { type Bf16Params, type Gemm, gemmFor, type Int8Params, type Int8Weight } from '../precision.js';
import type { Lora } from '../train/lora.js';
import type { LinearName } from '../train/model-params.js';

export interface ForwardSegment {
  cache: KvCache;
  tokens: ArrayLike<number>;
  /** First index in `tokens` whose next-token logits are wanted (tokens.length: none). */
  logitsFrom: number;
  /** LoRA adapter of the policy version this sequence runs on (null: the base weights). */
  lora?: Lora | null;
}

/**
 * Steps of up to this many tokens (decoding, a few sequences at once) read the int8 copies: they
 * stream the weights once for all rows, while for more rows bf16 GEMM blocking wins.
 */
export const INT8_MAX_ROWS = 8;

/** The tensors that have int8 copies at int8: those the linear layers and the LM head read. */
export function int8Tensors(cfg: ModelConfig): (s: TensorSpec) => boolean {
  return (s) => s.kind === 'matrix' || (cfg.tieWordEmbeddings && s.name === 'model.embed_tokens.weight');
}

/** A projection's weight [out, in], its bf16 copy at bf16 and int8, its int8 copy at int8. */
interface Weight {
  f32: Float32Array;
  b16: Uint16Array | null;
  i8: Int8Weight | null;
}

interface LayerWeights {
  inputNorm: Float32Array;
  wq: Weight;
  wk: Weight;
  wv: Weight;
  wo: Weight;
  bq: Float32Array | null;
  bk: Float32Array | null;
  bv: Float32Array | null;
  bo: Float32Array | null;
  qNorm: Float32Array | null;
  kNorm: Float32Array | null;
  postNorm: Float32Array;
  wGate: Weight;
  wUp: Weight;
  wDown: Weight;
}

export class Transformer {
  private readonly layers: LayerWeights[];
  private readonly embed: Float32Array;
  private readonly finalNorm: Float32Array;
  private readonly lmHead: Weight;
  private readonly gemm: Gemm | null;
  private readonly invFreq: Float32Array;
  private readonly scratch = new Map<string, Float32Array>();
  /** The rows of the caches this model's sequences get: bf16 at bf16 and int8 unless told otherwise. */
  readonly kvDtype: KvDtype;
  /** The sampler's tempered weights over one row of this model's logits, on its kernels. */
  readonly weighLogits: Kernels['temperedWeights'];

  /**
   * bf16: copies of `params` (bf16ParamsOf) for every product to read; without, fp32 (sgemm, sgemv).
   * int8 (with bf16): copies of the int8Tensors for steps of up to INT8_MAX_ROWS tokens.
   * kvDtype: the caches' rows (default: bf16 with bf16 copies, else f32).
   */
  constructor(
    readonly cfg: ModelConfig,
    params: ParamStore,
    private readonly k: Kernels,
    bf16?: Bf16Params,
    int8?: Int8Params,
    kvDtype?: KvDtype,
  ) {
    if (int8 && !bf16) throw new Error('int8 copies serve decode steps only: prefill needs the bf16 copies too');
    if (bf16 && bf16.data.length !== params.data.length) {
      throw new RangeError(`the bf16 copy holds ${bf16.data.length} values, the parameters ${params.data.length}`);
    }
    this.gemm = bf16 ? gemmFor(k, 'bf16') : null;
    this.kvDtype = kvDtype ?? (bf16 ? 'bf16' : 'f32');
    checkKvDtype(cfg, this.kvDtype);
    this.weighLogits = k.temperedWeights;
    const opt = (n: string) => (params.has(n) ? params.get(n) : null);
    const weight = (n: string): Weight => ({ f32: params.get(n), b16: bf16?.get(n) ?? null, i8: int8?.get(n) ?? null });
    this.layers = Array.from({ length: cfg.numLayers }, (_, l) => {
      const p = `model.layers.${l}.`;
      return {
        inputNorm: params.get(`${p}input_layernorm.weight`),
        wq: weight(`${p}self_attn.q_proj.weight`),
        wk: weight(`${p}self_attn.k_proj.weight`),
        wv: weight(`${p}self_attn.v_proj.weight`),
        wo: weight(`${p}self_attn.o_proj.weight`),
        bq: opt(`${p}self_attn.q_proj.bias`),
        bk: opt(`${p}self_attn.k_proj.bias`),
        bv: opt(`${p}self_attn.v_proj.bias`),
        bo: opt(`${p}self_attn.o_proj.bias`),
        qNorm: opt(`${p}self_attn.q_norm.weight`),
        kNorm: opt(`${p}self_attn.k_norm.weight`),
        postNorm: params.get(`${p}post_attention_layernorm.weight`),
        wGate: weight(`${p}mlp.gate_proj.weight`),
        wUp: weight(`${p}mlp.up_proj.weight`),
        wDown: weight(`${p}mlp.down_proj.weight`),
      };
    });
    this.embed = params.get('model.embed_tokens.weight');
    this.finalNorm = params.get('model.norm.weight');
    this.lmHead = weight(cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
    this.invFreq = ropeInvFreq(cfg);
  }

  /** An empty cache for a sequence of this model: kvDtype rows, room for `initialCapacity` positions. */
  newKvCache(initialCapacity = 64): KvCache {
    return createKvCache(this.cfg, initialCapacity, this.cfg.maxPositionEmbeddings, this.kvDtype);
  }

  /**
   * Runs the new tokens of every segment, appends their keys/values to the caches, and returns
   * the logits rows asked for, one [rows, V] view per segment. The views live in scratch memory:
   * read them before the next call.
   */
  forward(segments: readonly ForwardSegment[]): Float32Array[] {
    const { cfg, k } = this;
    const D = cfg.hiddenSize,
      F = cfg.intermediateSize,
      hd = cfg.headDim,
      V = cfg.vocabSize;
    const qDim = cfg.numHeads * hd,
      kvDim = cfg.numKvHeads * hd;
    const T = segments.reduce((a, s) => a + s.tokens.length, 0);
    if (T === 0) return segments.map(() => new Float32Array(0));

    for (const s of segments) reserveKvCache(s.cache, s.cache.length + s.tokens.length);
    const x = this.buf('x', T * D); // [T, D] residual stream
    const h = this.buf('h', T * D); // [T, D] normed input of a block
    const q = this.buf('q', T * qDim); // [T, H*hd]
    const kk = this.buf('k', T * kvDim); // [T, KV*hd]
    const vv = this.buf('v', T * kvDim);
    const att = this.buf('att', T * qDim); // [T, H*hd]
    const proj = this.buf('proj', T * D); // [T, D]
    const gate = this.buf('gate', T * F); // [T, F]
    const up = this.buf('up', T * F);
    const positions = new Int32Array(T);
    const anyLora = segments.some((s) => s.lora);

    let row = 0;
    for (const s of segments) {
      for (let i = 0; i < s.tokens.length; i++, row++) {
        const id = s.tokens[i]!;
        if (!(id >= 0 && id < V)) throw new RangeError(`token id ${id} is outside the vocabulary of ${V}`);
        x.set(this.embed.subarray(id * D, id * D + D), row * D);
        positions[row] = s.cache.length + i;
      }
    }

    for (let l = 0; l < cfg.numLayers; l++) {
      const w = this.layers[l]!;
      const adapt = (y: Float32Array, input: Float32Array, target: LinearName) => {
        if (anyLora) this.applyLora(y, input, segments, l, target);
      };
      k.rmsnorm(h, x, w.inputNorm, T, D, cfg.rmsNormEps);
      this.linear(q, h, T, w.wq, D, qDim, w.bq);
      adapt(q, h, 'q');
      this.linear(kk, h, T, w.wk, D, kvDim, w.bk);
      adapt(kk, h, 'k');
      this.linear(vv, h, T, w.wv, D, kvDim, w.bv);
      adapt(vv, h, 'v');
      if (w.qNorm && w.kNorm) {
        k.rmsnorm(q, q, w.qNorm, T * cfg.numHeads, hd, cfg.rmsNormEps);
        k.rmsnorm(kk, kk, w.kNorm, T * cfg.numKvHeads, hd, cfg.rmsNormEps);
      }
      k.rope(q, T, cfg.numHeads, hd, positions, this.invFreq);
      k.rope(kk, T, cfg.numKvHeads, hd, positions, this.invFreq);

      row = 0;
      for (const s of segments) {
        const n = s.tokens.length,
          start = s.cache.length;
        writeKvRows(k, s.cache.k[l]!, kk.subarray(row * kvDim, (row + n) * kvDim), start * kvDim);
        writeKvRows(k, s.cache.v[l]!, vv.subarray(row * kvDim, (row + n) * kvDim), start * kvDim);
        segmentAttention(
          k,
          att.subarray(row * qDim, (row + n) * qDim),
          q.subarray(row * qDim, (row + n) * qDim),
          s.cache.k[l]!,
          s.cache.v[l]!,
          n,
          start,
          cfg,
          (floats, purpose) => this.buf(`attention-${purpose}`, floats),
        );
        row += n;
      }

      this.linear(proj, att, T, w.wo, qDim, D, w.bo);
      adapt(proj, att, 'o');
      addInPlace(x, proj, T * D);
      k.rmsnorm(h, x, w.postNorm, T, D, cfg.rmsNormEps);
      this.linear(gate, h, T, w.wGate, D, F, null);
      adapt(gate, h, 'gate');
      this.linear(up, h, T, w.wUp, D, F, null);
      adapt(up, h, 'up');
      k.siluMul(gate, gate, up, T * F);
      this.linear(proj, gate, T, w.wDown, F, D, null);
      adapt(proj, gate, 'down');
      addInPlace(x, proj, T * D);
    }
    for (const s of segments) s.cache.length += s.tokens.length;

    // Only the rows whose logits are wanted go through the final norm and the LM head.
    const R = segments.reduce((a, s) => a + Math.max(0, s.tokens.length - s.logitsFrom), 0);
    const hf = this.buf('hf', Math.max(R, 1) * D);
    row = 0;
    let r = 0;
    for (const s of segments) {
      for (let i = Math.max(0, s.logitsFrom); i < s.tokens.length; i++, r++)
        hf.set(x.subarray((row + i) * D, (row + i + 1) * D), r * D);
      row += s.tokens.length;
    }
    const logits = this.buf('logits', Math.max(R, 1) * V);
    if (R > 0) {
      k.rmsnorm(hf, hf, this.finalNorm, R, D, cfg.rmsNormEps);
      this.linear(logits, hf, R, this.lmHead, D, V, null);
    }
    r = 0;
    return segments.map((s) => {
      const rows = Math.max(0, s.tokens.length - s.logitsFrom);
      const view = logits.subarray(r * V, (r + rows) * V);
      r += rows;
      return view;
    });
  }

  /** out[T, outDim] = x[T, inDim] . W^T (+ bias), W stored [outDim, inDim] as in Hugging Face. */
  private linear(
    out: Float32Array,
    x: Float32Array,
    T: number,
    W: Weight,
    inDim: number,
    outDim: number,
    bias: Float32Array | null,
  ): void {
    if (W.i8 && T <= INT8_MAX_ROWS) this.k.gemmInt8(T, outDim, inDim, x, W.i8.q, W.i8.scales, out);
    else if (this.gemm) this.gemm(false, true, T, outDim, inDim, 1, x, inDim, W.b16 ?? W.f32, inDim, 0, out, outDim);
    else if (T === 1)
      this.k.sgemv(false, outDim, inDim, 1, W.f32, inDim, x.subarray(0, inDim), 0, out.subarray(0, outDim));
    else this.k.sgemm(false, true, T, outDim, inDim, 1, x, inDim, W.f32, inDim, 0, out, outDim);
    if (bias) {
      for (let t = 0; t < T; t++) {
        const o = t * outDim;
        for (let i = 0; i < outDim; i++) out[o + i]! += bias[i]!;
      }
    }
  }

  /** y[rows of s] += scale * (x A^T) B^T for every segment s whose version has an adapter here. */
  private applyLora(
    y: Float32Array,
    x: Float32Array,
    segments: readonly ForwardSegment[],
    layer: number,
    target: LinearName,
  ): void {
    let row = 0;
    for (const s of segments) {
      const n = s.tokens.length;
      const w = s.lora?.weights(layer, target);
      if (w) {
        const inDim = w.a.shape[1],
          outDim = w.b.shape[0];
        const u = this.buf('loraU', n * w.rank);
        // At bf16 the adapter's small fp32 A and B are rounded on the fly, as training does.
        const gemm = this.gemm ?? this.k.sgemm.bind(this.k);
        gemm(
          false,
          true,
          n,
          w.rank,
          inDim,
          1,
          x.subarray(row * inDim, (row + n) * inDim),
          inDim,
          w.A,
          inDim,
          0,
          u,
          w.rank,
        );
        gemm(
          false,
          true,
          n,
          outDim,
          w.rank,
          w.scale,
          u,
          w.rank,
          w.B,
          w.rank,
          1,
          y.subarray(row * outDim, (row + n) * outDim),
          outDim,
        );
      }
      row += n;
    }
  }

  /**
   * log sum exp of each [V] row of `rows` (forward's logits), one per row, by the kernels (the
   * native ones vectorized); a scratch view, like forward's.
   */
  logNormalizers(rows: Float32Array): Float32Array {
    const V = this.cfg.vocabSize,
      n = rows.length / V;
    const lse = this.buf('lse', n);
    this.k.logitsStats(lse, this.buf('entropy', n), rows, n, V);
    return lse;
  }

  private buf(name: string, size: number): Float32Array {
    let b = this.scratch.get(name);
    if (!b || b.length < size) {
      b = new Float32Array(Math.max(size, b ? b.length * 2 : 0));
      this.scratch.set(name, b);
    }
    return b.subarray(0, size);
  }
}

function addInPlace(x: Float32Array, y: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) x[i]! += y[i]!;
}

/** rows[at ..] = x, rounded to bf16 (toBf16) or quantized (quantizeInt8) for such a cache. */
function writeKvRows(k: Kernels, rows: KvRows, x: Float32Array, at: number): void {
  if (isInt8Rows(rows)) {
    const n = x.length;
    // One block of 32 a "row", so that the quantizer's threads share a decode step's few rows too.
    k.quantizeInt8(
      rows.values.subarray(at, at + n),
      rows.scales.subarray(at / INT8_BLOCK),
      x,
      n / INT8_BLOCK,
      INT8_BLOCK,
    );
  } else if (rows instanceof Uint16Array) k.toBf16(rows.subarray(at, at + x.length), x, x.length);
  else rows.set(x, at);
}
