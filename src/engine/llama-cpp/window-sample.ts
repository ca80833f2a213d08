// Sampling with top-p or top-k at a temperature up to 1 from the largest logits alone, draw for draw
// as ../local/sampling/sample.ts samples the whole row, when that provably gives the same candidates.
//
// sampleToken keeps, of the ids ordered by tempered probability (ties by id), the first
// min(topK, j) where j is the first at which their cumulative mass reaches topP * total, total
// being the tempered mass of the whole vocabulary. From llama.cpp we have the K largest logits
// exactly and W = sum(exp(logit - max)) over the vocabulary, summed in float32. The tempered mass
// outside the window is bounded: every logit outside is at most the window's smallest, so with
// x = exp(logit - max) <= x_K <= 1 and 1/T >= 1, x^(1/T) <= x * x_K^(1/T - 1). Where the cut
// falls at the same id for every total within the bounds, and that id's probability is above the
// window's smallest (so no id outside ranks before it), the candidates, the draw and its
// probability are the ones sampleToken computes from the row; otherwise this answers null.

import type { Rng } from '../local/sampling/random.js';
import type { SampleResult, SampleSettings } from '../local/sampling/sample.js';

/**
 * A bound on the relative error of llama.cpp's float32 sum of `n` terms exp(logit - max): n rounded
 * additions, and each term's own error (the float32 difference, then expf) weighted by the term,
 * which sums to at most n/e units of 2^-24 (d * exp(-d) <= 1/e); doubled for margin.
 */
function float32SumError(n: number): number {
  const nu = 2 * n * 2 ** -24;
  return nu / (1 - nu) + 1e-6;
}

/**
 * The sampled token from the window (`logits`: id -> logit of the largest ones, at least one more
 * than topK) and `weight` (sum(exp(logit - max)) over the `vocabSize` ids), or null when the
 * window cannot decide; `rng` is drawn from only when it answers. Needs 0 < temperature <= 1.
 */
export function sampleFromWindow(
  logits: Map<number, number>,
  weight: number,
  vocabSize: number,
  s: SampleSettings,
  rng: Rng,
): SampleResult | null {
  const ids = [...logits.keys()].sort((a, b) => logits.get(b)! - logits.get(a)! || a - b);
  const max = logits.get(ids[0]!)!;
  const invT = 1 / s.temperature;
  const probs = ids.map((id) => Math.exp((logits.get(id)! - max) * invT));
  const last = probs.length - 1;

  // The tempered mass outside the window, from the untempered one W leaves there.
  let inside1 = 0;
  for (const id of ids) inside1 += Math.exp(logits.get(id)! - max);
  const err = float32SumError(vocabSize);
  const outside1 = ids.length >= vocabSize ? [0, 0] : [weight / (1 + err) - inside1, weight / (1 - err) - inside1];
  const xK = Math.exp(logits.get(ids[last]!)! - max);
  const outsideHi = Math.max(0, outside1[1]!) * xK ** (invT - 1);
  const outsideLo = invT === 1 ? Math.max(0, outside1[0]!) : 0;
  let inside = 0;
  for (const p of probs) inside += p;
  const lo = (inside + outsideLo) * (1 - 1e-9);
  const hi = (inside + outsideHi) * (1 + 1e-9);

  const k = s.topK > 0 ? s.topK : vocabSize;
  const p = s.topP > 0 && s.topP < 1 ? s.topP : 1;
  let cum = 0;
  let cut = -1;
  for (let j = 0; j <= last && cut < 0; j++) {
    cum += probs[j]!;
    if (j + 1 >= k || cum >= p * hi) cut = j;
    else if (cum >= p * lo) return null;
  }
  if (cut < 0 || (ids.length < vocabSize && !(probs[cut]! > probs[last]!))) return null;

  let mass = 0;
  for (let j = 0; j <= cut; j++) mass += probs[j]!;
  let u = rng.next() * mass;
  let chosen = cut;
  for (let j = 0; j <= cut; j++) {
    u -= probs[j]!;
    if (u < 0) {
      chosen = j;
      break;
    }
  }
  const logNormalizer = max + Math.log(weight);
  const top = s.topLogprobs > 0 ? ids.slice(0, s.topLogprobs) : [];
  return {
    id: ids[chosen]!,
    logprob: logits.get(ids[chosen]!)! - logNormalizer,
    sampledLogprob: Math.log(probs[chosen]! / mass),
    ...(top.length > 0 ? { top: top.map((id) => ({ id, logprob: logits.get(id)! - logNormalizer })) } : {}),
  };
}
