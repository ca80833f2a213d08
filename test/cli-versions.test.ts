// `openclaw-rl versions` against a store alone (no model, no serve): the list as JSON and as a
// table, a rollback queued for the next start, and the refusals the store can tell.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openStore } from '../src/store/store.js';
import type { VersionRecord, VersionSummary } from '../src/store/versions.js';
import { freshDir } from './helpers/gateway.js';
import { CLI } from './helpers/serve-process.js';

const versions = (...args: string[]) => spawnSync(process.execPath, [CLI, 'versions', ...args], { encoding: 'utf8' });

function storeWithVersions(): string {
  const dir = freshDir('cli-versions-');
  const store = openStore({ dir });
  const kept = join(dir, 'versions', 'v-1');
  mkdirSync(kept, { recursive: true });
  writeFileSync(join(kept, 'adapter_config.json'), '{}');
  const v = (version: number, step: number, weightsPath: string | null): VersionRecord => ({
    version,
    publishedAt: Date.UTC(2026, 0, 2, 3, 4, 5),
    step,
    source: 'train',
    rolledBackFrom: null,
    restores: null,
    requestedBy: null,
    weightsPath,
  });
  store.versions.record(v(1, 1, kept));
  store.versions.record(v(2, 2, join(dir, 'versions', 'v-2')));
  store.versions.record({ ...v(3, 2, null), source: 'rollback', rolledBackFrom: 2, restores: 1, requestedBy: 'admin' });
  store.close();
  return dir;
}

test('versions list: JSON records and a table, newest first, with the weights that are gone marked', () => {
  const dir = storeWithVersions();
  const json = versions('list', '--data', dir, '--json');
  assert.equal(json.status, 0, json.stderr);
  const rows = json.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as VersionSummary);
  assert.deepEqual(
    rows.map((r) => [r.version, r.source, r.serving, r.weightsKept, r.turns, r.scoreMean]),
    [
      [3, 'rollback', true, false, 0, null],
      [2, 'train', false, false, 0, null],
      [1, 'train', false, true, 0, null],
      [0, 'train', false, true, 0, null],
    ],
  );
  const table = versions('list', '--data', dir);
  assert.equal(table.status, 0, table.stderr);
  assert.deepEqual(table.stdout.trimEnd().split('\n'), [
    '   version  published            step  source                 score  judged  turns  weights  guard',
    '*  3        2026-01-02 03:04:05  2     rollback to 1 (admin)  -      0       0      gone     -',
    '   2        2026-01-02 03:04:05  2     train                  -      0       0      gone     -',
    '   1        2026-01-02 03:04:05  1     train                  -      0       0      kept     -',
    '   0        -                    0     base                   -      0       0      kept     -',
  ]);
});

test('versions rollback: queued for the next start when no serve runs; refusals say why and queue nothing', () => {
  const dir = storeWithVersions();
  const refusals: [string[], RegExp][] = [
    [['rollback', '9'], /no version 9 was recorded in this store/],
    [['rollback', '2'], /the weights of version 2 are no longer kept/],
    [['rollback', '3'], /version 3 is the newest: it is serving already/],
    [['rollback'], /versions rollback needs a version number \(see versions list\), got none/],
    [['rollback', 'x'], /versions rollback needs a version number/],
  ];
  for (const [args, message] of refusals) {
    const r = versions(...args, '--data', dir);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
  const missing = versions('list', '--data', join(dir, 'nowhere'));
  assert.match(missing.stderr, /no store in .*nowhere .*pass the --data folder given to serve/);
  const ok = versions('rollback', '1', '--data', dir);
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(
    ok.stdout,
    /no serve is learning on .*: the rollback to version 1 \(request 1\) is applied at its next start/,
  );
  const store = openStore({ dir, recoverQueue: false });
  try {
    assert.deepEqual(
      store.versions.pendingRequests().map((r) => [r.id, r.target, r.requestedBy, r.status]),
      [[1, 1, 'cli', 'pending']],
    );
  } finally {
    store.close();
  }
});
