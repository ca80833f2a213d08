// Turning one row of logits into a sampled token: the model's log-probs at temperature 1 (what
// the trainer needs), the filtered distribution actually sampled from (temperature, top-k,
// top-p), and optional top alternatives. Pure functions over typed arrays.

import type { TokenLogprob } from '../../types.js';
import type { Kernels } from '../kernels/kernels.js';
import { temperedWeights } from '../kernels/portable.js';
import type { Rng } from './random.js';

export interface SampleSettings {
  temperature: number;
  topK: number;
  topP: number;
  topLogprobs: number;
}

export interface SampleResult {
  id: number;
  logprob: number;
  sampledLogprob: number;
  top?: TokenLogprob[];
}

/** log(sum(exp(logits))) computed stably. */
export function logSumExp(logits: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i]! > max) max = logits[i]!;
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i]! - max);
  return max + Math.log(sum);
}

/** The k largest entries of `logits` as log-probs, best first. */
export function topLogprobs(logits: Float32Array, k: number, lse = logSumExp(logits)): TokenLogprob[] {
  const ids: number[] = [];
  for (let i = 0; i < logits.length; i++) {
    if (ids.length < k) {
      ids.push(i);
      ids.sort((a, b) => logits[b]! - logits[a]! || a - b);
    } else if (logits[i]! > logits[ids[k - 1]!]!) {
      ids[k - 1] = i;
      ids.sort((a, b) => logits[b]! - logits[a]! || a - b);
    }
  }
  return ids.map((id) => ({ id, logprob: logits[id]! - lse }));
}

export function argmax(logits: Float32Array): number {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
  return best;
}

/** The tempered weights' kernel: fills weights, returns their sum. */
export type WeighLogits = Kernels['temperedWeights'];

/** Scratch for the tempered weights, reused across calls (sampling is synchronous). */
let tempered = new Float64Array(0);

/**
 * Samples one token. Greedy when temperature is 0 (the sampled distribution is then a point
 * mass, so sampledLogprob is 0). Top-k and top-p select the candidate set from the tempered
 * distribution, which is renormalized over it. `lse` is log sum exp of `logits` when the caller
 * has it already (computed here otherwise). `weigh` computes the tempered weights: the engine
 * passes its kernels' (native: vectorized), others get the float64 JavaScript one.
 */
export function sampleToken(
  logits: Float32Array,
  s: SampleSettings,
  rng: Rng,
  lse?: number,
  weigh: WeighLogits = temperedWeights,
): SampleResult {
  const V = logits.length;
  const invT = s.temperature > 0 ? 1 / s.temperature : 0;
  let probs: Float64Array | null = null;
  let total = 0;
  if (invT > 0) {
    if (tempered.length < V) tempered = new Float64Array(V);
    probs = tempered.subarray(0, V); // tempered, unnormalized
    total = weigh(probs, logits, V, invT);
  }
  // At temperature 1 the weights are e^(z - max): log sum exp is max + log(total).
  const logNormalizer = lse ?? (invT === 1 ? logits[argmax(logits)]! + Math.log(total) : logSumExp(logits));
  const top = s.topLogprobs > 0 ? topLogprobs(logits, s.topLogprobs, logNormalizer) : undefined;
  const done = (id: number, sampledLogprob: number): SampleResult => ({
    id,
    logprob: logits[id]! - logNormalizer,
    sampledLogprob,
    ...(top ? { top } : {}),
  });
  if (!probs) return done(argmax(logits), 0);

  if ((s.topK <= 0 || s.topK >= V) && !(s.topP > 0 && s.topP < 1)) {
    // No filter: every id, in id order (candidateSet's order for this case), without listing them.
    let u = rng.next() * total;
    let chosen = V - 1;
    for (let i = 0; i < V; i++) {
      u -= probs[i]!;
      if (u < 0) {
        chosen = i;
        break;
      }
    }
    return done(chosen, Math.log(probs[chosen]! / total));
  }
  const candidates = candidateSet(probs, total, s.topK, s.topP);
  let mass = 0;
  for (const id of candidates) mass += probs[id]!;
  let u = rng.next() * mass;
  let chosen = candidates[candidates.length - 1]!;
  for (const id of candidates) {
    u -= probs[id]!;
    if (u < 0) {
      chosen = id;
      break;
    }
  }
  return done(chosen, Math.log(probs[chosen]! / mass));
}

/**
 * Ids allowed by top-k and top-p, most likely first (ties by id). Instead of sorting the whole
 * vocabulary it sorts only the entries above a threshold, lowering the threshold until that set
 * provably contains the nucleus (its mass reaches top-p, or it holds top-k entries).
 */
