// The environment runner: plays every (task, rollout) episode of a run against `serve`, P at once.
// Each step is one chat request with the environment's tools; the environment answers each tool
// call with the next state; when the episode ends its outcome goes to /v1/feedback. Results are
// appended to --out as they happen (results-log.ts), so a restarted run continues where it stopped.

import { randomBytes } from 'node:crypto';
import type { ChatMessage } from '../chat/messages.js';
import { type AgentClient, ContextFullError, FatalRequestError, type EpisodeIdentity } from './agent-client.js';
import type { EnvTask, EnvironmentKind } from './environment.js';
import { episodeKey, ResultsLog, type EpisodeEnd, type EpisodeLine } from './results-log.js';

export interface RunOptions {
  kind: EnvironmentKind;
  client: AgentClient;
  out: string;
  tasks: number;
  rollouts: number;
  parallel: number;
  maxSteps: number;
  seed: number;
  onProgress?: (p: RunProgress) => void;
}

export interface RunProgress {
  done: number;
  total: number;
  /** Episodes finished before this invocation (resumed). */
  skipped: number;
  successes: number;
  failed: number;
  steps: number;
  stepsPerSecond: number;
  elapsedSeconds: number;
}

export interface TaskResult {
  taskId: string;
  family: string;
  rollouts: number;
  successes: number;
  successRate: number;
  meanReward: number;
}

export interface RunSummary {
  runId: string;
  env: string;
  tasks: number;
  rollouts: number;
  parallel: number;
  maxSteps: number;
  seed: number;
  /** Episodes with a result, this invocation's and earlier ones'. */
  episodes: number;
  successRate: number;
  meanReward: number;
  byTask: TaskResult[];
  byFamily: Record<string, { episodes: number; successRate: number }>;
  /** Episodes that failed in this invocation (a server error): not recorded, played again on the next run. */
  failed: number;
  failures: string[];
  /** This invocation only. */
  skipped: number;
  steps: number;
  wallSeconds: number;
  stepsPerSecond: number;
  feedback: { sent: number; duplicates: number; pending: number };
}

interface Job {
  task: EnvTask;
  rollout: number;
  key: string;
}

export async function runEnvironment(o: RunOptions): Promise<RunSummary> {
  const log = ResultsLog.open(o.out, {
    env: o.kind.name,
    tasks: o.tasks,
    rollouts: o.rollouts,
    seed: o.seed,
    maxSteps: o.maxSteps,
    ...(o.kind.taskSource === undefined ? {} : { taskSource: o.kind.taskSource }),
  });
  const runId = log.run.runId;
  const tasks = o.kind.tasks(o.tasks, o.seed);
  // Task-major order: the G rollouts of one task run side by side, as a group learner wants them.
  const jobs: Job[] = tasks.flatMap((task) =>
    Array.from({ length: o.rollouts }, (_, rollout) => ({ task, rollout, key: episodeKey(runId, task.id, rollout) })),
  );
  const pending = jobs.filter((j) => !log.episodes.has(j.key));
  const started = performance.now();
  const feedback = { sent: 0, duplicates: 0 };
  const failures: string[] = [];
  let steps = 0;
  let done = jobs.length - pending.length;
  const skipped = done;
  let successes = [...log.episodes.values()].filter((e) => e.success).length;
  const progress = () => {
    const elapsed = (performance.now() - started) / 1000;
    o.onProgress?.({
      done,
      total: jobs.length,
      skipped,
      successes,
      failed: failures.length,
      steps,
      stepsPerSecond: elapsed > 0 ? steps / elapsed : 0,
      elapsedSeconds: elapsed,
    });
  };

  const sendFeedback = async (e: EpisodeLine) => {
    if (e.steps === 0 || !o.client.learns) {
      const skipped = e.steps === 0 ? 'no turn was recorded' : 'side turns (evaluation): nothing to learn from';
      log.append({ type: 'feedback', key: e.key, duplicate: false, skipped });
      return;
    }
    const comment = `${o.kind.name} ${e.taskId} rollout ${e.rollout}: ${e.end}; ${e.detail}`;
    const r = await o.client.feedback(e.sessionId, e.reward, comment, e.key);
    log.append({ type: 'feedback', key: e.key, duplicate: r.duplicate });
    feedback.sent++;
    if (r.duplicate) feedback.duplicates++;
  };

  // Outcomes recorded before a crash but never acknowledged: the same key makes re-sending safe.
  for (const e of log.episodes.values()) if (!log.acknowledged.has(e.key)) await sendFeedback(e);
  progress();

  let next = 0;
  let fatal: Error | null = null;
  const worker = async () => {
    while (next < pending.length && fatal === null) {
      const job = pending[next++]!;
      try {
        const episode = await playEpisode(o, runId, job, (n) => {
          steps += n;
        });
        log.append(episode);
        done++;
        if (episode.success) successes++;
        await sendFeedback(episode);
      } catch (e) {
        // A refusal no retry can fix (a wrong key, a bad request) stops the run; others are played again later.
        if (e instanceof FatalRequestError) fatal = e;
        failures.push(`${job.task.id} rollout ${job.rollout}: ${(e as Error).message}`);
      }
      progress();
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.parallel, Math.max(1, pending.length)) }, worker));
  if (fatal !== null) throw fatal;

  const wallSeconds = (performance.now() - started) / 1000;
  const summary = summarize(o, runId, tasks, [...log.episodes.values()], {
    failures,
    skipped,
    steps,
    wallSeconds,
    feedback: { ...feedback, pending: [...log.episodes.keys()].filter((k) => !log.acknowledged.has(k)).length },
  });
  log.writeSummary(summary);
  return summary;
}

