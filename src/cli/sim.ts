// openclaw-rl sim <pretrain|judge|run|bench|demo> [options]
//
//   openclaw-rl sim pretrain                      # the sim base model (cached), prints its folder
//   openclaw-rl sim judge --port 8001             # the simulated judge, for serve --judge-url
//   openclaw-rl sim run --method combine --steps 16
//   openclaw-rl sim bench --seeds 1,2,3 --out bench/results
//   openclaw-rl sim demo
//
// The personalization benchmark (src/sim): simulated users with hidden preferences talk to
// `serve` over HTTP, a simulated judge scores their next states, and the score is measured as
// the policy learns. Only wiring here.

import { resolve } from 'node:path';
import { runBenchmark } from '../sim/benchmark.js';
import { runDemo } from '../sim/demo.js';
import { PERSONAL_METHODS as METHODS, type PersonalMethod as Method } from '../learn/methods.js';
import { DEFAULT_EXPERIMENT, runExperiment, type ExperimentOptions } from '../sim/experiment.js';
import { startSimJudge } from '../sim/judge-server.js';
import { PRETRAIN_PRESETS, simBaseModel, type PretrainProgress } from '../sim/pretrain.js';
import { bar, Console } from '../sim/terminal.js';
import { CliError, numberFlag, parseFlags } from './args.js';

const USAGE = `usage: openclaw-rl sim <command> [options]

commands:
  pretrain   pre-train the sim base model on synthetic homework dialogues (cached); prints its folder
  judge      serve the simulated judge (OpenAI-compatible) for serve --judge-url
  run        one learning run: serve + simulated users + judge, score at every measured step
  bench      the personalization benchmark: every method x seed, table and plot
  demo       watch a simulated student and teacher teach the agent, live

model:
  --preset P          ${Object.keys(PRETRAIN_PRESETS).join(', ')} (default sim)
  --cache DIR         where pre-trained sim models are kept (default .cache/sim-models)
  --model DIR         use this model folder instead of the sim base model

run, bench, demo:
  --method M          rl, opd or combine (run, demo; default combine)
  --methods LIST      bench: default rl,opd,combine
  --seed N            run, demo (default 1); --seeds LIST for bench (default 1,2,3)
  --steps N           training steps (default ${DEFAULT_EXPERIMENT.steps}; demo 8)
  --eval-every N      measure the score every N steps (default ${DEFAULT_EXPERIMENT.evalEvery})
  --batch-size N      default ${DEFAULT_EXPERIMENT.batchSize}
  --lr X              default ${DEFAULT_EXPERIMENT.lr}
  --lora-rank R       default ${DEFAULT_EXPERIMENT.loraRank} (full fine-tuning)
  --judge-votes M     default ${DEFAULT_EXPERIMENT.judgeVotes}
  --error-rate X      share of wrong judge votes (default ${DEFAULT_EXPERIMENT.judgeErrorRate})
  --concurrency N     conversations at once (default ${DEFAULT_EXPERIMENT.concurrency})
  --eval-samples N    replies per held-out problem and user (default ${DEFAULT_EXPERIMENT.evalSamples})
  --threads N         BLAS threads of serve (default ${DEFAULT_EXPERIMENT.threads})
  --out DIR           bench: results folder (default bench/results)

judge:
  --port N            default 0 (a free port, printed)`;

const FLAGS = {
  preset: { type: 'string' },
  cache: { type: 'string' },
  model: { type: 'string' },
  method: { type: 'string' },
  methods: { type: 'string' },
  seed: { type: 'string' },
  seeds: { type: 'string' },
  steps: { type: 'string' },
  'eval-every': { type: 'string' },
  'batch-size': { type: 'string' },
  lr: { type: 'string' },
  'lora-rank': { type: 'string' },
  'judge-votes': { type: 'string' },
  'error-rate': { type: 'string' },
  concurrency: { type: 'string' },
  'eval-samples': { type: 'string' },
  threads: { type: 'string' },
  out: { type: 'string' },
  port: { type: 'string' },
} as const;

