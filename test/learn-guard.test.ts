// The rollback guard's statistic (learn/welch.ts) and verdict (learn/guard.ts) on cases computed
// by hand: Student's t tails with closed forms (df 1 and 2), tabled critical values, and Welch
// tests whose means, variances and degrees of freedom are worked out in the comments.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_GUARD, guardVerdict } from '../src/learn/guard.js';
import { lnGamma, sampleVariance, studentTUpper, welchWorse } from '../src/learn/welch.js';

const close = (actual: number, expected: number, tol: number, what: string) =>
  assert.ok(Math.abs(actual - expected) <= tol, `${what}: ${actual}, expected ${expected} ± ${tol}`);

test("Student's t upper tail: closed forms for df 1 and 2, tabled critical values, symmetry", () => {
  // df 1 is Cauchy: P(T >= t) = 1/2 - atan(t)/pi, so 1/4 at t = 1.
  close(studentTUpper(1, 1), 0.25, 1e-12, 't=1 df=1');
  close(studentTUpper(3, 1), 0.5 - Math.atan(3) / Math.PI, 1e-12, 't=3 df=1');
  // df 2: P(T >= t) = (1 - t / sqrt(t^2 + 2)) / 2; at t = 2 that is (1 - 2/sqrt(6)) / 2 = 0.0917517.
  close(studentTUpper(2, 2), (1 - 2 / Math.sqrt(6)) / 2, 1e-12, 't=2 df=2');
  // Tables: t(0.975, 10) = 2.228, t(0.95, 10) = 1.812, t(0.95, 30) = 1.697 (three decimals).
  close(studentTUpper(2.228, 10), 0.025, 1e-4, 't=2.228 df=10');
  close(studentTUpper(1.812, 10), 0.05, 1e-4, 't=1.812 df=10');
  close(studentTUpper(1.697, 30), 0.05, 1e-4, 't=1.697 df=30');
  assert.equal(studentTUpper(0, 7), 0.5);
  close(studentTUpper(-1.5, 7) + studentTUpper(1.5, 7), 1, 1e-12, 'symmetry');
  // Non-integer df (Welch's): between its integer neighbours.
  const p = studentTUpper(2, 5.88);
  assert.ok(p < studentTUpper(2, 5) && p > studentTUpper(2, 6), String(p));
  close(lnGamma(5), Math.log(24), 1e-12, 'lnGamma(5) = ln 4!');
  close(lnGamma(0.5), Math.log(Math.sqrt(Math.PI)), 1e-12, 'lnGamma(1/2)');
  assert.throws(() => studentTUpper(1, 0), /degrees of freedom must be positive/);
});

test('Welch: mean drop, standard error and Welch-Satterthwaite df of a hand-computed case', () => {
  // previous [1, 1, 1, 0]: mean 0.75, variance (3 * 0.0625 + 0.5625) / 3 = 0.25, a = 0.25 / 4 = 0.0625.
  // new [-1, 0, -1, 0]: mean -0.5, variance 4 * 0.25 / 3 = 1/3, b = 1/12.
  // se = sqrt(0.0625 + 0.083333) = 0.381881; drop = 1.25.
  // df = (a + b)^2 / (a^2 / 3 + b^2 / 3) = 0.0212674 / 0.0036169 = 5.88.
  const previous = [1, 1, 1, 0];
  const next = [-1, 0, -1, 0];
  assert.equal(sampleVariance(previous), 0.25);
  const plain = welchWorse(previous, next, 0);
  assert.equal(plain.drop, 1.25);
  close(plain.t, 1.25 / 0.381881, 1e-5, 't, margin 0');
  close(plain.df, 5.88, 1e-9, 'df');
  // t = 3.27327 at 5.88 df: one-sided p = 0.008734 (the same as SciPy's ttest_ind(equal_var=False, alternative='greater')).
  close(plain.p, 0.008734, 1e-6, 'p, margin 0');
  // Margin 0.5: t = 0.75 / 0.381881 = 1.963961, p = 0.04907: still below 0.05.
  const margin = welchWorse(previous, next, 0.5);
  close(margin.t, 1.963961, 1e-6, 't, margin 0.5');
  close(margin.p, 0.04907, 1e-5, 'p, margin 0.5');
  // Margin 0.6: t = 0.65 / 0.381881 = 1.7021; p rises above 0.05.
  assert.ok(welchWorse(previous, next, 0.6).p > 0.05);
  // Better, not worse: t negative, p above 1/2.
  assert.ok(welchWorse(next, previous, 0).p > 0.5);
});

test('Welch: no spread on either side decides by the means alone; too few values are refused', () => {
  assert.deepEqual(
    [welchWorse([1, 1], [-1, -1], 0.1).p, welchWorse([1, 1], [1, 1], 0.1).p, welchWorse([0, 0], [-1, -1], 1).p],
    [0, 1, 1],
  );
  assert.throws(() => welchWorse([1], [0, 0], 0), /needs 2 or more values a side, got 1 and 2/);
});

test('the guard rolls back only a version worse beyond noise, and only with a full window on both sides', () => {
  const cfg = { ...DEFAULT_GUARD, enabled: true, window: 4, margin: 0.1, alpha: 0.05 };
  // previous [1, 0, 1, 1]: mean 0.75, variance 0.25; new [-1, -1, 0, -1]: mean -0.75, variance 0.25.
  // se = sqrt(2 * 0.25 / 4) = 0.353553, t = (1.5 - 0.1) / 0.353553 = 3.95980, df = 6: p = 0.003726.
  const worse = guardVerdict(0, [1, 0, 1, 1], [-1, -1, 0, -1], cfg);
  assert.equal(worse.decision, 'rolled_back');
  close(worse.p!, 0.003726, 1e-5, 'p');
  assert.deepEqual([worse.previousMean, worse.mean, worse.turns, worse.previousTurns], [0.75, -0.75, 4, 4]);
  // One bad turn among good ones is noise: new [1, 0, 1, -1], mean 0.25, variance 0.916667.
  // se = sqrt(0.0625 + 0.229167) = 0.540062, t = (0.5 - 0.1) / 0.540062 = 0.74066 at df 4.52: p = 0.2478.
  const noise = guardVerdict(0, [1, 0, 1, 1], [1, 0, 1, -1], cfg);
  assert.equal(noise.decision, 'kept');
  assert.ok(noise.p! > 0.2 && noise.p! < 0.3, String(noise.p));
  // A previous version with fewer judged turns than the window cannot be compared: kept, and said why.
  const short = guardVerdict(3, [1, 1], [-1, -1, -1, -1], cfg);
  assert.deepEqual([short.decision, short.p], ['kept', null]);
  assert.match(short.reason, /version 3 has 2 judged turns, fewer than the window \(4\)/);
});
