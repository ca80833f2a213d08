// The personalization benchmark: every method for every seed on the same cached base model, then
// the table (JSON and markdown) and the plot under the output folder.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PersonalMethod as Method } from '../learn/methods.js';
import { DEFAULT_EXPERIMENT, runExperiment, type ExperimentOptions, type ExperimentResult } from './experiment.js';
import { plotScores } from './plot.js';
import { markdownReport, summarize, type BenchmarkSummary } from './report.js';
import { RUBRIC_VERSION } from './rubrics.js';

export interface BenchmarkOptions {
  model: string;
  methods: Method[];
  seeds: number[];
  /** Steps of the paper's table (score after 8 and 16 steps). */
  headline: number[];
  experiment: Partial<Omit<ExperimentOptions, 'model' | 'method' | 'seed'>>;
  outDir: string;
  /** What the base model is, for the report. */
  modelNote: string;
  onRunStart?: (method: Method, seed: number, index: number, total: number) => void;
  onRunEnd?: (result: ExperimentResult) => void;
  hooks?: Pick<ExperimentOptions, 'onPoint' | 'onStep' | 'onProbe'>;
}

export interface BenchmarkOutput {
  summary: BenchmarkSummary;
  results: ExperimentResult[];
  markdown: string;
  files: { json: string; markdown: string; png: string };
}

export async function runBenchmark(o: BenchmarkOptions): Promise<BenchmarkOutput> {
  const settings = { ...DEFAULT_EXPERIMENT, ...o.experiment };
  const results: ExperimentResult[] = [];
  const total = o.methods.length * o.seeds.length;
  for (const seed of o.seeds) {
    for (const method of o.methods) {
      o.onRunStart?.(method, seed, results.length, total);
      const result = await runExperiment({ ...settings, ...o.hooks, model: o.model, method, seed });
      results.push(result);
      o.onRunEnd?.(result);
    }
  }
  const summary = summarize(results);
  const context = [
    `Base model: ${o.modelNote}. Seeds: ${o.seeds.join(', ')}. Batch ${settings.batchSize}, lr ${settings.lr}, ` +
      `${settings.loraRank === 0 ? 'full fine-tuning' : `LoRA rank ${settings.loraRank}`}, ${settings.judgeVotes} judge votes per turn, ` +
      `judge error rate ${settings.judgeErrorRate}. Score: share of ${settings.evalSamples} reply(ies) per held-out problem and user ` +
      `accepted by the user's rubric (src/sim/rubrics.ts, version ${RUBRIC_VERSION}), mean of the student and the teacher.`,
  ].join(' ');
  const markdown = markdownReport(summary, o.headline, context);
  mkdirSync(o.outDir, { recursive: true });
  const files = {
    json: join(o.outDir, 'personalize.json'),
    markdown: join(o.outDir, 'personalize.md'),
    png: join(o.outDir, 'personalize.png'),
  };
  // Each measurement's probe verdicts as one string of 0s and 1s (probe order), not one line each.
  const compact = results.map((r) => ({
    ...r,
    points: r.points.map((p) => ({ ...p, outcomes: p.outcomes.map((ok) => (ok ? '1' : '0')).join('') })),
  }));
  writeFileSync(
    files.json,
    `${JSON.stringify(
      {
        settings: {
          ...settings,
          model: o.modelNote,
          seeds: o.seeds,
          methods: o.methods,
          rubricVersion: RUBRIC_VERSION,
        },
        summary,
        results: compact,
      },
      null,
      2,
    )}\n`,
  );
  writeFileSync(files.markdown, markdown);
  writeFileSync(files.png, plotScores(summary, 'PERSONALIZATION SCORE'));
  return { summary, results, markdown, files };
}
