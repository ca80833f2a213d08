// The log-prob gap between precisions: tokens sampled from one model, scored by several.
import type { Transformer } from '../../src/engine/local/model/transformer.js';
import { createRng } from '../../src/engine/local/sampling/random.js';

/**
 * Samples `n` tokens at temperature 1 from `sampler` after `prompt`, one decode row at a time, and
 * returns each sampled token's log-prob under every model in `models` (fed the same tokens).
 */
export function sampleAndScore(
  models: Transformer[],
  cfg: { vocabSize: number },
  prompt: number[],
  n: number,
  seed: number,
): number[][] {
  const rng = createRng(seed);
  const caches = models.map((m) => m.newKvCache()); // each model's own rows, as it serves
  const out = models.map(() => [] as number[]);
  let logits = models.map((m, i) =>
    m.forward([{ cache: caches[i]!, tokens: prompt, logitsFrom: prompt.length - 1 }])[0]!.slice(),
  );
  for (let t = 0; t < n; t++) {
    const lps = logits.map((row) => logSoftmax(row, cfg.vocabSize));
    let u = rng.next(),
      id = 0;
    for (; id < cfg.vocabSize - 1; id++) {
      u -= Math.exp(lps[0]![id]!);
      if (u <= 0) break;
    }
    lps.forEach((lp, i) => out[i]!.push(lp[id]!));
    logits = models.map((m, i) => m.forward([{ cache: caches[i]!, tokens: [id], logitsFrom: 0 }])[0]!.slice());
  }
  return out;
}

export function logSoftmax(row: Float32Array, V: number): Float64Array {
  let max = -Infinity,
    sum = 0;
  for (let i = 0; i < V; i++) max = Math.max(max, row[i]!);
  for (let i = 0; i < V; i++) sum += Math.exp(row[i]! - max);
  const lse = max + Math.log(sum);
  return Float64Array.from({ length: V }, (_, i) => row[i]! - lse);
}
