// The decoder's training pass over a batch of packed sequences: a forward that keeps what the
// backward needs (the tape), returning the log-prob and entropy of every completion token, and
// a backward that takes gradients w.r.t. those and accumulates parameter gradients. The
// backward calls the ops in exactly the reverse order of the forward.
//
// When a step's full tape would not fit the activation budget (memory.ts), the forward keeps
// only each layer's input, and the backward recomputes one layer's forward into one shared set
// of buffers just before that layer's backward: the same ops in the same order, so the
// gradients are bit-identical, for about one more forward's work. Where the budget allows, each
// layer's attention output and lse are kept too, and the recomputation skips the attention, the
// bulk of that work at long sequences (at 16k tokens of Qwen3-0.6B, 2.9 s of a layer's 14 s in a step).
//
// Likewise for the LM head, whose logits take vocab floats per completion row: when keeping them
// all would not fit, the forward computes them a chunk of rows at a time, keeping per row only
// the log-sum-exp and entropy (and the log-probs it returns), and the backward computes each
// chunk's logits again from the final hidden rows just before that chunk's backward.
//
// At bf16 (precision.ts) every GEMM (projections, LoRA, LM head, attention scores and values,
// forward and backward) rounds its inputs to bf16 and sums in fp32, reading the weights' bf16
// copies, which the caller owns and refreshes (LearnerCore, after each optimizer step).
//
// Shapes: T = packed tokens, D = hidden, F = ffn, H/KV = heads, hd = head dim, V = vocab,
// R = completion tokens (rows with logits), r = LoRA rank.

import type { Kernels } from '../kernels/kernels.js';
import { type ModelConfig, ropeInvFreq } from '../model/config.js';
import type { ParamStore } from '../model/weights.js';
import { type Bf16Params, type Gemm, gemmFor } from '../precision.js';
import {
  type AttentionCompute,
  attentionBackward,
  attentionForward,
  attentionScratchSize,
  type PackedSequence,
} from './attention.js';
import {
  linearBackward,
  linearForward,
  linearGroupBackward,
  linearGroupForward,
  loraInput,
  type LoraInput,
  type Operand,
  ROUND_IN_GEMM,
  type Round,
  type TrainLinear,
} from './linear.js';
import { type LogitGrads, logitsBackward, rowStats, type RowStats } from './logits.js';
import type { Lora } from './lora.js';
import { HEAD_CHUNK_ROWS, type StepSize, trainStepBytes } from './memory.js';
import { type LayerParams, LINEAR_NAMES, type LinearName, type PackRequest, trainParams } from './model-params.js';
import { packBatch, type TrainSequence } from './packing.js';
import { StepBuffers } from './step-buffers.js';

export interface ForwardResult {
  /** log p(completion token) per completion token, all sequences concatenated [R]. */
  logprobs: Float32Array;
  /** Entropy of the predictive distribution at each completion token [R]. */
  entropy: Float32Array;
  /** Where each sequence's completion tokens start in the [R] arrays. */
  offsets: number[];
  /** Log-softmax values at extra ids per row, when asked for (top-k distillation) [R * K]. */
  extraLogprobs?: Float32Array;
}

/**
 * One layer's activations; `lse` is the attention's log-sum-exp per head and token. h1, h2 and act
 * are read only as GEMM inputs, so at bf16 the kernels that make them write bf16 bits, kept as such.
 */
interface LayerTape {
  x: Float32Array;
  h1: Operand;
  q0: Float32Array | null;
  k0: Float32Array | null;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  lse: Float32Array;
  att: Operand;
  xMid: Float32Array;
  h2: Operand;
  gate: Float32Array;
  up: Float32Array;
  act: Operand;
  /** LoRA's x A^T per adapted projection; a group's (loraGroups) side by side in one buffer. */
  u: Partial<Record<LinearName, LoraInput>>;
}

/** Projections that read one input, whose LoRA adapters run stacked where two or more are adapted (linear.ts). */
const SHARED_INPUT: readonly (readonly LinearName[])[] = [
  ['q', 'k', 'v'],
  ['gate', 'up'],
];

