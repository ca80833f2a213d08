// A training step's activation and gradient buffers, kept from one step to the next: allocating
// gigabytes a step would cost page faults and garbage collection. Buffers only grow, each to the
// largest size asked for since the cache was emptied, within the activation budget.
//
// A buffer that has to grow (a step longer than any since the cache was emptied) grows GROWTH times
// what it is asked for, where the budget has room: in `serve` a session's samples get longer turn by
// turn, and a step a few tokens longer than the last reallocated every buffer (at 400 tokens of the
// 0.6B model, 2.5-4.1 s against 1.7-1.9 s for a step that reused them: page faults, and V8's full
// collections for the freed arrays).

import type { ModelConfig } from '../model/config.js';
import { type StepSize, trainStepBytes } from './memory.js';

/** How much more than asked a buffer that has to grow takes, where the budget has room. */
const GROWTH = 1.25;
/** Buffers from this size on are backed by huge pages where the kernels can ask for them. */
const HUGE_PAGES_FROM_BYTES = 4 * 2 ** 20;

export class StepBuffers {
  private readonly buffers = new Map<string, Float32Array>();
  /** The largest step size the cached buffers were grown for since the cache was last emptied. */
  private held: StepSize | null = null;
  /** Whether buffers that grow in this step take GROWTH (fit decides). */
  private headroom = false;
  /** Whether a buffer took GROWTH since the cache was last emptied. */
  private grown = false;

  constructor(
    private readonly cfg: ModelConfig,
    /** Bytes the buffers may take (trainStepBytes); Infinity for no limit. */
    private readonly budget: number,
    /** Asks for huge pages behind a new buffer before its first write (Kernels.adviseHugePages). */
    private readonly adviseHugePages?: (x: Float32Array) => boolean,
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
      // A buffer's first size is exact; one that grows takes GROWTH where fit allowed it.
      const length = b && this.headroom ? Math.ceil(size * GROWTH) : size;
      this.grown ||= length > size;
      b = new Float32Array(length);
      if (b.byteLength >= HUGE_PAGES_FROM_BYTES) this.adviseHugePages?.(b);
      this.buffers.set(key, b);
    }
    return b.subarray(0, size);
  }

  /**
   * Prepares for a step of `size`. The cache is emptied when the layout changes (per-layer buffers
   * vs one shared set, attention kept or not, every row's logits vs one chunk's: never both kept) or when keeping what it
   * holds through this step would take more than the budget (or than this step alone, where the
   * step itself exceeds the budget).
   */
  fit(size: StepSize): void {
    const held = this.held;
    const sameLayout =
      held &&
      held.checkpoint === size.checkpoint &&
      (held.keepAttention ?? false) === (size.keepAttention ?? false) &&
      held.headChunkRows === size.headChunkRows;
    if (held && sameLayout) {
      const union: StepSize = {
        ...size,
        tokens: Math.max(held.tokens, size.tokens),
        completionTokens: Math.max(held.completionTokens, size.completionTokens),
        longestSequence: Math.max(held.longestSequence!, size.longestSequence!),
      };
      const bytes = trainStepBytes(this.cfg, union);
      // Each buffer's size at `union` only grows with the union, so no buffer holds more than GROWTH
      // times it, and GROWTH x bytes bounds the cache through this step.
      this.headroom = GROWTH * bytes <= this.budget;
      if (this.headroom || (!this.grown && bytes <= Math.max(this.budget, trainStepBytes(this.cfg, size)))) {
        this.held = union;
        return;
      }
    }
    this.buffers.clear();
    this.held = size;
    this.headroom = false;
    this.grown = false;
  }
}
