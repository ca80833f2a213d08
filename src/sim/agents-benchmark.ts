// The agents benchmark (the reference's Table 4 analog): integrated (outcome + PRM) and outcome-only
// step rewards, each for every seed, on the same cached base model; the success rate on held-out
// arithmetic tool-call tasks per reward and step (mean and spread over seeds), environment steps
// per second, and the table (markdown, JSON) and plot under the output folder.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StepReward } from '../learn/steps.js';
import {
  DEFAULT_AGENTS_EXPERIMENT,
  runAgentsExperiment,
  type AgentsExperimentOptions,
  type AgentsExperimentResult,
  type Throughput,
} from './agents-experiment.js';
import { plotSeries } from './plot.js';
import { spread, type Spread } from './report.js';

export interface AgentsBenchmarkOptions {
  model: string;
  /** What the base model is, for the report. */
  modelNote: string;
  rewards: StepReward[];
  seeds: number[];
  experiment: Partial<Omit<AgentsExperimentOptions, 'model' | 'reward' | 'seed'>>;
  outDir: string;
  /** Said in the report's first line (e.g. that this is a reduced run). */
  label: string;
  onRunStart?: (reward: StepReward, seed: number, index: number, total: number) => void;
  onRunEnd?: (result: AgentsExperimentResult) => void;
  hooks?: Pick<AgentsExperimentOptions, 'onPoint' | 'onRound'>;
}

export interface AgentsSummary {
  /** Step 0 of every run: the base policy (one value per seed and reward: the same greedy probes). */
  base: Spread;
  byReward: {
    reward: StepReward;
    /** By target step. */
    byStep: Record<number, Spread>;
    /** The learner's step at each measurement, per target (run order). */
    stepsReached: Record<number, number[]>;
    /** Steps per held-out episode, per target. */
    stepsPerEpisode: Record<number, Spread>;
    trainingSuccess: Spread;
  }[];
  /** Each seed's success rate per reward at the last measured step (the runs of one seed share their tasks). */
  perSeed: { seed: number; step: number; byReward: Partial<Record<StepReward, number>> }[];
  throughput: Throughput[];
  totalWallSeconds: number;
}

export function summarizeAgents(results: readonly AgentsExperimentResult[]): AgentsSummary {
  const rewards = [...new Set(results.map((r) => r.reward))];
  return {
    base: spread(results.flatMap((r) => r.points.filter((p) => p.target === 0).map((p) => p.successRate))),
    byReward: rewards.map((reward) => {
      const runs = results.filter((r) => r.reward === reward);
      // By the step each measurement was for; `stepsReached` says where the learner actually was.
      const targets = [...new Set(runs.flatMap((r) => r.points.map((p) => p.target)))].sort((a, b) => a - b);
      const byStep: Record<number, Spread> = {};
      const stepsReached: Record<number, number[]> = {};
      const stepsPerEpisode: Record<number, Spread> = {};
      for (const target of targets) {
        const points = runs.flatMap((r) => r.points.filter((p) => p.target === target));
        byStep[target] = spread(points.map((p) => p.successRate));
        stepsReached[target] = points.map((p) => p.step);
        stepsPerEpisode[target] = spread(points.map((p) => p.stepsPerEpisode));
      }
      const trainingSuccess = spread(runs.map((r) => r.trainingSuccessRate));
      return { reward, byStep, stepsReached, stepsPerEpisode, trainingSuccess };
    }),
    perSeed: perSeedAtLastStep(results),
    throughput: results.flatMap((r) => r.throughput),
    totalWallSeconds: results.reduce((a, r) => a + r.wallSeconds, 0),
  };
}

function perSeedAtLastStep(results: readonly AgentsExperimentResult[]): AgentsSummary['perSeed'] {
  const step = Math.max(0, ...results.flatMap((r) => r.points.map((p) => p.target)));
  return [...new Set(results.map((r) => r.seed))].map((seed) => {
    const byReward: Partial<Record<StepReward, number>> = {};
    for (const r of results.filter((x) => x.seed === seed)) {
      const point = r.points.find((p) => p.target === step);
      if (point) byReward[r.reward] = point.successRate;
    }
    return { seed, step, byReward };
  });
}

