// One benchmark run: the sim judge and `serve` (with a learning method) as separate endpoints,
// simulated users talking to it over HTTP, and the personalization score measured at step 0 and
// every `evalEvery` steps up to `steps`, on exactly those policy versions (see step-gate.ts).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PersonalMethod as Method } from '../learn/methods.js';
import { ServeClient, type AdminStatus } from './client.js';
import { converse, type ConversationEvent } from './conversation.js';
import { personalizationScore, type Score } from './evaluate.js';
import { startSimJudge, type VoteEvent } from './judge-server.js';
import { loadProblems } from './problems.js';
import { hash32, rng } from './random.js';
import { startServe, type LogLine, type ServeProcess } from './serve-process.js';
import { StepGate } from './step-gate.js';
import { USER_NAMES, USERS } from './users.js';

export interface ExperimentOptions {
  model: string;
  method: Method;
  seed: number;
  steps: number;
  evalEvery: number;
  batchSize: number;
  lr: number;
  /** 0: full fine-tuning. */
  loraRank: number;
  judgeVotes: number;
  judgeErrorRate: number;
  /** Conversations in flight at once. */
  concurrency: number;
  /** Held-out replies per problem and user at each measurement. */
  evalSamples: number;
  maxTokens: number;
  maxReplies: number;
  threads: number;
  onConversation?: (e: ConversationEvent) => void;
  onVote?: (v: VoteEvent) => void;
  onPoint?: (p: ScorePoint) => void;
  onStep?: (s: StepRecord) => void;
  onProbe?: (done: number, total: number) => void;
  /** Every JSON log line of `serve` (turn_judged, batch_trained...). */
  onServeLog?: (line: LogLine) => void;
  /** Every admin status the run polls. */
  onStatus?: (s: AdminStatus) => void;
}

/**
 * lr 3e-4 (full fine-tuning of the 0.5M-parameter sim model): every method learns within a few
 * steps; at 5e-4 Binary RL became unstable (one seed fell to 0.00 by step 16) and Combined's
 * spread across seeds doubled.
 */
export const DEFAULT_EXPERIMENT: Omit<ExperimentOptions, 'model' | 'method' | 'seed'> = {
  steps: 16,
  evalEvery: 4,
  batchSize: 16,
  lr: 3e-4,
  loraRank: 0,
  judgeVotes: 3,
  judgeErrorRate: 0.2,
  concurrency: 8,
  evalSamples: 3,
  maxTokens: 160,
  maxReplies: 3,
  threads: 2,
};

export interface ScorePoint extends Score {
  step: number;
  version: number;
}

export interface StepRecord {
  step: number;
  /** Learner time of the step (from serve's batch_trained log). */
  trainSeconds: number;
  samples: number;
  rewardMean: number;
  hints: number;
}

export interface ExperimentResult {
  method: Method;
  seed: number;
  points: ScorePoint[];
  steps: StepRecord[];
  /** Wall time spent between measurements: users talking, judging and training. */
  trainingWallSeconds: number;
  wallSeconds: number;
  samplesTrained: number;
  /** Judged turns that gave no sample, by reason, and samples dropped as stale (serve's counters). */
  noSample: Record<string, number>;
  staleSamples: number;
  conversations: number;
  judgeVotes: { eval: number; hint: number; wrong: number; unreadable: number };
}