export async function runSim(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const v = parseFlags(rest, FLAGS, USAGE);
  if (v.help || command === undefined || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'judge') return serveJudge(v);
  if (!['pretrain', 'run', 'bench', 'demo'].includes(command))
    throw new CliError(`unknown sim command "${command}"\n\n${USAGE}`);
  // Every flag is checked before the model, whose pre-training takes minutes.
  const experiment = experimentFlags(v, command === 'demo' ? { steps: 8, concurrency: 4, evalSamples: 1 } : {});
  const seed = numberFlag(v, 'seed', { integer: true, min: 0 }) ?? 1;
  const chosen = method(v.method);
  const seeds = list(v.seeds as string | undefined, '1,2,3').map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n) || n < 0) throw new CliError(`--seeds takes integers, got "${s}"`);
    return n;
  });
  const methods = list(v.methods as string | undefined, METHODS.join(',')).map(method);
  const ui = new Console(process.stderr);
  const model = baseModel(v, ui);
  if (command === 'pretrain') {
    console.log(model.dir);
    return 0;
  }
  if (command === 'demo')
    return runDemo({ ...DEFAULT_EXPERIMENT, ...experiment, model: model.dir, method: chosen, seed });
  if (command === 'run') {
    const result = await runExperiment({
      ...DEFAULT_EXPERIMENT,
      ...experiment,
      model: model.dir,
      method: chosen,
      seed,
      onPoint: (p) =>
        ui.line(
          `step ${String(p.step).padStart(3)}  score ${p.score.toFixed(3)}  (student ${p.byUser.student.toFixed(2)}, teacher ${p.byUser.teacher.toFixed(2)})`,
        ),
      onStep: (s) =>
        ui.setStatus(
          `trained step ${s.step}: ${s.samples} samples, reward ${s.rewardMean.toFixed(2)}, ${s.hints} hints, ${s.trainSeconds.toFixed(1)} s`,
        ),
    });
    ui.endStatus();
    console.log(JSON.stringify(result, null, 2));
    return 0;
  }
  const out = await runBenchmark({
    model: model.dir,
    methods,
    seeds,
    headline: [8, 16].filter((s) => s <= (experiment.steps ?? DEFAULT_EXPERIMENT.steps)),
    experiment,
    outDir: resolve((v.out as string | undefined) ?? 'bench/results'),
    modelNote: model.note,
    onRunStart: (m, runSeed, i, total) => ui.line(`run ${i + 1}/${total}: ${m}, seed ${runSeed}`),
    onRunEnd: (r) =>
      ui.line(
        `  ${r.method} seed ${r.seed}: ${r.points.map((p) => `${p.step}:${p.score.toFixed(2)}`).join('  ')}  (${(r.wallSeconds / 60).toFixed(1)} min)`,
      ),
    hooks: {
      onPoint: (p) => ui.setStatus(`  step ${p.step}: ${p.score.toFixed(2)}`),
      onProbe: (d, t) => ui.setStatus(`  measuring ${bar(d / t, 20)} ${d}/${t}`),
    },
  });
  ui.endStatus();
  console.log(out.markdown);
  console.log(`wrote ${out.files.json}, ${out.files.markdown}, ${out.files.png}`);
  return 0;
}

