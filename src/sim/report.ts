// The benchmark's results across seeds: mean and spread of the personalization score per method
// and step (the paper's Table 3 shape), the measured cost of learning, and the markdown table.

import type { PersonalMethod as Method } from '../learn/methods.js';
import type { ExperimentResult } from './experiment.js';

export interface Spread {
  mean: number;
  /** Sample standard deviation across seeds (0 for one seed). */
  std: number;
  min: number;
  max: number;
  n: number;
}

export interface MethodSummary {
  method: Method | 'base';
  /** Score spread at each measured step. */
  byStep: Record<number, Spread>;
  byUser: Record<number, { student: number; teacher: number }>;
  /** Simulated-user conversations a run needed to fill its batches (absent for the base row). */
  conversations?: Spread;
}

export interface BenchmarkSummary {
  methods: MethodSummary[];
  /** Wall time per training step (users + judge + learner, measurement pauses excluded), over all runs. */
  wallSecondsPerStep: number;
  /** Learner time per step (from serve's log). */
  trainSecondsPerStep: number;
  /** Trained samples per hour of that wall time. */
  samplesPerHour: number;
  totalWallSeconds: number;
}

export function spread(values: readonly number[]): Spread {
  const n = values.length;
  const mean = values.reduce((a, v) => a + v, 0) / n;
  const std = n > 1 ? Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1)) : 0;
  return { mean, std, min: Math.min(...values), max: Math.max(...values), n };
}

export function summarize(results: readonly ExperimentResult[]): BenchmarkSummary {
  const methods: MethodSummary[] = [];
  // Every run starts from the same base model: the step-0 measurements are the base row, one per
  // seed (the runs of a seed measure the same probes with the same seeds).
  const base = [...new Set(results.map((r) => r.seed))]
    .map((seed) => {
      const points = results.filter((r) => r.seed === seed).flatMap((r) => r.points.filter((p) => p.step === 0));
      return { score: points.reduce((a, p) => a + p.score, 0) / points.length, byUser: meanByUser(points) };
    })
    .filter((b) => Number.isFinite(b.score));
  if (base.length > 0)
    methods.push({ method: 'base', byStep: { 0: spread(base.map((b) => b.score)) }, byUser: { 0: meanByUser(base) } });
  for (const method of [...new Set(results.map((r) => r.method))]) {
    const runs = results.filter((r) => r.method === method);
    const steps = [...new Set(runs.flatMap((r) => r.points.map((p) => p.step)))].sort((a, b) => a - b);
    const byStep: Record<number, Spread> = {},
      byUser: MethodSummary['byUser'] = {};
    for (const step of steps) {
      const points = runs.flatMap((r) => r.points.filter((p) => p.step === step));
      byStep[step] = spread(points.map((p) => p.score));
      byUser[step] = meanByUser(points);
    }
    methods.push({ method, byStep, byUser, conversations: spread(runs.map((r) => r.conversations)) });
  }
  const stepCount = results.reduce((a, r) => a + r.steps.length, 0);
  const wall = results.reduce((a, r) => a + r.trainingWallSeconds, 0);
  return {
    methods,
    wallSecondsPerStep: wall / Math.max(1, stepCount),
    trainSecondsPerStep:
      results.reduce((a, r) => a + r.steps.reduce((b, s) => b + s.trainSeconds, 0), 0) / Math.max(1, stepCount),
    samplesPerHour: results.reduce((a, r) => a + r.samplesTrained, 0) / Math.max(1e-9, wall / 3600),
    totalWallSeconds: results.reduce((a, r) => a + r.wallSeconds, 0),
  };
}

function meanByUser(points: readonly { byUser: { student: number; teacher: number } }[]): {
  student: number;
  teacher: number;
} {
  const n = Math.max(1, points.length);
  return {
    student: points.reduce((a, p) => a + p.byUser.student, 0) / n,
    teacher: points.reduce((a, p) => a + p.byUser.teacher, 0) / n,
  };
}

const LABEL: Record<MethodSummary['method'], string> = {
  base: 'Base (step 0)',
  rl: 'Binary RL',
  opd: 'OPD',
  combine: 'Combined',
};

const cell = (s: Spread | undefined) =>
  s ? `${s.mean.toFixed(2)} ± ${s.std.toFixed(2)} (${s.min.toFixed(2)}–${s.max.toFixed(2)})` : '–';

/** The paper's table (score after 8 and 16 steps), then every measured step, then the cost. */
export function markdownReport(summary: BenchmarkSummary, headline: readonly number[], context: string): string {
  const steps = [...new Set(summary.methods.flatMap((m) => Object.keys(m.byStep).map(Number)))].sort((a, b) => a - b);
  const lines = [
    '# Personalization benchmark',
    '',
    context,
    '',
    `| method | ${headline.map((s) => `${s} steps`).join(' | ')} |`,
    `| --- | ${headline.map(() => '---').join(' | ')} |`,
    ...summary.methods.map(
      (m) =>
        `| ${LABEL[m.method]} | ${headline.map((s) => cell(m.method === 'base' ? m.byStep[0] : m.byStep[s])).join(' | ')} |`,
    ),
    '',
    'Mean ± sample standard deviation across seeds (min–max). Base: the step-0 measurement, one per seed.',
    '',
    '## Every measurement (mean; student / teacher)',
    '',
    `| method | ${steps.map((s) => `step ${s}`).join(' | ')} |`,
    `| --- | ${steps.map(() => '---').join(' | ')} |`,
    ...summary.methods
      .filter((m) => m.method !== 'base')
      .map(
        (m) =>
          `| ${LABEL[m.method]} | ${steps.map((s) => (m.byStep[s] ? `${m.byStep[s]!.mean.toFixed(2)} (${m.byUser[s]!.student.toFixed(2)} / ${m.byUser[s]!.teacher.toFixed(2)})` : '–')).join(' | ')} |`,
      ),
    '',
    '## Cost',
    '',
    `- wall time per training step (users talking, judging, training; measurements excluded): ${summary.wallSecondsPerStep.toFixed(1)} s`,
    `- learner time per step: ${summary.trainSecondsPerStep.toFixed(1)} s`,
    `- trained samples per hour: ${summary.samplesPerHour.toFixed(0)}`,
    ...summary.methods
      .filter((m) => m.conversations)
      .map(
        (m) =>
          `- ${LABEL[m.method]}: ${m.conversations!.mean.toFixed(0)} simulated-user conversations per run (${m.conversations!.min}–${m.conversations!.max}); a method that turns fewer turns into samples needs more of them for the same steps`,
      ),
    `- total wall time of all runs: ${(summary.totalWallSeconds / 60).toFixed(1)} min`,
    '',
  ];
  return lines.join('\n');
}
