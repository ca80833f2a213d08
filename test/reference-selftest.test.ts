// The PyTorch reference checks itself (hand computations, finite differences, an independent
// numpy forward): the engine's numerics are only as trustworthy as this reference.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PYTHON } from './helpers/models.js';

for (const script of ['selftest.py', 'train_selftest.py']) {
  test(`test/reference/${script} passes`, () => {
    const path = fileURLToPath(new URL(`../../test/reference/${script}`, import.meta.url));
    const run = spawnSync(PYTHON, [path], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    assert.equal(run.status, 0, `${script} failed:\n${run.stdout.slice(-3000)}\n${run.stderr.slice(-3000)}`);
  });
}
