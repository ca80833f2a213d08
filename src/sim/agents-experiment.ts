// One run of the agents benchmark (the reference's Table 4 analog): `serve --method steps` with
// integrated or outcome-only rewards and the simulated PRM judge as separate endpoints, the
// environment runner playing arithmetic tool-call tasks against it over HTTP (G rollouts per task,
// outcomes through /v1/feedback), and the success rate on held-out tasks measured at step 0 and
// every `evalEvery` steps: at the serving temperature (the policy the agent runs with; greedy
// decoding would hide the base model's mix of operators), as side turns (never trained on), while
// the learner is idle.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentClient } from '../env/agent-client.js';
import { runEnvironment, type RunSummary } from '../env/runner.js';
import { arithmeticKind } from '../env/tool-call.js';
import type { StepReward } from '../learn/steps.js';
import { ServeClient, type AdminStatus } from './client.js';
import { startSimJudge } from './judge-server.js';
import { prmPolicy } from './prm-judge-policy.js';
import { hash32 } from './random.js';
import { startServe, type ServeProcess } from './serve-process.js';

export interface AgentsExperimentOptions {
  model: string;
  reward: StepReward;
  seed: number;
  steps: number;
  evalEvery: number;
  /** Rollouts per task (the group size G). */
  rollouts: number;
  /**
   * Training tasks played between two looks at the learner. A task's group is released for
   * training once all its rollouts have ended, so with one task a round no batch trains while the
   * round plays: every round is played by one policy version, whatever the machine's load.
   */
  tasksPerRound: number;
  evalTasks: number;
  /** Episodes per held-out task at each measurement. */
  evalSamples: number;
  batchSize: number;
  lr: number;
  judgeVotes: number;
  judgeErrorRate: number;
  parallel: number;
  maxSteps: number;
  /** Tasks of at least this many operations (calculator steps) only: 1 is the whole mix. */
  minOperations: number;
  maxTokens: number;
  threads: number;
  /** Also measure environment steps per second at these --parallel values (on the base policy). */
  throughputAt: number[];
  onPoint?: (p: SuccessPoint) => void;
  onRound?: (status: AdminStatus) => void;
}

export const DEFAULT_AGENTS_EXPERIMENT: Omit<AgentsExperimentOptions, 'model' | 'reward' | 'seed'> = {
  // 128 steps: the gap between the rewards grows with training (session 15, seeds 1-3: 0.005 at step 32,
  // 0.023 at 64, 0.096 at 96, 0.073 at 128), and at 64 success is still under 0.3.
  steps: 128,
  evalEvery: 32,
  rollouts: 4,
  tasksPerRound: 1,
  evalTasks: 128,
  evalSamples: 8,
  batchSize: 16,
  lr: 1e-4,
  judgeVotes: 3,
  judgeErrorRate: 0.1,
  parallel: 8,
  maxSteps: 6,
  // Four-step tasks: where the outcome alone is sparsest and a step's vote is news (docs/agents.md,
  // Results; 1 is the whole mix, 3 the earlier default).
  minOperations: 4,
  maxTokens: 64,
  threads: 2,
  throughputAt: [],
};

export interface SuccessPoint {
  /** The step the measurement was for (0, evalEvery, ...). */
  target: number;
  /** The step the learner had reached: the target, or past it when a round of episodes carried it further. */
  step: number;
  version: number;
  successRate: number;
  /** Mean steps (assistant turns) of a held-out episode: a policy that stalls or loops takes more. */
  stepsPerEpisode: number;
  /** One digit per held-out task, in task order: how many of its episodes solved it. */
  outcomes: string;
}

export interface Throughput {
  parallel: number;
  episodes: number;
  steps: number;
  stepsPerSecond: number;
}

export interface AgentsExperimentResult {
  reward: StepReward;
  seed: number;
  points: SuccessPoint[];
  /** Training episodes played and their success rate (sampled at the serving temperature). */
  trainingEpisodes: number;
  trainingSuccessRate: number;
  trainingSeconds: number;
  samplesTrained: number;
  judgeVotes: { eval: number; hint: number; wrong: number; unreadable: number };
  throughput: Throughput[];
  wallSeconds: number;
}

