// The agents benchmark (issue 18, the reference's Table 4 analog): the project's tool-call base
// model (pre-trained here on calculator traces, cached in .cache/sim-models/) trained through
// `serve --method steps` with integrated and with outcome-only rewards, 3 seeds each, the success
// rate on held-out arithmetic tasks at fixed steps, and environment steps per second at
// --parallel 8 and 32. Table, JSON and plot in bench/results/agents.{md,json,png}.
//
//   npm run bench:agents
//   AGENTS_SEEDS=1 AGENTS_STEPS=4 AGENTS_EVAL_EVERY=2 npm run bench:agents     # a reduced run
//
// Knobs (environment): AGENTS_SEEDS (how many, default 3), AGENTS_FIRST_SEED (1), AGENTS_STEPS (128),
// AGENTS_EVAL_EVERY (32),
// AGENTS_ROLLOUTS (G, 4), AGENTS_EVAL_TASKS (128),
// AGENTS_EVAL_SAMPLES (episodes per held-out task, 8), AGENTS_BATCH (16), AGENTS_LR (1e-4),
// AGENTS_JUDGE_ERROR (0.1), AGENTS_JUDGE_VOTES (3), AGENTS_MIN_OPERATIONS (tasks of at least that many
// calculator steps, 4), AGENTS_PRESET (agents), AGENTS_OUT (bench/results),
// AGENTS_LABEL (a line at the top of the report, e.g. that the run is reduced).

import { runAgentsBenchmark } from '../src/sim/agents-benchmark.js';
import { DEFAULT_AGENTS_EXPERIMENT } from '../src/sim/agents-experiment.js';
import { simBaseModel } from '../src/sim/pretrain.js';

function knob(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a number >= 0, got "${text}"`);
  return value;
}

const d = DEFAULT_AGENTS_EXPERIMENT;
const preset = process.env.AGENTS_PRESET ?? 'agents';
const firstSeed = knob('AGENTS_FIRST_SEED', 1);
const seeds = Array.from({ length: knob('AGENTS_SEEDS', 3) }, (_, i) => firstSeed + i);
const experiment = {
  steps: knob('AGENTS_STEPS', d.steps),
  evalEvery: knob('AGENTS_EVAL_EVERY', d.evalEvery),
  rollouts: knob('AGENTS_ROLLOUTS', d.rollouts),
  evalTasks: knob('AGENTS_EVAL_TASKS', d.evalTasks),
  evalSamples: knob('AGENTS_EVAL_SAMPLES', d.evalSamples),
  batchSize: knob('AGENTS_BATCH', d.batchSize),
  lr: knob('AGENTS_LR', d.lr),
  judgeErrorRate: knob('AGENTS_JUDGE_ERROR', d.judgeErrorRate),
  judgeVotes: knob('AGENTS_JUDGE_VOTES', d.judgeVotes),
  minOperations: knob('AGENTS_MIN_OPERATIONS', d.minOperations),
  throughputAt: [8, 32],
};
const started = performance.now();
const log = (text: string) =>
  process.stderr.write(`[bench:agents ${((performance.now() - started) / 1000).toFixed(0)}s] ${text}\n`);

log(`base model (preset ${preset}): pre-training or reusing .cache/sim-models/ ...`);
const base = simBaseModel(preset, '.cache/sim-models', (p) => {
  if (p.heldOutNll !== undefined)
    log(`pre-training step ${p.step}/${p.steps}, held-out NLL ${p.heldOutNll.toFixed(3)}`);
});
log(`base model ${base.dir} (${base.cached ? 'cached' : 'pre-trained now'})`);
const out = await runAgentsBenchmark({
  model: base.dir,
  modelNote:
    `preset "${preset}" (src/sim/pretrain.ts, ${base.record.steps} pre-training steps on ` +
    `${base.record.options.toolCorpus?.traces ?? 0} calculator traces, ` +
    `held-out NLL ${base.record.heldOutNll.toFixed(3)})`,
  rewards: ['integrated', 'outcome'],
  seeds,
  experiment,
  outDir: process.env.AGENTS_OUT ?? 'bench/results',
  label: process.env.AGENTS_LABEL ?? 'Full run: `npm run bench:agents` with its defaults.',
  onRunStart: (reward, seed, i, total) => log(`run ${i + 1}/${total}: ${reward}, seed ${seed}`),
  onRunEnd: (r) =>
    log(
      `${r.reward} seed ${r.seed}: ${r.points.map((p) => `step ${p.step} ${p.successRate.toFixed(3)}`).join(', ')} ` +
        `(${r.trainingEpisodes} training episodes, ${r.wallSeconds.toFixed(0)} s)`,
    ),
  hooks: {
    onPoint: (p) => log(`  step ${p.step} (version ${p.version}): held-out success ${p.successRate.toFixed(3)}`),
  },
});
process.stdout.write(out.markdown);
log(`wrote ${out.files.markdown}, ${out.files.json}, ${out.files.png}`);
