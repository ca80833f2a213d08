// Seeded choices for the simulation: every corpus, user message and judge answer is a function of
// a seed, so a run can be replayed exactly.

import { createRng, type Rng } from '../engine/local/sampling/random.js';

export type { Rng };

export function rng(seed: number): Rng {
  return createRng(seed);
}

export function pick<T>(r: Rng, items: readonly T[]): T {
  return items[Math.floor(r.next() * items.length)]!;
}

/** One key drawn with probability proportional to its weight. */
export function weighted<K extends string>(r: Rng, weights: Readonly<Record<K, number>>): K {
  const entries = Object.entries(weights) as [K, number][];
  const total = entries.reduce((a, [, w]) => a + w, 0);
  let x = r.next() * total;
  for (const [key, w] of entries) {
    x -= w;
    if (x < 0) return key;
  }
  return entries[entries.length - 1]![0];
}

/** A stable 32-bit hash of a string (FNV-1a), to derive seeds from names and texts. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