const NAMES: Record<StepReward, string> = { integrated: 'integrated (outcome + PRM)', outcome: 'outcome only' };

export function agentsMarkdown(s: AgentsSummary, context: string, label: string): string {
  const steps = [...new Set(s.byReward.flatMap((r) => Object.keys(r.byStep).map(Number)))].sort((a, b) => a - b);
  const cell = (v: Spread | undefined) =>
    v === undefined ? '' : `${v.mean.toFixed(3)} ± ${v.std.toFixed(3)} [${v.min.toFixed(2)}, ${v.max.toFixed(2)}]`;
  const lines = [
    '# Agents benchmark: integrated vs outcome-only step rewards (Table 4 analog)',
    '',
    label,
    '',
    context,
    '',
    `Held-out success rate, mean ± sample std over seeds [min, max]; base (step 0): ${cell(s.base)}.`,
    '',
    `| reward | ${steps.map((n) => `step ${n}`).join(' | ')} | training episodes solved |`,
    `| --- | ${steps.map(() => '---').join(' | ')} | --- |`,
    ...s.byReward.map(
      (r) => `| ${NAMES[r.reward]} | ${steps.map((n) => cell(r.byStep[n])).join(' | ')} | ${cell(r.trainingSuccess)} |`,
    ),
    '',
    'Steps (assistant turns) per held-out episode, mean ± std over seeds:',
    '',
    `| reward | ${steps.map((n) => `step ${n}`).join(' | ')} |`,
    `| --- | ${steps.map(() => '---').join(' | ')} |`,
    ...s.byReward.map(
      (r) =>
        `| ${NAMES[r.reward]} | ${steps.map((n) => `${r.stepsPerEpisode[n]?.mean.toFixed(2)} ± ${r.stepsPerEpisode[n]?.std.toFixed(2)}`).join(' | ')} |`,
    ),
    '',
    ...overshoots(s),
    ...verdict(s),
    ...pairedGaps(s),
    '',
    '## Environment throughput (tool-call, base policy, side turns at the serving temperature)',
    '',
    '| --parallel | episodes | steps | steps/s |',
    '| --- | --- | --- | --- |',
    ...s.throughput.map((t) => `| ${t.parallel} | ${t.episodes} | ${t.steps} | ${t.stepsPerSecond.toFixed(2)} |`),
    '',
    `Total wall time of the runs: ${(s.totalWallSeconds / 60).toFixed(1)} min.`,
    '',
  ];
  return lines.join('\n');
}

/** Measurements taken past their target step (a round of episodes carried the learner further). */
function overshoots(s: AgentsSummary): string[] {
  const notes = s.byReward.flatMap((r) =>
    Object.entries(r.stepsReached)
      .filter(([target, reached]) => reached.some((n) => n !== Number(target)))
      .map(([target, reached]) => `${NAMES[r.reward]} at step ${target}: reached ${reached.join(', ')}`),
  );
  return notes.length === 0 ? [] : [`Measured past the target step: ${notes.join('; ')}.`, ''];
}

/** The issue's targets at the last measured step: both above the base, integrated ahead by more than the spread. */
function verdict(s: AgentsSummary): string[] {
  const integrated = s.byReward.find((r) => r.reward === 'integrated');
  const outcome = s.byReward.find((r) => r.reward === 'outcome');
  if (integrated === undefined || outcome === undefined) return [];
  const last = Math.max(...Object.keys(integrated.byStep).map(Number));
  const a = integrated.byStep[last],
    b = outcome.byStep[last];
  if (a === undefined || b === undefined || last === 0) return [];
  const yes = (ok: boolean) => (ok ? 'yes' : 'no');
  const gap = a.mean - b.mean;
  const seedSpread = Math.max(a.std, b.std);
  return [
    `Targets at step ${last}: integrated above the base ${yes(a.mean > s.base.mean)} ` +
      `(${a.mean.toFixed(3)} vs ${s.base.mean.toFixed(3)}); outcome-only above the base ${yes(b.mean > s.base.mean)} ` +
      `(${b.mean.toFixed(3)}); integrated ahead of outcome-only by more than the seed spread ` +
      `${yes(gap > seedSpread)} ` +
      `(gap ${gap.toFixed(3)}, larger std ${seedSpread.toFixed(3)}).`,
  ];
}

