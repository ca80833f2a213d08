// The personalization score: the share of replies to a fixed held-out set of problems that the
// user's rubric accepts, each user's first message answered once (or `samples` times) with the
// serving sampling settings. Probes are side turns, so they never become training data, and each
// has a fixed seed: two checkpoints are compared on the same openers and the same random draws.

import type { ServeClient } from './client.js';
import type { Problem } from './problems.js';
import { hash32, rng } from './random.js';
import { USER_NAMES, USERS, type UserName } from './users.js';

export interface ScoreOptions {
  problems: readonly Problem[];
  /** Replies per problem and user. */
  samples: number;
  seed: number;
  maxTokens: number;
  concurrency: number;
  /** Told after each probe (for progress bars). */
  onProbe?: (done: number, total: number) => void;
}

export interface Score {
  /** Mean over users of their acceptance rate. */
  score: number;
  byUser: Record<UserName, number>;
  probes: number;
  /** Each probe's verdict, in a fixed order (user, problem, sample): two measurements pair up probe by probe. */
  outcomes: boolean[];
  /** One reply per user, for a look at what changed. */
  examples: Record<UserName, string>;
}

export async function personalizationScore(client: ServeClient, tag: string, o: ScoreOptions): Promise<Score> {
  const probes = USER_NAMES.flatMap((name) =>
    o.problems.flatMap((problem) => Array.from({ length: o.samples }, (_, k) => ({ name, problem, k }))),
  );
  const accepted: Record<UserName, number> = { student: 0, teacher: 0 };
  const examples: Record<UserName, string> = { student: '', teacher: '' };
  const outcomes = probes.map(() => false);
  let next = 0,
    done = 0;
  const worker = async () => {
    for (let i = next++; i < probes.length; i = next++) {
      const { name, problem, k } = probes[i]!;
      const probeSeed = hash32(`${o.seed}:${name}:${problem.index}:${k}`);
      const task = USERS[name].task(problem, rng(probeSeed));
      const reply = await client.chat(
        `probe-${tag}-${name}-${problem.index}-${k}`,
        [{ role: 'user', content: task.opener }],
        { kind: 'side', maxTokens: o.maxTokens, seed: probeSeed },
      );
      outcomes[i] = USERS[name].rubric.judge(reply.text).accepted;
      if (outcomes[i]) accepted[name]++;
      if (problem === o.problems[0] && k === 0) examples[name] = reply.text;
      o.onProbe?.(++done, probes.length);
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  const per = o.problems.length * o.samples;
  const byUser = { student: accepted.student / per, teacher: accepted.teacher / per };
  return { score: (byUser.student + byUser.teacher) / 2, byUser, probes: probes.length, outcomes, examples };
}
