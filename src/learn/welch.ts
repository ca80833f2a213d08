// The rollback guard's statistic, as pure functions: a one-sided Welch test of "the new version's
// mean judge score is below the previous version's by more than `margin`", with Student's t
// distribution from the regularized incomplete beta function (Numerical Recipes' continued
// fraction, Lentz's method; about 1e-12 relative accuracy here).

export interface WelchResult {
  /** Previous mean minus new mean. */
  drop: number;
  /** (drop - margin) / standard error; Infinity or -Infinity when both samples have no variance. */
  t: number;
  /** Welch-Satterthwaite degrees of freedom (NaN when both variances are 0). */
  df: number;
  /** P(T >= t) under H0: drop <= margin. */
  p: number;
}

export function mean(xs: readonly number[]): number {
  return xs.reduce((a, x) => a + x, 0) / xs.length;
}

/** The unbiased sample variance (n - 1 in the denominator). */
export function sampleVariance(xs: readonly number[]): number {
  const m = mean(xs);
  return xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1);
}

/** One-sided Welch test that `next` is worse than `previous` by more than `margin`. Each needs 2+ values. */
export function welchWorse(previous: readonly number[], next: readonly number[], margin: number): WelchResult {
  if (previous.length < 2 || next.length < 2)
    throw new RangeError(`a Welch test needs 2 or more values a side, got ${previous.length} and ${next.length}`);
  const drop = mean(previous) - mean(next);
  const a = sampleVariance(previous) / previous.length;
  const b = sampleVariance(next) / next.length;
  const se = Math.sqrt(a + b);
  if (se === 0) {
    // No spread on either side: the difference is exact.
    const worse = drop > margin;
    return { drop, t: worse ? Infinity : -Infinity, df: Number.NaN, p: worse ? 0 : 1 };
  }
  const t = (drop - margin) / se;
  const df = (a + b) ** 2 / (a ** 2 / (previous.length - 1) + b ** 2 / (next.length - 1));
  return { drop, t, df, p: studentTUpper(t, df) };
}

/** P(T >= t) for Student's t with `df` degrees of freedom (df > 0). */
export function studentTUpper(t: number, df: number): number {
  if (!(df > 0)) throw new RangeError(`degrees of freedom must be positive, got ${df}`);
  if (t === Infinity) return 0;
  if (t === -Infinity) return 1;
  const tail = 0.5 * regularizedBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? tail : 1 - tail;
}

/** I_x(a, b), the regularized incomplete beta function. */
export function regularizedBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(lnGamma(a + b) - lnGamma(a) - lnGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  // The continued fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry otherwise.
  if (x < (a + 1) / (a + b + 2)) return (front * betaFraction(x, a, b)) / a;
  return 1 - (front * betaFraction(1 - x, b, a)) / b;
}

function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-15) break;
  }
  return h;
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms). */
export function lnGamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
  const g = 7;
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  const z = x - 1;
  let s = c[0]!;
  for (let i = 1; i < g + 2; i++) s += c[i]! / (z + i);
  const t = z + g + 0.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(s);
}
