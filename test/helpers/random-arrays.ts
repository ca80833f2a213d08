// Deterministic random inputs for kernel tests, from the project's own seeded PRNG.

import { createRng } from '../../src/engine/local/sampling/random.js';

/** Uniform numbers in [-1, 1), reproducible from the seed. */
export function randomSource(seed: number): () => number {
  const rng = createRng(seed);
  return () => rng.next() * 2 - 1;
}

/** A Float32Array of n uniform numbers in [-scale, scale) drawn from `random`. */
export function randomArrayFrom(random: () => number, n: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = random() * scale;
  return out;
}
