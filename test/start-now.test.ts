import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startNow } from '../src/engine/start-now.js';

/** Yields 0..n-1, stopping after a yield once `signal` aborts (as the samplers do); logs its start and end. */
function counting(n: number, signal?: AbortSignal) {
  const log: string[] = [];
  async function* body(): AsyncGenerator<number, void> {
    log.push('started');
    try {
      for (let i = 0; i < n; i++) {
        await Promise.resolve();
        yield i;
        if (signal?.aborted) {
          log.push('saw abort');
          return;
        }
      }
    } finally {
      log.push('released');
    }
  }
  return { log, gen: body() };
}

async function readAll<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

test('the generator body runs when startNow is called, before anyone reads', () => {
  const { log, gen } = counting(3);
  startNow(gen);
  assert.deepEqual(log, ['started'], 'an async generator alone would not have started');
});

test('read later, the stream is whole and in order', async () => {
  const { log, gen } = counting(5);
  const events = startNow(gen);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(await readAll(events), [0, 1, 2, 3, 4]);
  assert.deepEqual(log, ['started', 'released']);
});

test('aborted before anyone reads: the generator runs to its end and releases; a later reader gets what it yielded', async () => {
  const controller = new AbortController();
  const { log, gen } = counting(1000, controller.signal);
  const events = startNow(gen, controller.signal);
  controller.abort();
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(log, ['started', 'saw abort', 'released'], 'released without a reader');
  // The first step ran before the abort: its event is kept for the reader.
  assert.deepEqual(await readAll(events), [0]);
});

test('a reader that starts while the stream is read away gets every event once, in order', async () => {
  const controller = new AbortController();
  // Ignores the signal: the reader must take over from the background reading without losing or repeating.
  const { gen } = counting(50);
  const events = startNow(gen, controller.signal);
  controller.abort();
  await Promise.resolve();
  await Promise.resolve();
  assert.deepEqual(
    await readAll(events),
    Array.from({ length: 50 }, (_, i) => i),
  );
});

test('breaking out closes the generator; a failure reaches the reader, not the process', async () => {
  const { log, gen } = counting(100);
  for await (const x of startNow(gen)) if (x === 2) break;
  assert.deepEqual(log, ['started', 'released']);

  async function* failing(): AsyncGenerator<number, void> {
    yield* [];
    throw new Error('no server answered');
  }
  const events = startNow(failing());
  await new Promise((r) => setImmediate(r)); // an unhandled rejection would fail the test run here
  await assert.rejects(readAll(events), /no server answered/);
});