/** What a layer's forward needs besides its weights and input, the same in the forward and a recomputation. */
interface StepContext {
  T: number;
  seqs: PackedSequence[];
  positions: Int32Array;
  checkpoint: boolean;
  /** With checkpoint: each layer's attention output and lse have their own buffers, kept for the backward. */
  keepAttention: boolean;
  scratchSize: number;
}

interface Tape {
  ctx: StepContext;
  R: number;
  tokens: Int32Array;
  negPositions: Int32Array;
  targets: Int32Array;
  rowIndex: Int32Array;
  /** Each layer's input x (and the last layer's output). */
  inputs: Float32Array[];
  /** Each layer's activations, or null where the backward recomputes them (checkpointing). */
  layers: (LayerTape | null)[];
  xFinal: Float32Array;
  hf: Float32Array;
  stats: RowStats;
  extraIds?: Int32Array;
  extraK: number;
  /** Logits rows per chunk of the head (R when not chunked). */
  headRows: number;
  /** All R rows' logits when the head is one chunk; null where the backward recomputes them. */
  logits: Float32Array | null;
}

export interface TrainModelOptions {
  /**
   * Called at every layer boundary of forward and backward (the first one also falls between
   * micro-batches), where the caller may block to let other work have the CPU.
   */
  pause?: () => void;
  /**
   * Bytes a step's activation and gradient buffers may take (trainStepBytes): a forward whose
   * full tape would not fit recomputes layers in its backward instead. Default: no limit.
   */
  activationBudgetBytes?: number;
  /** Recompute layers always (true) or never (false) instead of by the budget. */
  checkpoint?: boolean;
  /**
   * With layers recomputed: keep each layer's attention output and lse for the backward, which
   * then skips the attention's forward, always (true) or never (false) instead of by the budget.
   */
  keepAttention?: boolean;
  /** Chunk the LM head always (true) or never (false) instead of by the budget. */
  chunkedHead?: boolean;
  /** Logits rows per chunk of a chunked LM head; default HEAD_CHUNK_ROWS. */
  headChunkRows?: number;
  /**
   * bf16 copies of `params` (bf16ParamsOf): every GEMM then runs at bf16, reading them for the
   * weights. Default: none, every GEMM is sgemm (fp32).
   */
  bf16?: Bf16Params;
  /** With bf16: the frozen weights' copies in oneDNN's layout, packed here or shared (packed-weights.ts). */
  pack?: PackRequest;
}

/**
 * The layouts a step may take as [recompute layers, keep their attention, chunk the head], in
 * order of the work they add: none; the head's logits computed again in the backward (one more
 * head GEMM and softmax pass over the completion rows: at Qwen3-0.6B 0.3 GFLOP a row); the layers
 * recomputed but their attention kept (every layer's projections and MLP again: 0.8 GFLOP a token
 * there); the attention recomputed too (2 hd H T_seq FLOP more a token and layer: at Qwen3-0.6B,
 * 0.06 GFLOP a token over the layers at 512 tokens, 1.9 at 16k); each of those with the head chunked.
 */
const LAYOUTS = [
  [false, false, false],
  [false, false, true],
  [true, true, false],
  [true, true, true],
  [true, false, false],
  [true, false, true],
] as const;

export class TrainModel {
  private readonly layers: LayerParams[];
  private readonly embed: Float32Array;
  private readonly dEmbed: Float32Array | null;
  private readonly finalNorm: Float32Array;
  private readonly dFinalNorm: Float32Array | null;
  private readonly lmHead: TrainLinear;
  private readonly invFreq: Float32Array;
  private tape: Tape | null = null;
  /** Every gradient buffer holds zeros (gradientsCleared), until the next backward. */
  private gradientsZero = false;
  private readonly buffers: StepBuffers;
  private readonly maxRank: number;
  private readonly loraTargets: number;
  /** Adapted projections of one input whose LoRA products run stacked (SHARED_INPUT), the same in every layer. */
  private readonly loraGroups: readonly (readonly LinearName[])[];
  private readonly pause: (() => void) | undefined;
  private readonly budget: number;
  private readonly forceCheckpoint: boolean | undefined;
  private readonly forceKeepAttention: boolean | undefined;
  private readonly forceChunkedHead: boolean | undefined;
  private readonly headChunkRows: number;
  private readonly gemm: Gemm;
  private readonly attentionCompute: AttentionCompute;
  /** At bf16, rounds an input shared by several products once (linear.ts, Round); at fp32 the identity. */
  private readonly round: Round;

