// Group commit: writes caused by one event share a transaction; a refused batch is retried write
// by write so that only the bad write fails; flushed() waits for everything queued.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GroupCommit } from '../src/sessions/group-commit.js';

function recordingStore() {
  const batches: string[][] = [];
  const writeAll = (writes: readonly string[]) => {
    batches.push([...writes]);
    if (writes.includes('bad')) throw new Error(`refused ${writes.join(',')}`);
  };
  return { batches, writeAll };
}

test('writes of one event, its promise reactions included, go in one batch; the next event starts another', async () => {
  const { batches, writeAll } = recordingStore();
  const commit = new GroupCommit<string>(writeAll);
  const first = [
    commit.submit('a'),
    Promise.resolve()
      .then(() => commit.submit('b'))
      .then((p) => p),
    commit.submit('c'),
  ];
  await Promise.all(first);
  await new Promise((resolve) => setImmediate(resolve)); // another event
  await commit.submit('d');
  assert.deepEqual(batches, [['a', 'c', 'b'], ['d']]);
});

test('one refused write fails alone; the rest of its batch lands', async () => {
  const { batches, writeAll } = recordingStore();
  const commit = new GroupCommit<string>(writeAll);
  const results = await Promise.allSettled([commit.submit('a'), commit.submit('bad'), commit.submit('c')]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.match(String((results[1] as PromiseRejectedResult).reason), /refused bad/);
  assert.deepEqual(batches, [['a', 'bad', 'c'], ['a'], ['bad'], ['c']]);
});

test('flushed() resolves once everything queued has been written or has failed', async () => {
  const { batches, writeAll } = recordingStore();
  const commit = new GroupCommit<string>(writeAll);
  await commit.flushed(); // nothing queued
  const failed = commit.submit('bad').catch(() => 'caught');
  void commit.submit('x');
  assert.equal(commit.pending, 2);
  await commit.flushed();
  assert.equal(commit.pending, 0);
  assert.deepEqual(batches, [['bad', 'x'], ['bad'], ['x']]);
  assert.equal(await failed, 'caught');
});
