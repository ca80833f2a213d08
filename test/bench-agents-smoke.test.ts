// The agents benchmark end to end at its smallest (issue 18 item 4's CI smoke): the small
// `agents-smoke` base model is pre-trained on calculator traces (or reused from
// .cache/sim-models), then one seed of each reward (integrated, outcome) trains two steps through
// serve, the simulated PRM judge and the environment runner, with held-out measurements at steps
// 0, 1 and 2 and a throughput pass. Checks that the result is well formed, not that it learned
// (two steps of four samples prove nothing about learning; bench:agents measures that).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runAgentsBenchmark } from '../src/sim/agents-benchmark.js';
import { DEFAULT_AGENTS_EXPERIMENT } from '../src/sim/agents-experiment.js';
import { simBaseModel } from '../src/sim/pretrain.js';

test('bench:agents runs end to end at its smallest and writes a well-formed table, JSON and plot', {
  timeout: 300_000,
}, async () => {
  const model = simBaseModel('agents-smoke', '.cache/sim-models');
  const out = mkdtempSync(join(tmpdir(), 'openclaw-rl-agents-smoke-'));
  try {
    const { summary, results, files } = await runAgentsBenchmark({
      model: model.dir,
      modelNote: 'agents-smoke',
      rewards: ['integrated', 'outcome'],
      seeds: [1],
      experiment: {
        ...DEFAULT_AGENTS_EXPERIMENT,
        steps: 2,
        evalEvery: 1,
        rollouts: 2,
        tasksPerRound: 1,
        evalTasks: 8,
        evalSamples: 1,
        batchSize: 4,
        throughputAt: [8],
      },
      outDir: out,
      label: 'Smoke run.',
    });
    assert.equal(results.length, 2);
    for (const r of results) {
      // Measured at step 0 (the base), then at or after each target step, on the version it reached.
      assert.equal(r.points.length, 3);
      r.points.forEach((p, i) => {
        assert.equal(p.target, i);
        assert.ok(p.step >= i, `measurement ${i} at step ${p.step}`);
      });
      assert.equal(r.points[0]!.step, 0);
      for (const p of r.points) {
        assert.ok(p.successRate >= 0 && p.successRate <= 1);
        assert.equal(p.outcomes.length, 8, 'one digit per held-out task');
        assert.equal(p.successRate, [...p.outcomes].reduce((a, c) => a + Number(c), 0) / 8);
      }
      assert.ok(r.trainingEpisodes >= 2);
      assert.ok(r.samplesTrained >= 2 * 4, `two batches of 4 trained, got ${r.samplesTrained}`);
    }
    assert.ok(Number.isFinite(summary.base.mean) && summary.base.n === 2, 'the base success rate is measured');
    assert.deepEqual(
      summary.byReward.map((r) => r.reward),
      ['integrated', 'outcome'],
    );
    assert.equal(summary.throughput.length, 1);
    assert.ok(summary.throughput[0]!.stepsPerSecond > 0);
    const json = JSON.parse(readFileSync(files.json, 'utf8')) as { summary: { base: { n: number } } };
    assert.equal(json.summary.base.n, 2);
    assert.match(readFileSync(files.markdown, 'utf8'), /\| integrated \(outcome \+ PRM\) \| /);
    assert.deepEqual([...readFileSync(files.png).subarray(1, 4)], [0x50, 0x4e, 0x47]);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
