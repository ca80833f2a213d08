// The store, checkpoints, adapters, model folders and exports are readable by their owner only
// (folders 0700, files 0600) under a permissive umask, and a store an older version left 0644 is
// tightened when it is opened.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { runExport } from '../src/cli/export.js';
import { writeSafetensors } from '../src/engine/local/model/safetensors.js';
import { saveCheckpoint } from '../src/engine/local/train/checkpoint.js';
import { openStore, STORE_FILE } from '../src/store/store.js';
import { scratchDir } from './helpers/models.js';

const mode = (path: string) => statSync(path).mode & 0o777;

/** Runs fn under umask 022 (group and others may read what is created), restoring the umask after. */
function underOpenUmask<T>(fn: () => T): T {
  const previous = process.umask(0o022);
  try {
    return fn();
  } finally {
    process.umask(previous);
  }
}

function storeFiles(dir: string): string[] {
  const path = join(dir, STORE_FILE);
  return [path, `${path}-wal`, `${path}-shm`];
}

test('a new store: data folder 0700, database, -wal and -shm 0600', () => {
  const dir = join(scratchDir('ocrl-private-'), 'data');
  underOpenUmask(() => {
    const store = openStore({ dir });
    try {
      store.db.exec('CREATE TABLE private_probe (x)'); // a write, so that the WAL exists
      assert.equal(mode(dir), 0o700);
      for (const f of storeFiles(dir)) {
        assert.ok(existsSync(f), `${f} exists while the store is open`);
        assert.equal(mode(f).toString(8), '600', f);
      }
    } finally {
      store.close();
    }
  });
});

test('a store left 0755/0644 by an older version is made private when opened', () => {
  const dir = join(scratchDir('ocrl-private-'), 'data');
  underOpenUmask(() => {
    const first = openStore({ dir });
    first.db.exec('CREATE TABLE private_probe (x)');
    chmodSync(dir, 0o755);
    for (const f of storeFiles(dir)) if (existsSync(f)) chmodSync(f, 0o644);
    const second = openStore({ dir });
    try {
      assert.equal(mode(dir), 0o700);
      for (const f of storeFiles(dir)) if (existsSync(f)) assert.equal(mode(f).toString(8), '600', f);
    } finally {
      second.close();
      first.close();
    }
  });
});

test('checkpoints and safetensors files are private', () => {
  const root = scratchDir('ocrl-private-');
  underOpenUmask(() => {
    const ckptDir = join(root, 'checkpoints');
    const n = 8;
    const values = () => new Float32Array(n).fill(1);
    const version = saveCheckpoint(ckptDir, {
      step: 1,
      consumedSampleIds: [],
      lora: 'full',
      configHash: 'h',
      publishedVersion: 1,
      trainable: values(),
      m: values(),
      v: values(),
    });
    assert.equal(mode(ckptDir), 0o700);
    assert.equal(mode(version), 0o700);
    for (const f of readdirSync(version)) assert.equal(mode(join(version, f)).toString(8), '600', f);
    for (const f of readdirSync(ckptDir).filter((e) => !e.startsWith('step-'))) {
      assert.equal(mode(join(ckptDir, f)).toString(8), '600', f);
    }
    const weights = join(root, 'w.safetensors');
    writeSafetensors(weights, [{ name: 'x', shape: [n], data: values() }]);
    assert.equal(mode(weights).toString(8), '600');
  });
});

test('export --out writes a 0600 file', async () => {
  const root = scratchDir('ocrl-private-');
  const dir = join(root, 'data');
  openStore({ dir }).close();
  const out = join(root, 'turns.jsonl');
  const code = await underOpenUmask(() => runExport(['--data', dir, '--out', out]));
  assert.equal(code, 0);
  assert.equal(mode(out).toString(8), '600');
});
