// A small seeded PRNG (SplitMix32 seeding xoshiro128**), so a seed reproduces a sample exactly
// on every platform, independent of Math.random.

export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
}

export function createRng(seed: number): Rng {
  let s = seed >>> 0;
  const splitmix = (): number => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = splitmix(),
    b = splitmix(),
    c = splitmix(),
    d = splitmix();
  return {
    next() {
      const result = Math.imul(rotl(Math.imul(b, 5) >>> 0, 7), 9) >>> 0;
      const t = (b << 9) >>> 0;
      c ^= a;
      d ^= b;
      b ^= c;
      a ^= d;
      c = (c ^ t) >>> 0;
      d = rotl(d, 11);
      return result / 4294967296;
    },
  };
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A fresh seed when the caller gave none. */
export function randomSeed(): number {
  return (Math.random() * 4294967296) >>> 0;
}
