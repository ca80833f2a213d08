// Crash recovery of `openclaw-rl serve`: under a steady conversational load the server is killed
// with SIGKILL at seeded random moments (while serving, judging, training or checkpointing), then
// restarted on the same data folder. After every restart: each acknowledged turn is in the store,
// no judgment or sample committed before the kill is lost, samples the checkpoint contains keep
// their step (never trained again), the rest are back in the queue, version numbers are never
// reused, and training goes on from the checkpoint.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatMessage } from '../src/chat/messages.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { openStore } from '../src/store/store.js';
import { freshDir } from './helpers/gateway.js';
import { startJudgeDouble } from './helpers/judge-double.js';
import { judgedServeArgs, startServe, stopServe, type ServeProcess } from './helpers/serve-process.js';

interface Snapshot {
  turns: Set<string>;
  judgments: Set<string>;
  /** turn id/kind/index of every stored judge vote */
  votes: Set<string>;
  /** sample id -> [turn id, status, trained step] */
  samples: Map<number, [string, string, number | null]>;
  maxVersion: number;
  steps: number;
}

function snapshot(dir: string): Snapshot {
  const store = openStore({ dir, recoverQueue: false });
  try {
    const ids = (sql: string) => new Set((store.db.prepare(sql).all() as { id: string }[]).map((r) => r.id));
    const samples = new Map<number, [string, string, number | null]>();
    for (const r of store.db.prepare('SELECT id, turn_id, status, trained_step FROM samples').all() as {
      id: number;
      turn_id: string;
      status: string;
      trained_step: number | null;
    }[]) {
      samples.set(r.id, [r.turn_id, r.status, r.trained_step]);
    }
    const steps = (store.db.prepare('SELECT coalesce(max(step), 0) AS s FROM train_steps').get() as { s: number }).s;
    return {
      turns: ids('SELECT id FROM turns'),
      judgments: ids('SELECT turn_id AS id FROM judgments'),
      votes: ids(`SELECT turn_id || '/' || kind || '/' || idx AS id FROM judge_votes`),
      samples,
      maxVersion: store.learning.maxVersion(),
      steps,
    };
  } finally {
    store.close();
  }
}

