// The step gate lets next states through only while the samples they could become fit in the
// batches left before the target step, so the learner stops exactly there for a measurement.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AdminStatus, ServeClient } from '../src/sim/client.js';
import { StepGate } from '../src/sim/step-gate.js';

function fakeServe(initial: AdminStatus) {
  const state = { status: initial, polls: 0 };
  const client = {
    status: async () => {
      state.polls++;
      return structuredClone(state.status);
    },
  } as unknown as ServeClient;
  return { state, client };
}

const status = (steps: number, samples: number, judging = 0, training = false): AdminStatus => ({
  version: steps,
  steps,
  trainer: { state: training ? 'training' : 'waiting', error: null },
  queues: { closedTurns: 0, judging, samples },
});

const settle = (ms = 60) => new Promise((r) => setTimeout(r, ms));

/** Waits for a condition (a busy machine may delay the gate's polls), failing after 10 s. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (const started = Date.now(); !condition(); await settle(10)) {
    if (Date.now() - started > 10_000) assert.fail(`timed out waiting: ${what}`);
  }
}

test('next states stop at the batch the target needs, and resume as the pipeline turns out smaller', async () => {
  const { state, client } = fakeServe(status(0, 0));
  const gate = new StepGate(client, 4, undefined, 5);
  gate.start();
  gate.advance(1);
  const releases = [];
  for (let i = 0; i < 4; i++) releases.push(await gate.acquire());
  let fifth = false;
  const pending = gate.acquire().then((release) => {
    fifth = true;
    return release;
  });
  await settle();
  assert.equal(fifth, false, 'four unanswered next states can already fill the batch');
  for (const release of releases) release();
  state.status = status(0, 1, 1); // two of the four were dropped by the judge
  await until(() => fifth, 'two more may go: the pipeline holds only two');
  (await pending)();
  gate.stop();
});

test('with several steps to go, the pipeline still holds one batch at most: users do not run ahead of the learner', async () => {
  const { state, client } = fakeServe(status(0, 0));
  const gate = new StepGate(client, 4, undefined, 5);
  gate.start();
  gate.advance(3);
  const releases = [];
  for (let i = 0; i < 4; i++) releases.push(await gate.acquire());
  let fifth = false;
  const pending = gate.acquire().then((release) => {
    fifth = true;
    return release;
  });
  for (const release of releases) release();
  state.status = status(0, 4); // four samples queued: the next batch is full
  await settle();
  assert.equal(fifth, false, 'the next batch is full; the two steps after it must wait for it');
  state.status = status(1, 0, 0, true); // the learner took the batch and trains it
  await until(() => fifth, 'the batch after it may fill while the learner trains');
  (await pending)();
  gate.stop();
});

test('at the target the users wait, and the measurement waits for the trainer to finish', async () => {
  const { state, client } = fakeServe(status(0, 3));
  const gate = new StepGate(client, 4, undefined, 5);
  gate.start();
  gate.advance(1);
  state.status = status(1, 0, 0, true);
  let reached = false;
  const measured = gate.reached().then(() => {
    reached = true;
  });
  let opened = false;
  const open = gate.open().then(() => {
    opened = true;
  });
  await settle();
  assert.equal(reached, false, 'still training');
  state.status = status(1, 0);
  await measured;
  assert.equal(opened, false, 'no new conversation during the measurement');
  gate.advance(2);
  await open;
  gate.stop();
  await assert.rejects(gate.acquire(), /stopped/);
});
