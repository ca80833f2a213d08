// The learner's side of sharing the CPU with serving: at each yield point, while the sampler
// has jobs in flight, wait for it to go idle, but at most maxYieldMs, so training keeps a duty
// cycle under continuous load instead of starving.

// Waits are sliced so progress never rests on the notify alone: a missed wake-up costs a slice,
// not maxYieldMs.
const SLICE_MS = 5;

/** A pause hook over LocalEngine.activity; returns the ms it waited (0, after one load, when idle). */
export function servingYield(activity: Int32Array, maxYieldMs: number): () => number {
  return () => {
    if (Atomics.load(activity, 0) === 0) return 0;
    const t0 = performance.now(),
      deadline = t0 + maxYieldMs;
    for (
      let n = Atomics.load(activity, 0), now = t0;
      n !== 0 && now < deadline;
      n = Atomics.load(activity, 0), now = performance.now()
    ) {
      Atomics.wait(activity, 0, n, Math.min(SLICE_MS, deadline - now));
    }
    return performance.now() - t0;
  };
}
