// One policy version loaded into llama.cpp: a context (the base model, with the version's LoRA
// adapter when it has one, or a model of its own for a full version) and its pool of sequences,
// one per concurrent request. Requests hold it while they run; a version retired by a newer one
// is disposed when its last request ends, so in-flight requests finish on their weights; a model
// is disposed when no version runs on it any more.

import type { LlamaContext, LlamaContextSequence, LlamaModel } from './node-llama-cpp.js';

/** A loaded model and the versions served from it: disposed when the last one lets go. */
export class ModelRef {
  private holders = 0;

  constructor(readonly model: LlamaModel) {}

  hold(): this {
    this.holders++;
    return this;
  }

  async release(): Promise<void> {
    if (--this.holders === 0) await this.model.dispose();
  }
}

export class ServedVersion {
  private readonly idle: LlamaContextSequence[] = [];
  private readonly waiting: ((seq: LlamaContextSequence) => void)[] = [];
  private holders = 0;
  private retired = false;
  private disposed: Promise<void> | null = null;

  constructor(
    readonly version: number,
    private readonly context: LlamaContext,
    /** The model the context runs on (shared by the base and its LoRA versions, or a full version's own). */
    private readonly model: ModelRef,
  ) {
    model.hold();
  }

  /** Requests holding this version now. */
  get active(): number {
    return this.holders;
  }

  /** A sequence with an empty history, waiting for one when all are in use. */
  async acquire(): Promise<LlamaContextSequence> {
    if (this.disposed) throw new Error(`policy version ${this.version} is no longer loaded`);
    this.holders++;
    try {
      let seq = this.idle.pop();
      if (!seq && this.context.sequencesLeft > 0) seq = this.context.getSequence();
      seq ??= await new Promise<LlamaContextSequence>((resolve) => this.waiting.push(resolve));
      await seq.clearHistory();
      return seq;
    } catch (e) {
      this.holders--;
      throw e;
    }
  }

  release(seq: LlamaContextSequence): void {
    this.holders--;
    const next = this.waiting.shift();
    if (next) {
      // The waiter counted itself when it asked.
      next(seq);
      return;
    }
    this.idle.push(seq);
    if (this.retired && this.holders === 0) void this.dispose();
  }

  /** No new requests come: disposed now if idle, else when the last one ends. */
  retire(): void {
    this.retired = true;
    if (this.holders === 0) void this.dispose();
  }

  dispose(): Promise<void> {
    this.disposed ??= (async () => {
      await this.context.dispose();
      await this.model.release();
    })();
    return this.disposed;
  }
}