export async function runAgentsExperiment(o: AgentsExperimentOptions): Promise<AgentsExperimentResult> {
  const t0 = performance.now();
  const judge = await startSimJudge({ policy: prmPolicy, errorRate: o.judgeErrorRate, seed: o.seed });
  const work = mkdtempSync(join(tmpdir(), 'openclaw-rl-agents-'));
  const adminKey = `agents-${hash32(work).toString(16)}`;
  let serve: ServeProcess | null = null;
  try {
    serve = await startServe([
      ...['--model', o.model, '--data', join(work, 'serve-data'), '--admin-key', adminKey],
      ...['--threads', String(o.threads), '--method', 'steps', '--reward', o.reward, '--opd-weight', '0'],
      ...['--batch-size', String(o.batchSize), '--lora-rank', '0', '--lr', String(o.lr), '--session-idle', '86400'],
      ...['--judge-url', judge.url, '--judge-model', judge.model, '--judge-votes', String(o.judgeVotes)],
    ]);
    const admin = new ServeClient(serve.url, serve.root, adminKey);
    // Every request is seeded. Held-out passes alike (common random numbers): every measurement of
    // every run draws the same numbers for the same task, rollout and step. Training rollouts by the
    // run's seed: a seed replays its run, and the two rewards' runs of one seed start from the same
    // episodes (their first round is played by the same base policy with the same numbers).
    const client = (turnType: 'main' | 'side') =>
      new AgentClient({ url: serve!.url, maxTokens: o.maxTokens, turnType, seed: turnType === 'side' ? 1 : o.seed });
    let passes = 0;
    const play = (
      split: 'train' | 'heldout',
      c: AgentClient,
      tasks: number,
      rollouts: number,
      seed: number,
      parallel: number,
    ): Promise<RunSummary> =>
      runEnvironment({
        kind: arithmeticKind(split, o.minOperations),
        client: c,
        out: join(work, `pass-${passes++}`),
        tasks,
        rollouts,
        parallel,
        maxSteps: o.maxSteps,
        seed,
      });

    const points: SuccessPoint[] = [];
    const measure = async (target: number) => {
      const before = await idle(admin, o.batchSize);
      // Held-out tasks are seed 0 of the held-out split, the same for every run and step.
      const summary = await play('heldout', client('side'), o.evalTasks, o.evalSamples, 0, o.parallel);
      const after = await admin.status();
      if (after.version !== before.version)
        throw new Error(`the policy changed from version ${before.version} to ${after.version} while it was measured`);
      const point = {
        target,
        step: before.steps,
        version: before.version,
        successRate: summary.successRate,
        stepsPerEpisode: summary.episodes === 0 ? 0 : summary.steps / summary.episodes,
        outcomes: summary.byTask.map((t) => String(Math.min(9, t.successes))).join(''),
      };
      points.push(point);
      o.onPoint?.(point);
      return before;
    };

    let status = await measure(0);
    const throughput: Throughput[] = [];
    for (const parallel of o.throughputAt) {
      const s = await play('heldout', client('side'), o.evalTasks, 2, 0, parallel);
      throughput.push({ parallel, episodes: s.episodes, steps: s.steps, stepsPerSecond: s.stepsPerSecond });
    }

    const training = { episodes: 0, successes: 0, ms: 0 };
    let round = 0;
    for (let target = o.evalEvery; target <= o.steps; target += o.evalEvery) {
      while (status.steps < target) {
        const started = performance.now();
        // Each run's seed has its own training tasks (seed * 1000 + round; see arithmeticKind).
        const s = await play('train', client('main'), o.tasksPerRound, o.rollouts, o.seed * 1000 + round++, o.parallel);
        if (s.failed > 0) throw new Error(`training episodes failed: ${s.failures.slice(0, 3).join('; ')}`);
        training.episodes += s.episodes;
        training.successes += Math.round(s.successRate * s.episodes);
        status = await idle(admin, o.batchSize);
        training.ms += performance.now() - started;
        o.onRound?.(status);
      }
      status = await measure(target);
    }
    return {
      reward: o.reward,
      seed: o.seed,
      points,
      trainingEpisodes: training.episodes,
      trainingSuccessRate: training.episodes === 0 ? 0 : training.successes / training.episodes,
      trainingSeconds: training.ms / 1000,
      samplesTrained: status.samples?.trained ?? 0,
      judgeVotes: { ...judge.votes },
      throughput,
      wallSeconds: (performance.now() - t0) / 1000,
    };
  } finally {
    await serve?.stop();
    await judge.close();
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Waits until everything sent so far is judged, grouped and trained as far as full batches go:
 * nothing closed or being judged, no step group waiting, less than a batch queued, the trainer idle.
 */
async function idle(admin: ServeClient, batchSize: number, timeoutMs = 600_000): Promise<AdminStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await admin.status();
    if (s.trainer?.state === 'failed') throw new Error(`the trainer failed: ${s.trainer.error}`);
    const q = s.queues;
    if (
      q !== undefined &&
      q.closedTurns === 0 &&
      q.judging === 0 &&
      (s.samples?.waiting ?? 0) === 0 &&
      q.samples < batchSize &&
      s.trainer?.state !== 'training'
    )
      return s;
    if (Date.now() > deadline) throw new Error(`serve did not settle within ${timeoutMs} ms: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
