// The agents benchmark's report: the spread over seeds per reward and step, the target's verdict,
// and the per-seed (paired) differences, from hand-made run results.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentsMarkdown, summarizeAgents } from '../src/sim/agents-benchmark.js';
import type { AgentsExperimentResult } from '../src/sim/agents-experiment.js';
import type { StepReward } from '../src/learn/steps.js';

function run(reward: StepReward, seed: number, rates: [number, number, number]): AgentsExperimentResult {
  return {
    reward,
    seed,
    points: rates.map((successRate, i) => ({
      target: 32 * i,
      step: 32 * i,
      version: i,
      successRate,
      stepsPerEpisode: 5,
      outcomes: '',
    })),
    trainingEpisodes: 100,
    trainingSuccessRate: 0.2,
    trainingSeconds: 10,
    samplesTrained: 1024,
    judgeVotes: { eval: 0, hint: 0, wrong: 0, unreadable: 0 },
    throughput: [],
    wallSeconds: 60,
  };
}

test('agents report: spread per reward, the verdict, and each seed paired with itself', () => {
  const results = [
    run('integrated', 1, [0.1, 0.3, 0.5]),
    run('outcome', 1, [0.1, 0.2, 0.3]),
    run('integrated', 2, [0.1, 0.3, 0.4]),
    run('outcome', 2, [0.1, 0.25, 0.45]),
  ];
  const s = summarizeAgents(results);
  const integrated = s.byReward.find((r) => r.reward === 'integrated')!;
  assert.ok(Math.abs(integrated.byStep[64]!.mean - 0.45) < 1e-12);
  assert.ok(Math.abs(integrated.byStep[64]!.std - Math.sqrt(0.005)) < 1e-12, 'sample std of 0.5 and 0.4');
  assert.deepEqual(
    s.perSeed.map((p) => [p.seed, p.step, p.byReward.integrated, p.byReward.outcome]),
    [
      [1, 64, 0.5, 0.3],
      [2, 64, 0.4, 0.45],
    ],
  );
  const md = agentsMarkdown(s, 'context', 'label');
  // Gap 0.45 - 0.375 = 0.075 against the larger std (outcome: 0.106): not met.
  assert.match(md, /by more than the seed spread no \(gap 0\.075, larger std 0\.106\)/);
  assert.match(md, /\| 1 \| 0\.500 \| 0\.300 \| 0\.200 \|/);
  assert.match(md, /\| 2 \| 0\.400 \| 0\.450 \| -0\.050 \|/);
  // Paired: mean of 0.2 and -0.05, sample std sqrt(((0.125)^2 * 2) / 1) = 0.177.
  assert.match(md, /Paired difference: 0\.075 ± 0\.177 .*integrated ahead in 1 of 2 seeds\./);
});
