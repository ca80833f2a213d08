// The benchmarks' figure: a score in [0, 1] against training step, one line per method (mean
// across seeds, with the min-max range as a bar at each measured step).

import { Raster, type Rgb } from './png.js';
import type { BenchmarkSummary, MethodSummary, Spread } from './report.js';

/** One line of the figure. */
export interface PlotSeries {
  name: string;
  color: Rgb;
  byStep: Record<number, Spread>;
}

const COLORS: Record<MethodSummary['method'], Rgb> = {
  base: [120, 120, 120],
  rl: [220, 120, 30],
  opd: [40, 110, 200],
  combine: [30, 150, 70],
};
const NAMES: Record<MethodSummary['method'], string> = {
  base: 'BASE',
  rl: 'BINARY RL',
  opd: 'OPD',
  combine: 'COMBINED',
};

export function plotScores(summary: BenchmarkSummary, title: string): Buffer {
  const series = summary.methods
    .filter((m) => m.method !== 'base')
    .map((m) => ({ name: NAMES[m.method], color: COLORS[m.method], byStep: m.byStep }));
  return plotSeries(series, title, 'SCORE');
}

export function plotSeries(methods: readonly PlotSeries[], title: string, yLabel: string): Buffer {
  const W = 760,
    H = 480,
    left = 80,
    right = 200,
    top = 50,
    bottom = 60;
  const img = new Raster(W, H);
  const maxStep = Math.max(1, ...methods.flatMap((m) => Object.keys(m.byStep).map(Number)));
  const x = (step: number) => left + ((W - left - right) * step) / maxStep;
  const y = (score: number) => H - bottom - (H - top - bottom) * score;
  const ink: Rgb = [40, 40, 40],
    grid: Rgb = [225, 225, 225];

  img.text(left, 16, title, ink, 2);
  for (let k = 0; k <= 5; k++) {
    const v = k / 5;
    img.line(left, y(v), W - right, y(v), grid);
    img.text(left - 44, y(v) - 7, v.toFixed(1), ink, 2);
  }
  const ticks = [...new Set(methods.flatMap((m) => Object.keys(m.byStep).map(Number)))].sort((a, b) => a - b);
  for (const s of ticks) img.text(x(s) - Raster.textWidth(String(s)) / 2, H - bottom + 10, String(s), ink, 2);
  img.line(left, y(0), W - right, y(0), ink, 2);
  img.line(left, y(0), left, y(1), ink, 2);
  img.text((left + W - right) / 2 - Raster.textWidth('STEP') / 2, H - 26, 'STEP', ink, 2);
  img.text(8, top - 28, yLabel, ink, 2);

  let legendY = top + 10;
  for (const m of methods) {
    const color = m.color;
    const points = Object.entries(m.byStep)
      .map(([s, v]) => ({ step: Number(s), ...v }))
      .sort((a, b) => a.step - b.step);
    points.forEach((p, i) => {
      img.line(x(p.step), y(p.min), x(p.step), y(p.max), color, 1);
      img.rect(x(p.step) - 3, y(p.mean) - 3, 7, 7, color);
      const q = points[i + 1];
      if (q) img.line(x(p.step), y(p.mean), x(q.step), y(q.mean), color, 3);
    });
    img.rect(W - right + 20, legendY + 4, 20, 6, color);
    img.text(W - right + 48, legendY, m.name, ink, 2);
    legendY += 26;
  }
  return img.png();
}