export function candidateSet(probs: Float64Array, total: number, topK: number, topP: number): number[] {
  const V = probs.length;
  const k = topK > 0 ? Math.min(topK, V) : V;
  const p = topP > 0 && topP < 1 ? topP : 1;
  if (k === V && p === 1) return Array.from({ length: V }, (_, i) => i);

  // At least k entries reach the k-th largest value: a threshold that never needs lowering again.
  // The largest value is among the k largest, so the heap that finds the k-th gives it too.
  let floor = 0;
  let max = 0;
  if (k < V) {
    const heap = largestK(probs, k);
    floor = heap[0]!;
    for (let i = 0; i < k; i++) if (heap[i]! > max) max = heap[i]!;
  } else {
    for (let i = 0; i < V; i++) if (probs[i]! > max) max = probs[i]!;
  }
  if (idScratch.length < V) idScratch = new Uint32Array(V);
  const ids = idScratch;
  for (let threshold = Math.max(max * 1e-3, floor); ; threshold = Math.max(threshold * 1e-3, floor)) {
    let n = 0;
    let mass = 0;
    for (let i = 0; i < V; i++) {
      if (probs[i]! >= threshold) {
        ids[n++] = i;
        mass += probs[i]!;
      }
    }
    const enough = n >= k || mass >= p * total || threshold < Number.MIN_VALUE || n === V;
    if (!enough) continue;
    return sortedPrefix(probs, ids.subarray(0, n), k, p * total);
  }
}

/** Scratch for candidateSet's ids above a threshold (sampling is synchronous). */
let idScratch = new Uint32Array(0);

/**
 * Of `ids` (ascending), the first ones in order of weight, largest first and ties by id: up to k,
 * or until their cumulative weight reaches `mass`. A stable radix sort on each weight's high word
 * (non-negative doubles order as their bits do; 8 bits a pass, so ties keep the ids' order) leaves
 * only weights that share a high word out of order, which one insertion pass puts right. At 70k
 * ids it takes about 5 ms, where a comparator sort took 20-30.
 */
function sortedPrefix(probs: Float64Array, ids: Uint32Array, k: number, mass: number): number[] {
  const n = ids.length;
  const words = new Uint32Array(probs.buffer, probs.byteOffset, probs.length * 2); // [low, high] per weight
  let order = Uint32Array.from(ids),
    next = new Uint32Array(n),
    key = new Uint32Array(n),
    nextKey = new Uint32Array(n);
  // Complemented high words: the largest weight first.
  for (let i = 0; i < n; i++) key[i] = ~words[2 * ids[i]! + 1]!;
  const starts = new Uint32Array(257);
  for (let shift = 0; shift < 32; shift += 8) {
    starts.fill(0);
    for (let i = 0; i < n; i++) starts[((key[i]! >>> shift) & 255) + 1]!++;
    if (starts.includes(n)) continue; // one digit for all: this pass would move nothing
    for (let d = 0; d < 256; d++) starts[d + 1]! += starts[d]!;
    for (let i = 0; i < n; i++) {
      const at = starts[(key[i]! >>> shift) & 255]!++;
      next[at] = order[i]!;
      nextKey[at] = key[i]!;
    }
    [order, next, key, nextKey] = [next, order, nextKey, key];
  }
  for (let i = 1; i < n; i++) {
    const id = order[i]!,
      v = probs[id]!;
    let j = i;
    for (; j > 0 && probs[order[j - 1]!]! < v; j--) order[j] = order[j - 1]!;
    order[j] = id;
  }
  const kept: number[] = [];
  let cum = 0;
  for (let i = 0; i < n && kept.length < k; i++) {
    kept.push(order[i]!);
    cum += probs[order[i]!]!;
    if (cum >= mass) break;
  }
  return kept;
}

/** The k-th largest of `values` (1 <= k <= length). */
export function kthLargest(values: Float64Array, k: number): number {
  return largestK(values, k)[0]!;
}

/** The k largest of `values` (1 <= k <= length) as a min-heap: the k-th largest at index 0. */
function largestK(values: Float64Array, k: number): Float64Array {
  const heap = new Float64Array(k);
  let i = 0;
  for (; i < k; i++) {
    const v = values[i]!;
    let at = i;
    while (at > 0 && heap[(at - 1) >> 1]! > v) {
      heap[at] = heap[(at - 1) >> 1]!;
      at = (at - 1) >> 1;
    }
    heap[at] = v;
  }
  // Nearly every value is below the heap's least, so the scan keeps that in a local.
  let least = heap[0]!;
  for (; i < values.length; i++) {
    const v = values[i]!;
    if (!(v > least)) continue;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= k) break;
      const child = left + 1 < k && heap[left + 1]! < heap[left]! ? left + 1 : left;
      if (heap[child]! >= v) break;
      heap[at] = heap[child]!;
      at = child;
    }
    heap[at] = v;
    least = heap[0]!;
  }
  return heap;
}
