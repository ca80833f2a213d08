// A training batch packed into one token sequence: where each sequence starts, every token's id
// and position, and the completion rows (the positions whose next token is a completion token,
// with that token as the target), checked against the model's vocabulary and context.

import type { ModelConfig } from '../model/config.js';
import type { PackedSequence } from './attention.js';

export interface TrainSequence {
  /** Prompt followed by completion. */
  tokens: ArrayLike<number>;
  promptLength: number;
}

export interface PackedBatch {
  seqs: PackedSequence[];
  /** Where each sequence's completion rows start in the [R] arrays. */
  offsets: number[];
  /** Packed tokens. */
  T: number;
  /** Completion rows. */
  R: number;
  tokens: Int32Array;
  positions: Int32Array;
  /** Minus each position: the RoPE rotation the backward applies. */
  negPositions: Int32Array;
  /** The token each completion row predicts [R]. */
  targets: Int32Array;
  /** The packed position of each completion row [R]. */
  rowIndex: Int32Array;
  longest: number;
}

export function packBatch(batch: readonly TrainSequence[], cfg: ModelConfig): PackedBatch {
  const V = cfg.vocabSize;
  const seqs: PackedSequence[] = [];
  const offsets: number[] = [];
  let T = 0,
    R = 0;
  for (const s of batch) {
    const n = s.tokens.length;
    if (!(s.promptLength >= 1 && s.promptLength < n))
      throw new RangeError(`a training sequence needs 1 <= promptLength < length, got ${s.promptLength} of ${n}`);
    if (n > cfg.maxPositionEmbeddings)
      throw new RangeError(`sequence of ${n} tokens exceeds the model's context of ${cfg.maxPositionEmbeddings}`);
    seqs.push({ start: T, length: n });
    offsets.push(R);
    T += n;
    R += n - s.promptLength;
  }
  const tokens = new Int32Array(T),
    positions = new Int32Array(T),
    negPositions = new Int32Array(T);
  const targets = new Int32Array(R),
    rowIndex = new Int32Array(R);
  let r = 0;
  batch.forEach((s, i) => {
    const start = seqs[i]!.start;
    for (let t = 0; t < s.tokens.length; t++) {
      const id = s.tokens[t]!;
      if (!(Number.isInteger(id) && id >= 0 && id < V))
        throw new RangeError(`token id ${id} is outside the vocabulary of ${V}`);
      tokens[start + t] = id;
      positions[start + t] = t;
      negPositions[start + t] = -t;
    }
    for (let t = s.promptLength - 1; t < s.tokens.length - 1; t++, r++) {
      rowIndex[r] = start + t;
      targets[r] = s.tokens[t + 1]!;
    }
  });
  const longest = Math.max(...seqs.map((s) => s.length));
  return { seqs, offsets, T, R, tokens, positions, negPositions, targets, rowIndex, longest };
}