export async function runExperiment(o: ExperimentOptions): Promise<ExperimentResult> {
  const t0 = performance.now();
  const problems = loadProblems();
  const judge = await startSimJudge({
    errorRate: o.judgeErrorRate,
    seed: o.seed,
    ...(o.onVote ? { onVote: o.onVote } : {}),
  });
  const data = mkdtempSync(join(tmpdir(), 'openclaw-rl-sim-'));
  const adminKey = `sim-${hash32(data).toString(16)}`;
  const steps: StepRecord[] = [];
  const points: ScorePoint[] = [];
  let serve: ServeProcess | null = null;
  let gate: StepGate | null = null;
  let conversations = 0,
    trainingMs = 0,
    stopped = false;
  let users: Promise<void> = Promise.resolve();
  try {
    serve = await startServe([
      '--model',
      o.model,
      '--data',
      data,
      '--default-turn-kind',
      'main',
      '--admin-key',
      adminKey,
      '--threads',
      String(o.threads),
      '--method',
      o.method,
      '--batch-size',
      String(o.batchSize),
      '--judge-url',
      judge.url,
      '--judge-model',
      judge.model,
      '--judge-votes',
      String(o.judgeVotes),
      '--lora-rank',
      String(o.loraRank),
      '--lr',
      String(o.lr),
      '--session-idle',
      '86400',
    ]);
    serve.onLine((line) => {
      o.onServeLog?.(line);
      if (line.event !== 'batch_trained') return;
      const record = {
        step: Number(line.step),
        trainSeconds: Number(line.trainSeconds),
        samples: Number(line.samples),
        rewardMean: Number(line.rewardMean),
        hints: Number(line.hints),
      };
      steps.push(record);
      o.onStep?.(record);
    });
    const client = new ServeClient(serve.url, serve.root, adminKey);
    const g = new StepGate(client, o.batchSize, o.onStatus);
    gate = g; // for the cleanup below
    g.start();
    const measure = async () => {
      const status = await g.reached();
      const score = await personalizationScore(client, `${status.steps}`, {
        problems: problems.eval,
        samples: o.evalSamples,
        seed: o.seed,
        maxTokens: o.maxTokens,
        concurrency: o.concurrency,
        ...(o.onProbe ? { onProbe: o.onProbe } : {}),
      });
      const after = await client.status();
      if (after.version !== status.version)
        throw new Error(`the policy changed from version ${status.version} to ${after.version} while it was measured`);
      const point = { step: status.steps, version: status.version, ...score };
      points.push(point);
      o.onPoint?.(point);
    };
    await measure();
    // The users work through the training problems in a seeded order, alternating student and teacher.
    const order = rng(o.seed);
    const queue = problems.train
      .map((p) => ({ p, key: order.next() }))
      .sort((a, b) => a.key - b.key)
      .map((x) => x.p);
    let next = 0;
    const userLoop = async () => {
      while (!stopped) {
        await g.open();
        const i = next++;
        const user = USERS[USER_NAMES[i % USER_NAMES.length]!];
        const problem = queue[i % queue.length]!;
        const r = rng(hash32(`${o.seed}:conversation:${i}`));
        await converse(client, user, user.task(problem, r), `${user.name}-${problem.index}-${i}`, r, {
          maxReplies: o.maxReplies,
          maxTokens: o.maxTokens,
          gate: () => g.acquire(),
          ...(o.onConversation ? { onEvent: o.onConversation } : {}),
        });
        conversations++;
      }
    };
    users = Promise.all(Array.from({ length: o.concurrency }, userLoop)).then(
      () => {},
      (e: Error) => {
        if (!stopped) throw e;
      },
    );
    const usersFailed = users.then(() => {
      if (!stopped) throw new Error('the simulated users stopped');
    });
    usersFailed.catch(() => {});
    for (let target = o.evalEvery; target <= o.steps; target += o.evalEvery) {
      const started = performance.now();
      g.advance(target);
      await Promise.race([g.reached(), usersFailed]);
      trainingMs += performance.now() - started;
      await measure();
    }
    stopped = true;
    return {
      method: o.method,
      seed: o.seed,
      points,
      steps,
      trainingWallSeconds: trainingMs / 1000,
      wallSeconds: (performance.now() - t0) / 1000,
      samplesTrained: g.status?.samples?.trained ?? 0,
      noSample: Object.fromEntries(Object.entries(g.status?.feed ?? {}).filter(([k]) => k !== 'samples')),
      staleSamples: g.status?.samples?.stale ?? 0,
      conversations,
      judgeVotes: { ...judge.votes },
    };
  } finally {
    stopped = true;
    gate?.stop();
    await serve?.stop();
    await users.catch(() => {});
    await judge.close();
    rmSync(data, { recursive: true, force: true });
  }
}
