// Frozen bf16 weights (a LoRA run's base, and the reference model's) copied once into oneDNN's own
// blocked layout, in both directions the trainer reads them: x W^T (forward) and dy W (the input
// gradient). A matmul on plain weights copies them into that layout on every call; at the 0.6B
// model's 512-row products that copy cost 10-20% of the product (1.03-1.28x with packed weights,
// bit-identical outputs: docs/cpu-performance.md). Each packed direction takes as many bytes as the
// bf16 copy, so this is a memory-for-speed trade that the memory plan decides (memory-plan.ts).

import type { Kernels } from '../kernels/kernels.js';

/** gemmBf16Packed of the kernels that packed the weights. */
export type PackedGemm = NonNullable<Kernels['gemmBf16Packed']>;

/** A weight W [out, in] packed for x W^T (forward: K = in, N = out) and for dy W (backward: K = out, N = in). */
export interface PackedWeight {
  forward: Uint16Array | null;
  backward: Uint16Array | null;
  gemm: PackedGemm;
}

/** The directions a model reads a frozen weight in: a forward-only model never needs `backward`. */
export type PackDirections = 'forward' | 'both';

/**
 * Packed copies shared by every model over the same bf16 copy (the learner's policy and its
 * reference read one base), keyed by the bf16 array itself.
 */
export class PackedWeights {
  private readonly packed = new Map<Uint16Array, PackedWeight>();
  private bytesHeld = 0;

  private constructor(
    private readonly pack: NonNullable<Kernels['packBf16']>,
    private readonly gemm: PackedGemm,
  ) {}

  /** null where the kernels cannot pack (portable kernels, or a native build without oneDNN). */
  static of(k: Kernels): PackedWeights | null {
    return k.packBf16 && k.gemmBf16Packed ? new PackedWeights(k.packBf16, k.gemmBf16Packed) : null;
  }

  /** W16 [outDim, inDim] packed in `directions` (made on first request, then shared); null if oneDNN keeps it plain. */
  get(W16: Uint16Array, outDim: number, inDim: number, directions: PackDirections): PackedWeight | null {
    let p = this.packed.get(W16);
    if (!p) {
      p = { forward: null, backward: null, gemm: this.gemm };
      this.packed.set(W16, p);
    }
    if (!p.forward) p.forward = this.add(this.pack(true, outDim, inDim, W16, inDim));
    if (directions === 'both' && !p.backward) p.backward = this.add(this.pack(false, inDim, outDim, W16, inDim));
    return p.forward || p.backward ? p : null;
  }

  /** Bytes of every packed copy made so far. */
  get bytes(): number {
    return this.bytesHeld;
  }

  private add(a: Uint16Array | null): Uint16Array | null {
    if (a) this.bytesHeld += a.byteLength;
    return a;
  }
}