  /** grads: a buffer shaped like params for full fine-tuning; null with LoRA (base frozen). */
  constructor(
    readonly cfg: ModelConfig,
    params: ParamStore,
    grads: ParamStore | null,
    lora: Lora | null,
    private readonly k: Kernels,
    opts: TrainModelOptions = {},
  ) {
    this.pause = opts.pause;
    this.budget = opts.activationBudgetBytes ?? Infinity;
    this.forceCheckpoint = opts.checkpoint;
    this.forceKeepAttention = opts.keepAttention;
    this.forceChunkedHead = opts.chunkedHead;
    this.headChunkRows = opts.headChunkRows ?? HEAD_CHUNK_ROWS;
    const bf16 = opts.bf16 ?? null;
    if (bf16 && bf16.data.length !== params.data.length) {
      throw new RangeError(`the bf16 copy holds ${bf16.data.length} values, the parameters ${params.data.length}`);
    }
    this.gemm = gemmFor(k, bf16 ? 'bf16' : 'fp32');
    this.attentionCompute = { gemm: this.gemm, bf16: bf16 !== null };
    this.round = bf16
      ? (x, slot) => {
          const floats = this.buf(`round.${slot}`, Math.ceil(x.length / 2));
          const bits = new Uint16Array(floats.buffer, floats.byteOffset, x.length);
          k.toBf16(bits, x, x.length);
          return bits;
        }
      : ROUND_IN_GEMM;
    if (!(Number.isInteger(this.headChunkRows) && this.headChunkRows >= 1)) {
      throw new RangeError(`headChunkRows must be a positive integer, got ${this.headChunkRows}`);
    }
    this.buffers = new StepBuffers(cfg, this.budget, k.adviseHugePages);
    ({
      layers: this.layers,
      embed: this.embed,
      dEmbed: this.dEmbed,
      finalNorm: this.finalNorm,
      dFinalNorm: this.dFinalNorm,
      lmHead: this.lmHead,
    } = trainParams(cfg, params, grads, lora, bf16, bf16 ? (opts.pack ?? null) : null));
    this.invFreq = ropeInvFreq(cfg);
    this.maxRank = lora?.rank ?? 0;
    const first = this.layers[0];
    this.loraTargets = first ? LINEAR_NAMES.filter((name) => first.lin[name].lora).length : 0;
    this.loraGroups = SHARED_INPUT.map((names) => names.filter((name) => first?.lin[name].lora)).filter(
      (group) => group.length > 1,
    );
  }

  /**
   * The owner has cleared every gradient (the optimizer's step, zeroGrad): the next backward's
   * weight-gradient GEMMs then write instead of adding (beta 0: same values, without reading
   * the gradients; 15% faster at the 0.6B shape's dW products, measured on 2 threads).
   */
  gradientsCleared(): void {
    this.gradientsZero = true;
  }

  /** Bytes the cached activation and gradient buffers hold now. */
  get bufferBytes(): number {
    return this.buffers.bytes;
  }

