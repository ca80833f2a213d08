// Test helpers: generated model folders and the PyTorch reference (test/reference/*.py, run
// with Debian's python3-torch), so engine numerics are checked against an independent code base.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRESETS, writeModelFolder, type ModelShape } from '../../src/engine/local/model/init.js';
import { readSafetensorsHeader, readTensorInto } from '../../src/engine/local/model/safetensors.js';
import type { ModelFamily } from '../../src/engine/local/model/config.js';

export const PYTHON = process.env.OPENCLAW_RL_PYTHON ?? '/usr/bin/python3';
const REFERENCE_DIR = fileURLToPath(new URL('../../../test/reference/', import.meta.url));

export interface TinyModelOptions {
  family: ModelFamily;
  shape?: Partial<ModelShape>;
  dtype?: 'F32' | 'BF16';
  shards?: number;
  seed?: number;
  /** Larger than the default 0.02 so the distributions are peaked and mistakes show. */
  initStd?: number;
}

/** Scratch folders to remove at exit: one exit listener for all (one each passed Node's limit of 10). */
const scratchDirs: string[] = [];

/** A scratch folder removed when the process exits. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (scratchDirs.length === 0)
    process.once('exit', () => {
      for (const d of scratchDirs) rmSync(d, { recursive: true, force: true });
    });
  scratchDirs.push(dir);
  return dir;
}

export function makeTinyModel(opts: TinyModelOptions): string {
  const out = join(scratchDir('ocrl-model-'), 'model');
  writeModelFolder({
    out,
    shape: { family: opts.family, ...PRESETS.tiny!, ...opts.shape },
    seed: opts.seed ?? 1,
    dtype: opts.dtype ?? 'F32',
    shards: opts.shards ?? 1,
    tokenizerVocab: Math.min(opts.shape?.vocabSize ?? PRESETS.tiny!.vocabSize, 512),
    initStd: opts.initStd ?? 0.25,
  });
  return out;
}

/** Per-sequence log-probs of ids[1..] under the PyTorch reference (float64). */
export function referenceLogprobs(model: string, sequences: number[][]): number[][] {
  const run = spawnSync(PYTHON, [join(REFERENCE_DIR, 'logprobs.py')], {
    input: JSON.stringify({ model, sequences, dtype: 'float64' }),
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (run.status !== 0)
    throw new Error(
      `reference failed (${PYTHON} logprobs.py, exit ${run.status}): ${run.stderr || run.error?.message}`,
    );
  return (JSON.parse(run.stdout) as { logprobs: number[][] }).logprobs;
}

export function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) throw new Error(`length mismatch: ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Every tensor of a safetensors file, as float32, by name. */
export function readAllTensors(path: string): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const [name, entry] of readSafetensorsHeader(path).tensors) {
    const data = new Float32Array(entry.shape.reduce((a, d) => a * d, 1));
    readTensorInto(path, entry, data);
    out.set(name, data);
  }
  return out;
}
