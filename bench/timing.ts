// Timing shared by the kernel benchmarks.

/** Median seconds per call, after one warm-up call, over at least 3 calls and `minSeconds`. */
export function secondsPerCall(run: () => void, minSeconds: number): number {
  run();
  const times: number[] = [];
  const begin = performance.now();
  while (times.length < 3 || performance.now() - begin < minSeconds * 1000) {
    const t0 = performance.now();
    run();
    times.push((performance.now() - t0) / 1000);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}