  /**
   * Forward over the batch. `extraIds` [R * K] asks for log-probs of K more ids per completion
   * token (top-k distillation). Keeps the tape for one backward.
   */
  forward(batch: readonly TrainSequence[], extra?: { K: number; ids: Int32Array }): ForwardResult {
    const { cfg, k } = this;
    const D = cfg.hiddenSize,
      V = cfg.vocabSize,
      eps = cfg.rmsNormEps;
    const { seqs, offsets, T, R, tokens, positions, negPositions, targets, rowIndex, longest } = packBatch(batch, cfg);
    const size = this.stepSize({
      tokens: T,
      completionTokens: R,
      loraRank: this.maxRank,
      loraTargets: this.loraTargets,
      loraGroup: this.largestLoraGroup,
      longestSequence: longest,
      checkpoint: false,
    });
    this.buffers.fit(size);
    const ctx: StepContext = {
      T,
      seqs,
      positions,
      checkpoint: size.checkpoint,
      keepAttention: size.checkpoint && (size.keepAttention ?? false),
      scratchSize: attentionScratchSize(longest),
    };

    let x = this.buf('x.0', T * D);
    for (let t = 0; t < T; t++) x.set(this.embed.subarray(tokens[t]! * D, (tokens[t]! + 1) * D), t * D);
    const inputs = [x],
      layers: (LayerTape | null)[] = [];
    for (let l = 0; l < cfg.numLayers; l++) {
      this.pause?.();
      const lt = this.layerTape(l, x, ctx);
      x = this.buf(`x.${l + 1}`, T * D);
      this.layerForward(l, lt, ctx, x);
      inputs.push(x);
      // With checkpointing, the shared buffers still hold the last layer's activations at the backward.
      layers.push(ctx.checkpoint && l < cfg.numLayers - 1 ? null : lt);
    }
    this.pause?.();
    // Final norm and LM head only on the rows that predict completion tokens.
    const xFinal = this.buf('xFinal', R * D);
    for (let i = 0; i < R; i++) xFinal.set(x.subarray(rowIndex[i]! * D, (rowIndex[i]! + 1) * D), i * D);
    const hf = this.buf('hf', R * D);
    k.rmsnorm(hf, xFinal, this.finalNorm, R, D, eps);
    const headRows = Math.min(R, size.headChunkRows ?? R);
    const stats: RowStats = { lse: new Float32Array(R), entropy: new Float32Array(R) };
    const logprobs = new Float32Array(R);
    const extraLogprobs = extra ? new Float32Array(R * extra.K) : undefined;
    let logits: Float32Array | null = null;
    for (let r0 = 0; r0 < R; r0 += headRows) {
      const n = Math.min(headRows, R - r0);
      logits = this.headLogits(hf, r0, n);
      rowStats(k, logits, r0, n, V, stats);
      for (let i = 0; i < n; i++) logprobs[r0 + i] = logits[i * V + targets[r0 + i]!]! - stats.lse[r0 + i]!;
      if (extra && extraLogprobs) {
        const K = extra.K;
        for (let i = r0; i < r0 + n; i++) {
          const row = logits.subarray((i - r0) * V, (i - r0 + 1) * V);
          for (let j = 0; j < K; j++) extraLogprobs[i * K + j] = row[extra.ids[i * K + j]!]! - stats.lse[i]!;
        }
      }
    }
    this.tape = {
      ctx,
      R,
      tokens,
      negPositions,
      targets,
      rowIndex,
      inputs,
      layers,
      xFinal,
      hf,
      stats,
      headRows,
      logits: headRows === R ? logits : null,
      extraK: extra?.K ?? 0,
      ...(extra ? { extraIds: extra.ids } : {}),
    };
    return { logprobs, entropy: stats.entropy, offsets, ...(extraLogprobs ? { extraLogprobs } : {}) };
  }

  /** The step's size with the cheapest layout that fits the budget (LAYOUTS), or the smallest. */
  private stepSize(base: StepSize): StepSize {
    const allowed = LAYOUTS.filter(
      ([checkpoint, keep, chunked]) =>
        (this.forceCheckpoint ?? checkpoint) === checkpoint &&
        (!checkpoint || (this.forceKeepAttention ?? keep) === keep) &&
        (this.forceChunkedHead ?? chunked) === chunked,
    );
    // The fused bf16 attention's buffers are the kernels' own, one set per thread.
    const fused = this.attentionCompute.bf16 && this.k.attentionForwardBf16 ? this.k.threads() : 0;
    const sizes = allowed.map(
      ([checkpoint, keepAttention, chunked]): StepSize => ({
        ...base,
        attentionThreads: fused,
        bf16: this.attentionCompute.bf16,
        checkpoint,
        keepAttention,
        ...(chunked ? { headChunkRows: this.headChunkRows } : {}),
      }),
    );
    return sizes.find((s) => trainStepBytes(this.cfg, s) <= this.budget) ?? sizes.at(-1)!;
  }

