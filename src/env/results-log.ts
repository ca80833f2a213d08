// The runner's record under --out, append-only so a crash loses at most the episodes in flight:
//   run.json        the run's id and the options that define its episodes (checked on resume);
//   results.jsonl   one `episode` line when an episode ends, one `feedback` line once the server
//                   acknowledged its outcome. A restart skips every episode with an `episode` line,
//                   re-sends the outcome of those without a `feedback` line (same idempotency key),
//                   and plays the others from the start in a new session.
//   summary.json    per-task and per-family results, written at the end of each invocation.

import { randomBytes } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What defines a run's set of episodes; a resumed run must have the same. */
export interface RunDefinition {
  env: string;
  tasks: number;
  rollouts: number;
  seed: number;
  maxSteps: number;
  /** Where the tasks come from, for environments with more than one source (EnvironmentKind.taskSource). */
  taskSource?: string;
}

export interface RunRecord extends RunDefinition {
  runId: string;
  createdAt: string;
}

/** How an episode ended: a final answer, the step limit, a full context, or an environment limit. */
export type EpisodeEnd = 'answered' | 'max-steps' | 'context' | 'limit';

export interface EpisodeLine {
  type: 'episode';
  /** `runId:taskId:rollout`: the feedback's idempotency key. */
  key: string;
  taskId: string;
  family: string;
  rollout: number;
  sessionId: string;
  reward: number;
  success: boolean;
  /** Chat requests (agent actions) in the episode. */
  steps: number;
  toolCalls: number;
  end: EpisodeEnd;
  detail: string;
  seconds: number;
}

export interface FeedbackLine {
  type: 'feedback';
  key: string;
  duplicate: boolean;
  /** Why nothing was sent: an episode with no recorded turn has no session to attach an outcome to. */
  skipped?: string;
}

export type ResultLine = EpisodeLine | FeedbackLine;

export function episodeKey(runId: string, taskId: string, rollout: number): string {
  return `${runId}:${taskId}:${rollout}`;
}

export class ResultsLog {
  readonly episodes = new Map<string, EpisodeLine>();
  readonly acknowledged = new Set<string>();
  private readonly path: string;

  private constructor(
    readonly dir: string,
    readonly run: RunRecord,
  ) {
    this.path = join(dir, 'results.jsonl');
    if (!existsSync(this.path)) return;
    let text = readFileSync(this.path, 'utf8');
    if (!text.endsWith('\n') && text.length > 0) {
      // A crash cut the last line short: it recorded nothing complete, so it goes.
      text = text.slice(0, text.lastIndexOf('\n') + 1);
      truncateSync(this.path, Buffer.byteLength(text));
    }
    text.split('\n').forEach((lineText, i) => {
      if (lineText === '') return;
      let line: ResultLine;
      try {
        line = JSON.parse(lineText) as ResultLine;
      } catch {
        throw new Error(`${this.path}: line ${i + 1} is not JSON; the file is damaged`);
      }
      if (line.type === 'episode') this.episodes.set(line.key, line);
      else if (line.type === 'feedback') this.acknowledged.add(line.key);
    });
  }

  /** Opens --out: a new run, or the run already there when its definition matches. */
  static open(dir: string, definition: RunDefinition): ResultsLog {
    mkdirSync(dir, { recursive: true });
    const runPath = join(dir, 'run.json');
    if (existsSync(runPath)) {
      const run = JSON.parse(readFileSync(runPath, 'utf8')) as RunRecord;
      // taskSource counts when either side has one: arithmetic tasks never resume a GSM8K run.
      const keys = [...new Set([...Object.keys(definition), 'taskSource'])] as (keyof RunDefinition)[];
      const differs = keys.filter((k) => run[k] !== definition[k]);
      if (differs.length > 0)
        throw new Error(
          `${dir} holds a run with other ${differs.map((k) => `${k} (${run[k]}, now ${definition[k]})`).join(', ')}; ` +
            'resume it with the same options or choose another --out',
        );
      return new ResultsLog(dir, run);
    }
    const run: RunRecord = {
      runId: randomBytes(6).toString('hex'),
      createdAt: new Date().toISOString(),
      ...definition,
    };
    writeFileSync(runPath, `${JSON.stringify(run, null, 2)}\n`);
    return new ResultsLog(dir, run);
  }

  append(line: ResultLine): void {
    appendFileSync(this.path, `${JSON.stringify(line)}\n`);
    if (line.type === 'episode') this.episodes.set(line.key, line);
    else this.acknowledged.add(line.key);
  }

  writeSummary(summary: unknown): string {
    const path = join(this.dir, 'summary.json');
    writeFileSync(path, `${JSON.stringify(summary, null, 2)}\n`);
    return path;
  }
}