/**
 * Per seed: both rewards' runs of one seed train on the same tasks and start from the same episodes
 * (seeded rollouts), so their difference is a paired comparison beside the target's unpaired one.
 */
function pairedGaps(s: AgentsSummary): string[] {
  const pairs = s.perSeed.filter((p) => p.byReward.integrated !== undefined && p.byReward.outcome !== undefined);
  if (pairs.length === 0) return [];
  const gaps = pairs.map((p) => p.byReward.integrated! - p.byReward.outcome!);
  const g = spread(gaps);
  return [
    '',
    `Per seed at step ${pairs[0]!.step} (the two runs of a seed share their training tasks and first episodes):`,
    '',
    '| seed | integrated | outcome only | integrated - outcome |',
    '| --- | --- | --- | --- |',
    ...pairs.map(
      (p, i) =>
        `| ${p.seed} | ${p.byReward.integrated!.toFixed(3)} | ${p.byReward.outcome!.toFixed(3)} | ${gaps[i]!.toFixed(3)} |`,
    ),
    '',
    `Paired difference: ${g.mean.toFixed(3)} ± ${g.std.toFixed(3)} (mean ± sample std over seeds); ` +
      `integrated ahead in ${gaps.filter((x) => x > 0).length} of ${gaps.length} seeds.`,
  ];
}

export async function runAgentsBenchmark(o: AgentsBenchmarkOptions) {
  const settings = { ...DEFAULT_AGENTS_EXPERIMENT, ...o.experiment };
  const results: AgentsExperimentResult[] = [];
  const total = o.rewards.length * o.seeds.length;
  for (const seed of o.seeds) {
    for (const reward of o.rewards) {
      o.onRunStart?.(reward, seed, results.length, total);
      // Throughput once, on the first run's base policy.
      const throughputAt = results.length === 0 ? settings.throughputAt : [];
      const result = await runAgentsExperiment({ ...settings, ...o.hooks, throughputAt, model: o.model, reward, seed });
      results.push(result);
      o.onRunEnd?.(result);
    }
  }
  const summary = summarizeAgents(results);
  const measuredSteps = Array.from(
    { length: Math.floor(settings.steps / settings.evalEvery) + 1 },
    (_, i) => i * settings.evalEvery,
  );
  const context =
    `Base model: ${o.modelNote}. Seeds: ${o.seeds.join(', ')}. serve --method steps, batch ${settings.batchSize}, ` +
    `lr ${settings.lr}, full fine-tuning, G = ${settings.rollouts} rollouts per task, ` +
    `${settings.judgeVotes} PRM votes ` +
    `per step, judge error rate ${settings.judgeErrorRate}. Tasks: ${
      settings.minOperations > 1
        ? `the templates of ${settings.minOperations} or more operations (one calculator call each)`
        : 'every template (1 to 4 operations, one calculator call each)'
    }. Success: the final answer equals the task's; ` +
    `${settings.evalTasks} held-out tasks x ${settings.evalSamples} episodes at the serving temperature (1), ` +
    `measured at steps ${measuredSteps.join(', ')}.`;
  const markdown = agentsMarkdown(summary, context, o.label);
  mkdirSync(o.outDir, { recursive: true });
  const files = {
    json: join(o.outDir, 'agents.json'),
    markdown: join(o.outDir, 'agents.md'),
    png: join(o.outDir, 'agents.png'),
  };
  writeFileSync(
    files.json,
    `${JSON.stringify(
      {
        label: o.label,
        settings: { ...settings, model: o.modelNote, seeds: o.seeds, rewards: o.rewards },
        summary,
        results,
      },
      null,
      2,
    )}\n`,
  );
  writeFileSync(files.markdown, markdown);
  const colors = { integrated: [30, 150, 70], outcome: [220, 120, 30] } as const;
  const series = summary.byReward.map((r) => ({
    name: r.reward === 'integrated' ? 'INTEGRATED' : 'OUTCOME ONLY',
    color: [...colors[r.reward]] as [number, number, number],
    byStep: r.byStep,
  }));
  writeFileSync(files.png, plotSeries(series, 'HELD-OUT SUCCESS RATE', 'RATE'));
  return { summary, results, markdown, files };
}