  /** Logits of completion rows r0 .. r0 + n - 1 from their final hidden rows, into the shared logits buffer. */
  private headLogits(hf: Float32Array, r0: number, n: number): Float32Array {
    const D = this.cfg.hiddenSize;
    const logits = this.buf('logits', n * this.cfg.vocabSize);
    linearForward(this.gemm, logits, hf.subarray(r0 * D, (r0 + n) * D), n, this.lmHead, null);
    return logits;
  }

  /** Layer l's activation buffers: its own, or with checkpointing one set shared by every layer. */
  private layerTape(l: number, x: Float32Array, ctx: StepContext): LayerTape {
    const { cfg } = this;
    const T = ctx.T,
      D = cfg.hiddenSize,
      F = cfg.intermediateSize,
      H = cfg.numHeads;
    const qDim = H * cfg.headDim,
      kvDim = cfg.numKvHeads * cfg.headDim;
    const w = this.layers[l]!;
    const key = (name: string) => `${name}.${ctx.checkpoint ? 'shared' : l}`;
    const b = (name: string, size: number) => this.buf(key(name), size);
    const input = (name: string, size: number) => this.gemmInputBuf(key(name), size);
    const kept = (name: string) => (ctx.keepAttention ? `${name}.${l}` : key(name));
    const u: LayerTape['u'] = {};
    for (const group of this.loraGroups) {
      const ld = group.length * this.maxRank,
        data = b(`u.${group.join('+')}`, T * ld);
      group.forEach((name, i) => (u[name] = { data, ld, col: i * this.maxRank }));
    }
    for (const name of LINEAR_NAMES) {
      const lora = w.lin[name].lora;
      if (lora && !u[name]) u[name] = { data: b(`u.${name}`, T * lora.rank), ld: lora.rank, col: 0 };
    }
    const qkNorm = w.qNorm && w.kNorm;
    return {
      x,
      h1: input('h1', T * D),
      q0: qkNorm ? b('q0', T * qDim) : null,
      k0: qkNorm ? b('k0', T * kvDim) : null,
      q: b('q', T * qDim),
      k: b('k', T * kvDim),
      v: b('v', T * kvDim),
      lse: this.buf(kept('lse'), T * H),
      // Read only rounded (the o projection's GEMMs, the backward's dO . O): at bf16, its bits.
      att: this.gemmInputBuf(kept('att'), T * qDim),
      xMid: b('xMid', T * D),
      h2: input('h2', T * D),
      gate: b('gate', T * F),
      up: b('up', T * F),
      act: input('act', T * F),
      u,
    };
  }

