// LoRA adapters in the PEFT layout: for each targeted projection of each layer, A [r, in] and
// B [out, r], scale alpha / r. All adapter values live in one buffer (and the gradients in
// another of the same shape), so the optimizer runs as one loop and saving is one file.

import type { ModelConfig } from '../model/config.js';
import { createRng } from '../sampling/random.js';
import type { LinearName } from './model-params.js';
import type { LoraPair } from './linear.js';

export const LORA_TARGETS: readonly LinearName[] = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'];
export const PEFT_MODULE: Record<LinearName, string> = {
  q: 'self_attn.q_proj',
  k: 'self_attn.k_proj',
  v: 'self_attn.v_proj',
  o: 'self_attn.o_proj',
  gate: 'mlp.gate_proj',
  up: 'mlp.up_proj',
  down: 'mlp.down_proj',
};

export interface LoraSpec {
  rank: number;
  alpha: number;
  targets: LinearName[];
}

export interface LoraTensor {
  /** PEFT name, e.g. base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight */
  name: string;
  shape: [number, number];
  offset: number;
  layer: number;
  target: LinearName;
  part: 'A' | 'B';
}

export function linearDims(cfg: ModelConfig, name: LinearName): [inDim: number, outDim: number] {
  const D = cfg.hiddenSize,
    F = cfg.intermediateSize,
    qDim = cfg.numHeads * cfg.headDim,
    kvDim = cfg.numKvHeads * cfg.headDim;
  const dims: Record<LinearName, [number, number]> = {
    q: [D, qDim],
    k: [D, kvDim],
    v: [D, kvDim],
    o: [qDim, D],
    gate: [D, F],
    up: [D, F],
    down: [F, D],
  };
  return dims[name];
}

/** Values (A and B) of an adapter of this rank on these targets of every layer: the size of Lora.data. */
export function loraValueCount(cfg: ModelConfig, rank: number, targets: readonly LinearName[] = LORA_TARGETS): number {
  const perLayer = targets.reduce((sum, t) => sum + rank * linearDims(cfg, t).reduce((a, b) => a + b), 0);
  return cfg.numLayers * perLayer;
}

export class Lora {
  readonly tensors: LoraTensor[];
  readonly data: Float32Array;
  readonly scale: number;
  private gradBuffer: Float32Array | null = null;

  constructor(
    readonly cfg: ModelConfig,
    readonly spec: LoraSpec,
    data?: Float32Array,
  ) {
    if (!(Number.isInteger(spec.rank) && spec.rank > 0))
      throw new RangeError(`LoRA rank must be a positive integer, got ${spec.rank}`);
    if (spec.targets.length === 0) throw new RangeError('LoRA needs at least one target module');
    this.scale = spec.alpha / spec.rank;
    const tensors: LoraTensor[] = [];
    let offset = 0;
    for (let l = 0; l < cfg.numLayers; l++) {
      for (const target of LORA_TARGETS.filter((t) => spec.targets.includes(t))) {
        const [inDim, outDim] = linearDims(cfg, target);
        const prefix = `base_model.model.model.layers.${l}.${PEFT_MODULE[target]}`;
        tensors.push({
          name: `${prefix}.lora_A.weight`,
          shape: [spec.rank, inDim],
          offset,
          layer: l,
          target,
          part: 'A',
        });
        offset += spec.rank * inDim;
        tensors.push({
          name: `${prefix}.lora_B.weight`,
          shape: [outDim, spec.rank],
          offset,
          layer: l,
          target,
          part: 'B',
        });
        offset += outDim * spec.rank;
      }
    }
    this.tensors = tensors;
    if (data && data.length !== offset)
      throw new RangeError(`LoRA data holds ${data.length} values, the adapter needs ${offset}`);
    this.data = data ?? new Float32Array(offset);
  }

  /** Gradient buffer, allocated on first use (an adapter that only serves never needs one). */
  get grads(): Float32Array {
    this.gradBuffer ??= new Float32Array(this.data.length);
    return this.gradBuffer;
  }

  get rank(): number {
    return this.spec.rank;
  }

  /** PEFT's default initialisation: A ~ U(-1/sqrt(in), 1/sqrt(in)) (Kaiming-uniform, a = sqrt(5)), B = 0. */
  initialise(seed: number): void {
    const rng = createRng(seed);
    for (const t of this.tensors) {
      const view = this.view(t);
      if (t.part === 'B') view.fill(0);
      else {
        const bound = 1 / Math.sqrt(t.shape[1]);
        for (let i = 0; i < view.length; i++) view[i] = (rng.next() * 2 - 1) * bound;
      }
    }
  }

  view(t: LoraTensor, of: Float32Array = this.data): Float32Array {
    return of.subarray(t.offset, t.offset + t.shape[0] * t.shape[1]);
  }

  /** The adapter pair of one projection with its gradients, or null when it is not targeted. */
  pair(layer: number, target: LinearName): LoraPair | null {
    const w = this.weights(layer, target);
    if (!w) return null;
    return { ...w, dA: this.view(w.a, this.grads), dB: this.view(w.b, this.grads) };
  }

  /** The adapter weights of one projection (no gradients), or null when it is not targeted. */
  weights(
    layer: number,
    target: LinearName,
  ): { A: Float32Array; B: Float32Array; rank: number; scale: number; a: LoraTensor; b: LoraTensor } | null {
    const a = this.tensors.find((t) => t.layer === layer && t.target === target && t.part === 'A');
    const b = this.tensors.find((t) => t.layer === layer && t.target === target && t.part === 'B');
    if (!a || !b) return null;
    return { A: this.view(a), B: this.view(b), rank: this.spec.rank, scale: this.scale, a, b };
  }
}