/** Sessions talking in turns until stopped; returns the ids of the turns that were acknowledged. */
function startLoad(url: string, sessions: number, stop: AbortSignal): Promise<string[]> {
  const acknowledged: string[] = [];
  const talk = async (session: string) => {
    const messages: ChatMessage[] = [];
    for (let i = 0; !stop.aborted; i++) {
      messages.push({ role: 'user', content: `Question ${i} of ${session}: how much is ${i} plus ${i}?` });
      try {
        const res = await fetch(`${url}/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-session-id': session },
          // A signal of its own that follows `stop`: fetch leaves its abort listener on the signal it is
          // given, and thousands of requests on `stop` itself filled the log with leak warnings.
          signal: AbortSignal.any([stop]),
          body: JSON.stringify({ model: 'main-model', messages, max_tokens: 4 }),
        });
        if (res.status !== 200) return;
        const body = (await res.json()) as { id: string; choices: { message: ChatMessage }[] };
        acknowledged.push(`turn_${body.id.slice('chatcmpl-'.length)}`);
        messages.push({ role: 'assistant', content: body.choices[0]!.message.content ?? '' });
        if (messages.length > 12) messages.splice(0, messages.length); // start a new thread in the same session
      } catch {
        return; // the server died or the load was stopped
      }
    }
  };
  return Promise.all(Array.from({ length: sessions }, (_, i) => talk(`crash-${i}`))).then(() => acknowledged);
}

test('SIGKILL at random moments under load loses no committed turn, vote or sample and trains nothing twice', async (t) => {
  const judge = await startJudgeDouble();
  judge.force = '1'; // every eval vote +1 (hint votes then carry no hint): every closed turn is an RL sample
  t.after(() => judge.close());
  const data = freshDir('crash-');
  const args = judgedServeArgs({ data, judgeUrl: judge.url, votes: 1 }, ['--session-idle', '3600']);
  const rng = createRng(20261130);
  let previous = null as Snapshot | null;
  let previousCheckpoint = 0;
  let kills = 0;
  let killsAfterTraining = 0;
  for (let cycle = 0; cycle < 5; cycle++) {
    const serve: ServeProcess = await startServe(args);
    t.after(() => {
      serve.child.kill('SIGKILL');
    });
    const resumed = await serve.waitForLog((l) => l.event === 'resumed');
    const checkpointStep = resumed.steps as number;
    assert.ok(
      checkpointStep >= previousCheckpoint,
      `the checkpoint went back from step ${previousCheckpoint} to ${checkpointStep}`,
    );
    previousCheckpoint = checkpointStep;
    if (previous) {
      const now = snapshot(data);
      for (const id of previous.turns) assert.ok(now.turns.has(id), `turn ${id} was lost`);
      for (const id of previous.judgments) assert.ok(now.judgments.has(id), `the judgment of ${id} was lost`);
      for (const id of previous.votes) assert.ok(now.votes.has(id), `judge vote ${id} was lost`);
      for (const [id, [turn, status, step]] of previous.samples) {
        const after = now.samples.get(id);
        assert.ok(after && after[0] === turn, `sample ${id} was lost`);
        if (status === 'trained' && step! <= checkpointStep)
          assert.deepEqual(
            after.slice(1),
            ['trained', step],
            `sample ${id} is in the checkpoint (step ${step} <= ${checkpointStep}) and must stay trained`,
          );
        if (status === 'trained' && step! > checkpointStep)
          assert.ok(
            after[1] === 'queued' || after[1] === 'stale' || after[2]! > checkpointStep,
            `sample ${id} was trained at step ${step}, after the checkpoint (step ${checkpointStep}), and must be retrained (or dropped as stale), not kept: now ${after.slice(1).join(' ')}`,
          );
      }
      assert.equal(
        resumed.version,
        checkpointStep > 0 ? previous.maxVersion + 1 : 0,
        'a restart publishes the checkpoint under a new version number',
      );
    }
    const stop = new AbortController();
    const load = startLoad(serve.url, 3, stop.signal);
    if (cycle < 4) {
      // Long enough that some cycles reach training and checkpointing, short enough that others do
      // not; cycle 2 is killed just after a batch was trained, published and checkpointed.
      if (cycle === 2) await serve.waitForLog((l) => l.event === 'batch_trained', 120_000);
      await new Promise((r) =>
        setTimeout(r, cycle === 2 ? Math.floor(rng.next() * 300) : 800 + Math.floor(rng.next() * 3500)),
      );
      serve.child.kill('SIGKILL');
      await serve.exited;
      kills++;
      stop.abort();
      const acknowledged = await load;
      previous = snapshot(data);
      if (previous.steps > checkpointStep) killsAfterTraining++;
      for (const id of acknowledged) assert.ok(previous.turns.has(id), `acknowledged turn ${id} is not in the store`);
    } else {
      // The last run: training continues past the checkpoint it resumed from.
      await serve.waitForLog((l) => l.event === 'batch_trained' && (l.step as number) > checkpointStep, 120_000);
      stop.abort();
      await load;
      assert.equal(
        await stopServe(serve),
        0,
        `serve did not stop cleanly: ${serve.stderr().slice(-3000)} ${JSON.stringify(serve.lines.slice(-5))}`,
      );
      const final = snapshot(data);
      assert.ok(final.steps > checkpointStep);
      assert.ok(
        final.votes.size >= final.samples.size && final.samples.size > 0,
        `every sample's turn has its stored votes (${final.votes.size} votes, ${final.samples.size} samples)`,
      );
      const trainedSteps = [...final.samples.values()].filter(([, s]) => s === 'trained').map(([, , step]) => step!);
      assert.equal(trainedSteps.length, 2 * final.steps, 'every step trained exactly one batch of 2 samples');
    }
  }
  assert.equal(kills, 4);
  assert.ok(killsAfterTraining >= 1, 'at least one kill came after a training step of its run');
});