  /**
   * Layer l's forward from lt.x into lt's buffers and, when `out` is given, its output into
   * `out`. Without `out` (a recomputation, the output already kept), the down projection's
   * product is skipped; only its LoRA input x A^T is computed again; so is the attention where
   * ctx.keepAttention kept its output and lse.
   */
  private layerForward(l: number, lt: LayerTape, ctx: StepContext, out: Float32Array | null): void {
    const { cfg, k, gemm } = this;
    const T = ctx.T,
      H = cfg.numHeads,
      KV = cfg.numKvHeads,
      hd = cfg.headDim,
      eps = cfg.rmsNormEps;
    const w = this.layers[l]!;
    const lin = (name: LinearName, y: Float32Array, input: Operand, beta: 0 | 1 = 0) =>
      linearForward(gemm, y, input, T, w.lin[name], lt.u[name] ?? null, beta);
    // Projections of one input, written: a LoRA group's stacked, the rest one by one.
    const project = (names: readonly LinearName[], ys: readonly Float32Array[], input: Operand) => {
      const group = this.loraGroupOf(names);
      names.forEach((name, i) => group?.includes(name) || lin(name, ys[i]!, input));
      if (group) {
        const Ls = group.map((name) => w.lin[name]);
        const outputs = group.map((name) => ys[names.indexOf(name)]!);
        linearGroupForward(gemm, outputs, input, T, Ls, lt.u[group[0]!]!.data, this.stackedLoraA(Ls));
      }
    };
    // Each input is rounded once for all its products (q, k, v share h1; gate and up share h2), by
    // the kernel that makes it (h1, h2, act, the attention's output).
    k.rmsnorm(lt.h1, lt.x, w.norm1, T, cfg.hiddenSize, eps);
    // With q and k norms, the projections go into q0 and k0 (kept for the norms' backward) and the
    // norms write q and k from them.
    const qk = w.qNorm && w.kNorm && lt.q0 && lt.k0 ? { qNorm: w.qNorm, kNorm: w.kNorm, q0: lt.q0, k0: lt.k0 } : null;
    project(['q', 'k', 'v'], [qk?.q0 ?? lt.q, qk?.k0 ?? lt.k, lt.v], lt.h1);
    if (qk) {
      k.rmsnorm(lt.q, qk.q0, qk.qNorm, T * H, hd, eps);
      k.rmsnorm(lt.k, qk.k0, qk.kNorm, T * KV, hd, eps);
    }
    k.rope(lt.q, T, H, hd, ctx.positions, this.invFreq);
    k.rope(lt.k, T, KV, hd, ctx.positions, this.invFreq);
    if (out || !ctx.keepAttention) {
      const shape = { nHeads: H, nKvHeads: KV, headDim: hd };
      const scratch = this.buf('att.scratch', ctx.scratchSize);
      attentionForward(k, this.attentionCompute, lt.att, lt.lse, lt.q, lt.k, lt.v, ctx.seqs, shape, scratch);
    }
    // The residual connections: the block's input copied in, the projection added onto it.
    lt.xMid.set(lt.x);
    lin('o', lt.xMid, lt.att, 1);
    k.rmsnorm(lt.h2, lt.xMid, w.norm2, T, cfg.hiddenSize, eps);
    project(['gate', 'up'], [lt.gate, lt.up], lt.h2);
    k.siluMul(lt.act, lt.gate, lt.up, T * cfg.intermediateSize);
    if (out) {
      out.set(lt.xMid);
      lin('down', out, lt.act, 1);
    } else if (lt.u.down) {
      loraInput(gemm, lt.u.down, lt.act, T, w.lin.down);
    }
  }

  /** A buffer of `size` floats that lives until the next forward; contents undefined. */
  private buf(key: string, size: number): Float32Array {
    return this.buffers.get(key, size);
  }

  /** The adapted members of `names` whose LoRA products run stacked, or null. */
  private loraGroupOf(names: readonly LinearName[]): readonly LinearName[] | null {
    return this.loraGroups.find((group) => group.every((name) => names.includes(name))) ?? null;
  }

  /** Projections in the largest LoRA group (SHARED_INPUT): it sizes the stacked buffers (memory.ts). */
  private get largestLoraGroup(): number {
    return Math.max(1, ...this.loraGroups.map((group) => group.length));
  }

  /**
   * The A factors of Ls' adapters one under another [G r, in], as the GEMMs read them: at bf16
   * rounded, once for the forward's product and once for the backward's two. A changes only at the
   * optimizer's step, between a backward and the next forward, but a recomputation or the other group
   * may have written the buffer since, so it is filled for each use.
   */
  private stackedLoraA(Ls: readonly TrainLinear[]): Operand {
    const values = Ls[0]!.lora!.A.length,
      size = this.largestLoraGroup * values;
    const stacked = this.gemmInputBuf('lora.A', size).subarray(0, Ls.length * values);
    Ls.forEach(({ lora }, i) => {
      const to = stacked.subarray(i * values, (i + 1) * values);
      if (to instanceof Uint16Array) this.k.toBf16(to, lora!.A, values);
      else to.set(lora!.A);
    });
    return stacked;
  }

  /**
   * A buffer of `size` values that only GEMMs read: at bf16 their bf16 bits (two to a float of the
   * cached buffer; the kernels that fill it round as they write), at fp32 floats.
   */
  private gemmInputBuf(key: string, size: number): Operand {
    if (!this.attentionCompute.bf16) return this.buf(key, size);
    const floats = this.buf(key, Math.ceil(size / 2));
    return new Uint16Array(floats.buffer, floats.byteOffset, size);
  }

