// The decoder's parameters as the training pass reads them: per layer its norms and seven
// projections (each with its weight, bf16 copy, gradient and LoRA pair), the embedding, the final
// norm and the LM head (tied to the embedding or not), bound by their Hugging Face names.

import type { ModelConfig } from '../model/config.js';
import type { ParamStore } from '../model/weights.js';
import type { Bf16Params } from '../precision.js';
import type { TrainLinear } from './linear.js';
import { type Lora, linearDims, PEFT_MODULE } from './lora.js';
import type { PackDirections, PackedWeights } from './packed-weights.js';

export const LINEAR_NAMES = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LinearName = (typeof LINEAR_NAMES)[number];

export interface LayerParams {
  norm1: Float32Array;
  norm2: Float32Array;
  qNorm: Float32Array | null;
  kNorm: Float32Array | null;
  dNorm1: Float32Array | null;
  dNorm2: Float32Array | null;
  dQNorm: Float32Array | null;
  dKNorm: Float32Array | null;
  lin: Record<LinearName, TrainLinear>;
}

export interface TrainParams {
  layers: LayerParams[];
  embed: Float32Array;
  dEmbed: Float32Array | null;
  finalNorm: Float32Array;
  dFinalNorm: Float32Array | null;
  lmHead: TrainLinear;
}

/** Frozen weights to pack, and in which directions (packed-weights.ts). */
export interface PackRequest {
  weights: PackedWeights;
  directions: PackDirections;
}

/**
 * grads: shaped like params for full fine-tuning; null with LoRA (base frozen). bf16: the weights'
 * bf16 copies. pack: where the frozen weights' bf16 copies are also packed (bf16 only).
 */
export function trainParams(
  cfg: ModelConfig,
  params: ParamStore,
  grads: ParamStore | null,
  lora: Lora | null,
  bf16: Bf16Params | null,
  pack: PackRequest | null = null,
): TrainParams {
  const w16 = (name: string) => bf16?.get(name) ?? null;
  // A weight that trains changes every step; only frozen ones are worth a packed copy.
  const packed = (name: string, outDim: number, inDim: number) => {
    const W16 = w16(name);
    return W16 && pack && !grads ? pack.weights.get(W16, outDim, inDim, pack.directions) : null;
  };
  const g = (name: string) => (grads ? grads.get(name) : null);
  const opt = (store: ParamStore | null, name: string) => (store?.has(name) ? store.get(name) : null);
  const layers = Array.from({ length: cfg.numLayers }, (_, l): LayerParams => {
    const p = `model.layers.${l}.`;
    const lin = {} as Record<LinearName, TrainLinear>;
    for (const name of LINEAR_NAMES) {
      const base = `${p}${PEFT_MODULE[name]}`;
      const [inDim, outDim] = linearDims(cfg, name);
      lin[name] = {
        inDim,
        outDim,
        W: params.get(`${base}.weight`),
        W16: w16(`${base}.weight`),
        packed: packed(`${base}.weight`, outDim, inDim),
        bias: opt(params, `${base}.bias`),
        dW: g(`${base}.weight`),
        dBias: opt(grads, `${base}.bias`),
        lora: lora?.pair(l, name) ?? null,
      };
    }
    return {
      norm1: params.get(`${p}input_layernorm.weight`),
      norm2: params.get(`${p}post_attention_layernorm.weight`),
      qNorm: opt(params, `${p}self_attn.q_norm.weight`),
      kNorm: opt(params, `${p}self_attn.k_norm.weight`),
      dNorm1: g(`${p}input_layernorm.weight`),
      dNorm2: g(`${p}post_attention_layernorm.weight`),
      dQNorm: opt(grads, `${p}self_attn.q_norm.weight`),
      dKNorm: opt(grads, `${p}self_attn.k_norm.weight`),
      lin,
    };
  });
  const embed = params.get('model.embed_tokens.weight');
  const dEmbed = g('model.embed_tokens.weight');
  const tied = cfg.tieWordEmbeddings;
  return {
    layers,
    embed,
    dEmbed,
    finalNorm: params.get('model.norm.weight'),
    dFinalNorm: g('model.norm.weight'),
    lmHead: {
      inDim: cfg.hiddenSize,
      outDim: cfg.vocabSize,
      W: tied ? embed : params.get('lm_head.weight'),
      W16: w16(tied ? 'model.embed_tokens.weight' : 'lm_head.weight'),
      packed: packed(tied ? 'model.embed_tokens.weight' : 'lm_head.weight', cfg.vocabSize, cfg.hiddenSize),
      bias: null,
      dW: tied ? dEmbed : g('lm_head.weight'),
      dBias: null,
      lora: null,
    },
  };
}