function baseModel(v: Record<string, unknown>, ui: Console): { dir: string; note: string } {
  if (typeof v.model === 'string') return { dir: resolve(v.model), note: v.model };
  const preset = (v.preset as string | undefined) ?? 'sim';
  const started = performance.now();
  let nll = '';
  const model = simBaseModel(preset, (v.cache as string | undefined) ?? '.cache/sim-models', (p: PretrainProgress) => {
    if (p.heldOutNll !== undefined) nll = ` held-out loss ${p.heldOutNll.toFixed(3)}`;
    const eta = ((performance.now() - started) / 1000 / p.step) * (p.steps - p.step);
    ui.setStatus(
      `pre-training the sim base model ${bar(p.step / p.steps)} ${p.step}/${p.steps}${nll}  ${Math.round(p.tokensPerSecond)} tok/s  ~${Math.ceil(eta / 60)} min left`,
      p.step % 25 === 0,
    );
  });
  ui.endStatus();
  ui.line(
    model.cached
      ? `sim base model (cached): ${model.dir}`
      : `pre-trained the sim base model in ${((performance.now() - started) / 60000).toFixed(1)} min: ${model.dir}`,
  );
  const r = model.record;
  const shape = r.options.shape;
  return {
    dir: model.dir,
    note: `sim preset "${preset}" (${shape.numLayers} layers, hidden ${shape.hiddenSize}, vocabulary ${shape.vocabSize}; pre-trained on ${r.options.corpus.conversations} synthetic conversations, ${r.steps} steps in ${(r.seconds / 60).toFixed(1)} min, held-out loss ${r.heldOutNll.toFixed(3)})`,
  };
}

function experimentFlags(v: Record<string, unknown>, defaults: Partial<ExperimentOptions>): Partial<ExperimentOptions> {
  const o: Partial<ExperimentOptions> = { ...defaults };
  const set = <K extends keyof ExperimentOptions>(key: K, value: number | undefined) => {
    if (value !== undefined) (o as Record<string, unknown>)[key] = value;
  };
  set('steps', numberFlag(v, 'steps', { integer: true, min: 1 }));
  set('evalEvery', numberFlag(v, 'eval-every', { integer: true, min: 1 }));
  set('batchSize', numberFlag(v, 'batch-size', { integer: true, min: 1 }));
  set('lr', numberFlag(v, 'lr', { min: 0 }));
  set('loraRank', numberFlag(v, 'lora-rank', { integer: true, min: 0 }));
  set('judgeVotes', numberFlag(v, 'judge-votes', { integer: true, min: 1 }));
  set('judgeErrorRate', numberFlag(v, 'error-rate', { min: 0, max: 1 }));
  set('concurrency', numberFlag(v, 'concurrency', { integer: true, min: 1 }));
  set('evalSamples', numberFlag(v, 'eval-samples', { integer: true, min: 1 }));
  set('threads', numberFlag(v, 'threads', { integer: true, min: 1 }));
  const steps = o.steps ?? DEFAULT_EXPERIMENT.steps,
    every = o.evalEvery ?? DEFAULT_EXPERIMENT.evalEvery;
  if (steps % every !== 0) throw new CliError(`--steps ${steps} must be a multiple of --eval-every ${every}`);
  return o;
}

function method(value: unknown): Method {
  const m = (value as string | undefined) ?? 'combine';
  if (!(METHODS as readonly string[]).includes(m))
    throw new CliError(`method must be one of ${METHODS.join(', ')}, got "${m}"`);
  return m as Method;
}

function list(value: string | undefined, fallback: string): string[] {
  return (value ?? fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

async function serveJudge(v: Record<string, unknown>): Promise<number> {
  const judge = await startSimJudge({
    port: numberFlag(v, 'port', { integer: true, min: 0, max: 65535 }) ?? 0,
    errorRate: numberFlag(v, 'error-rate', { min: 0, max: 1 }) ?? DEFAULT_EXPERIMENT.judgeErrorRate,
    seed: numberFlag(v, 'seed', { integer: true, min: 0 }) ?? 0,
  });
  console.log(
    `simulated judge on ${judge.url} (model "${judge.model}"); use serve --judge-url ${judge.url} --judge-model ${judge.model}`,
  );
  await new Promise<void>((done) => {
    const stop = () => {
      process.off('SIGINT', stop).off('SIGTERM', stop);
      done();
    };
    process.on('SIGINT', stop).on('SIGTERM', stop);
  });
  await judge.close();
  return 0;
}
