// A training step's activation and gradient buffers, kept from one step to the next: allocating
// gigabytes a step would cost page faults and garbage collection. Buffers only grow, each to the
// largest size asked for since the cache was emptied, within the activation budget.

import type { ModelConfig } from '../model/config.js';
import { type StepSize, trainStepBytes } from './memory.js';

export class StepBuffers {
  private readonly buffers = new Map<string, Float32Array>();
  /** The largest step size the cached buffers were grown for since the cache was last emptied. */
  private held: StepSize | null = null;

  constructor(
    private readonly cfg: ModelConfig,
    /** Bytes the buffers may take (trainStepBytes); Infinity for no limit. */
    private readonly budget: number,
  ) {}

  /** Bytes the cached buffers hold now. */
  get bytes(): number {
    let bytes = 0;
    for (const b of this.buffers.values()) bytes += b.byteLength;
    return bytes;
  }

  /** A buffer of `size` floats that lives until the next step; contents undefined. */
  get(key: string, size: number): Float32Array {
    let b = this.buffers.get(key);
    if (!b || b.length < size) {
      b = new Float32Array(size);
      this.buffers.set(key, b);
    }
    return b.subarray(0, size);
  }

  /**
   * Prepares for a step of `size`. The cache is emptied when the layout changes (per-layer buffers
   * vs one shared set, every row's logits vs one chunk's: never both kept) or when keeping what it
   * holds through this step would take more than the budget (or than this step alone, where the
   * step itself exceeds the budget).
   */
  fit(size: StepSize): void {
    const held = this.held;
    if (held && held.checkpoint === size.checkpoint && held.headChunkRows === size.headChunkRows) {
      const union: StepSize = {
        ...size,
        tokens: Math.max(held.tokens, size.tokens),
        completionTokens: Math.max(held.completionTokens, size.completionTokens),
        longestSequence: Math.max(held.longestSequence!, size.longestSequence!),
      };
      if (trainStepBytes(this.cfg, union) <= Math.max(this.budget, trainStepBytes(this.cfg, size))) {
        this.held = union;
        return;
      }
    }
    this.buffers.clear();
    this.held = size;
  }
}