  /** Accumulates parameter gradients (+=) for d loss / d (logprobs, entropy, extra log-probs). */
  backward(dLogprobs: Float32Array, dEntropy: Float32Array, dExtra?: Float32Array): void {
    const tape = this.tape;
    if (!tape) throw new Error('backward() needs a forward() first (each forward allows one backward)');
    this.tape = null;
    const { cfg, k, gemm } = this;
    const D = cfg.hiddenSize,
      F = cfg.intermediateSize,
      hd = cfg.headDim,
      V = cfg.vocabSize;
    const H = cfg.numHeads,
      KV = cfg.numKvHeads,
      qDim = H * hd,
      kvDim = KV * hd,
      eps = cfg.rmsNormEps;
    const { ctx, R } = tape,
      T = ctx.T;
    // Each weight gradient is written once per backward (the tied embedding's by the head first,
    // its rows added at the end), so with cleared gradients those first writes need not add.
    const dwBeta: 0 | 1 = this.gradientsZero ? 0 : 1;
    this.gradientsZero = false;
    const grads: LogitGrads = { dTarget: dLogprobs, dEntropy };
    if (dExtra && tape.extraIds) grads.extra = { K: tape.extraK, ids: tape.extraIds, dLogprob: dExtra };
    const scratch = this.buf('d.scratch', T * Math.max(1, this.maxRank * this.largestLoraGroup));

    const dhf = this.buf('d.hf', R * D);
    for (let r0 = 0; r0 < R; r0 += tape.headRows) {
      const n = Math.min(tape.headRows, R - r0);
      const logits = tape.logits ?? this.headLogits(tape.hf, r0, n);
      logitsBackward(k, logits, r0, n, V, tape.targets, tape.stats, grads);
      const rows = (a: Float32Array) => a.subarray(r0 * D, (r0 + n) * D);
      // The vocab-wide dlogits are rounded into the step's 'dy' slot, kept from step to step: left
      // to gemmBf16, they went into its per-call scratch, which it frees above 64 MB, so every step
      // paid their page faults again (78 MB at the 0.6B shape, 3-4% of a LoRA step).
      const dy = this.lmHead.dBias ? logits : this.round(logits, 'dy');
      // With chunks, the head's weight gradient (full fine-tuning) is summed chunk by chunk.
      linearBackward(
        gemm,
        rows(dhf),
        dy,
        rows(tape.hf),
        null,
        n,
        this.lmHead,
        0,
        scratch,
        ROUND_IN_GEMM,
        r0 ? 1 : dwBeta,
      );
    }
    const dxRows = this.buf('d.xRows', R * D);
    k.rmsnormBackward(dxRows, this.dFinalNorm, dhf, tape.xFinal, this.finalNorm, R, D, eps, false);
    const dx = this.buf('d.x', T * D).fill(0);
    for (let i = 0; i < R; i++) {
      const o = tape.rowIndex[i]! * D;
      for (let j = 0; j < D; j++) dx[o + j] = dx[o + j]! + dxRows[i * D + j]!;
    }

    const shape = { nHeads: H, nKvHeads: KV, headDim: hd };
    // Every one of these is fully overwritten before it is read (GEMMs with beta 0, kernels
    // that write their output), except dx, zeroed above, and dk/dv, zeroed by the attention.
    // The gate's and up's output gradients are GEMM inputs only (no MLP has a bias).
    const dAct = this.buf('d.act', T * F),
      dGate = this.gemmInputBuf('d.gate', T * F),
      dUp = this.gemmInputBuf('d.up', T * F);
    const dh = this.buf('d.h', T * D),
      dAtt = this.buf('d.att', T * qDim);
    const dq = this.buf('d.q', T * qDim),
      dk = this.buf('d.k', T * kvDim),
      dv = this.buf('d.v', T * kvDim);
    for (let l = cfg.numLayers - 1; l >= 0; l--) {
      this.pause?.();
      const w = this.layers[l]!,
        lt = tape.layers[l] ?? this.recompute(l, tape);
      const lin = w.lin;
      // The layer inputs (act, h2, att, h1) go into the weight gradients' products as kept: at
      // bf16 their bits.
      const back = (dxOut: Float32Array | null, dy: Operand, x: Operand, name: LinearName, beta: 0 | 1) =>
        linearBackward(gemm, dxOut, dy, x, lt.u[name] ?? null, T, lin[name], beta, scratch, this.round, dwBeta);
      // The backward of `project`: dx written by the first product, the rest added.
      const projectBack = (
        dxOut: Float32Array | null,
        names: readonly LinearName[],
        dys: readonly Operand[],
        x: Operand,
      ) => {
        const group = this.loraGroupOf(names);
        if (group) {
          const Ls = group.map((name) => lin[name]);
          const stacked = this.stackedLoraA(Ls);
          const dStacked = this.buf('lora.dA', this.largestLoraGroup * Ls[0]!.lora!.A.length);
          const groupDys = group.map((name) => dys[names.indexOf(name)]!);
          const u = lt.u[group[0]!]!.data;
          linearGroupBackward(gemm, dxOut, groupDys, x, u, T, Ls, 0, scratch, stacked, dStacked, this.round, dwBeta);
        }
        let beta: 0 | 1 = group ? 1 : 0;
        names.forEach((name, i) => {
          if (group?.includes(name)) return;
          back(dxOut, dys[i]!, x, name, beta);
          beta = 1;
        });
      };
      // MLP: dx is d loss / d (layer output) = d / d xMid through the residual, plus the MLP path.
      back(dAct, dx, lt.act, 'down', 0);
      k.siluMulBackward(dGate, dUp, dAct, lt.gate, lt.up, T * F);
      projectBack(dh, ['gate', 'up'], [dGate, dUp], lt.h2);
      k.rmsnormBackward(dx, w.dNorm2, dh, lt.xMid, w.norm2, T, D, eps, true);
      // Attention: dx is now d loss / d xMid.
      back(dAtt, dx, lt.att, 'o', 0);
      const attScratch = this.buf('att.scratch', ctx.scratchSize);
      const att = this.attentionCompute;
      attentionBackward(k, att, dq, dk, dv, dAtt, lt.att, lt.lse, lt.q, lt.k, lt.v, ctx.seqs, shape, attScratch);
      k.rope(dq, T, H, hd, tape.negPositions, this.invFreq);
      k.rope(dk, T, KV, hd, tape.negPositions, this.invFreq);
      let dqIn = dq,
        dkIn = dk;
      if (w.qNorm && w.kNorm && lt.q0 && lt.k0) {
        const dq0 = this.buf('d.q0', T * qDim),
          dk0 = this.buf('d.k0', T * kvDim);
        k.rmsnormBackward(dq0, w.dQNorm, dq, lt.q0, w.qNorm, T * H, hd, eps, false);
        k.rmsnormBackward(dk0, w.dKNorm, dk, lt.k0, w.kNorm, T * KV, hd, eps, false);
        dqIn = dq0;
        dkIn = dk0;
      }
      // Below layer 0's q/k/v inputs only the embedding is left: with it frozen (LoRA) and no
      // norm weight to train, nothing needs d loss / d h1 there, so those GEMMs are skipped.
      const dh1 = l > 0 || this.dEmbed || w.dNorm1 ? dh : null;
      projectBack(dh1, ['q', 'k', 'v'], [dqIn, dkIn, dv], lt.h1);
      if (dh1) k.rmsnormBackward(dx, w.dNorm1, dh1, lt.x, w.norm1, T, D, eps, true);
    }
    if (this.dEmbed) {
      for (let t = 0; t < T; t++) {
        const o = tape.tokens[t]! * D;
        for (let j = 0; j < D; j++) this.dEmbed[o + j] = this.dEmbed[o + j]! + dx[t * D + j]!;
      }
    }
  }

  /** Layer l's activations again, from its kept input, into the shared buffers (checkpointing). */
  private recompute(l: number, tape: Tape): LayerTape {
    const lt = this.layerTape(l, tape.inputs[l]!, tape.ctx);
    this.layerForward(l, lt, tape.ctx, null);
    return lt;
  }
}