async function playEpisode(
  o: RunOptions,
  runId: string,
  job: Job,
  countStep: (n: number) => void,
): Promise<EpisodeLine> {
  const started = performance.now();
  const env = o.kind.create();
  // A new session per attempt: a replayed episode must not extend the history of a crashed one.
  const who: EpisodeIdentity = {
    sessionId: `env-${runId}-${job.task.id}-r${job.rollout}-${randomBytes(3).toString('hex')}`,
    taskId: job.task.id,
    rolloutIndex: job.rollout,
    rolloutCount: o.rollouts,
  };
  try {
    const messages: ChatMessage[] = await env.reset(job.task);
    let end: EpisodeEnd = 'max-steps';
    let steps = 0;
    let toolCalls = 0;
    while (steps < o.maxSteps) {
      let assistant: ChatMessage;
      try {
        assistant = await o.client.chat(messages, env.tools, who);
      } catch (e) {
        if (e instanceof ContextFullError) {
          end = 'context';
          break;
        }
        throw e;
      }
      steps++;
      countStep(1);
      messages.push(assistant);
      toolCalls += assistant.tool_calls?.length ?? 0;
      const result = await env.step(assistant);
      messages.push(...result.observations);
      if (result.done) {
        end = (assistant.tool_calls?.length ?? 0) === 0 ? 'answered' : 'limit';
        break;
      }
    }
    const outcome = await env.outcome();
    return {
      type: 'episode',
      key: job.key,
      taskId: job.task.id,
      family: job.task.family,
      rollout: job.rollout,
      sessionId: who.sessionId,
      reward: outcome.reward,
      success: outcome.success,
      steps,
      toolCalls,
      end,
      detail: outcome.detail,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await env.close();
  }
}

function summarize(
  o: RunOptions,
  runId: string,
  tasks: EnvTask[],
  episodes: EpisodeLine[],
  run: Pick<RunSummary, 'skipped' | 'steps' | 'wallSeconds' | 'feedback'> & { failures: string[] },
): RunSummary {
  const mean = (xs: number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
  const byTask = tasks.map((task): TaskResult => {
    const mine = episodes.filter((e) => e.taskId === task.id);
    const successes = mine.filter((e) => e.success).length;
    return {
      taskId: task.id,
      family: task.family,
      rollouts: mine.length,
      successes,
      successRate: mine.length === 0 ? 0 : successes / mine.length,
      meanReward: mean(mine.map((e) => e.reward)),
    };
  });
  const byFamily: RunSummary['byFamily'] = {};
  for (const family of new Set(tasks.map((t) => t.family))) {
    const mine = episodes.filter((e) => e.family === family);
    byFamily[family] = { episodes: mine.length, successRate: mean(mine.map((e) => (e.success ? 1 : 0))) };
  }
  return {
    runId,
    env: o.kind.name,
    tasks: o.tasks,
    rollouts: o.rollouts,
    parallel: o.parallel,
    maxSteps: o.maxSteps,
    seed: o.seed,
    episodes: episodes.length,
    successRate: mean(episodes.map((e) => (e.success ? 1 : 0))),
    meanReward: mean(episodes.map((e) => e.reward)),
    byTask,
    byFamily,
    failed: run.failures.length,
    failures: run.failures,
    skipped: run.skipped,
    steps: run.steps,
    wallSeconds: run.wallSeconds,
    stepsPerSecond: run.wallSeconds > 0 ? run.steps / run.wallSeconds : 0,
    feedback: run.feedback,
  };
}
