// Training checkpoints (trainable values + AdamW state + metadata) that survive a crash at any
// instant. LoRA adapters in the PEFT folder format are peft-adapter.ts's.
//
// Checkpoint layout (one writer per folder):
//   <dir>/latest                   names the current version; replaced by temp file + rename
//   <dir>/step-<step>-<id>/        one complete version: checkpoint.json, state.safetensors
//   <dir>/.tmp-step-<step>-<id>/   a version being written (left behind only by a crash)
// A directory cannot be renamed over a non-empty one, so the commit point is the rename of the
// small `latest` file: before it the old version is current and untouched, after it the new one
// is, and it was fsynced (files and folder) before `latest` could name it.

import { existsSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { makePrivateDir } from '../../../private-files.js';
import { readSafetensorsHeader, readTensorInto, writeSafetensors } from '../model/safetensors.js';
import { CheckpointError, fsyncDir, writeFileAtomic, writeFileSynced } from './durable-files.js';
import { LORA_TARGETS, type LoraSpec } from './lora.js';

/** Everything needed to resume training exactly where it stopped. */
export interface TrainingCheckpoint {
  /** Optimizer steps taken (AdamW bias corrections continue from here). */
  step: number;
  /** Samples already trained, so a restart trains none of them twice. */
  consumedSampleIds: string[];
  /** The adapter's shape, or "full" when every parameter trains. */
  lora: LoraSpec | 'full';
  /** Hash of the training config, to notice a resume under different settings. */
  configHash: string;
  /** The last policy version published from these weights (0: none yet). */
  publishedVersion: number;
  /** The LoRA buffer, or the full parameter buffer. */
  trainable: Float32Array;
  /** AdamW moments, shaped like trainable. */
  m: Float32Array;
  v: Float32Array;
  /** The step AdamW's moments were last reset at (a rollback); absent: 0. */
  momentsFrom?: number;
}

const LATEST = 'latest';
const META = 'checkpoint.json';
const STATE = 'state.safetensors';
const VERSION = /^step-\d+-[0-9a-f]+$/;
const FORMAT = 'openclaw-rl-checkpoint/1';

/** Saves a new version, makes it current, then deletes every other version. Returns its folder. */
export function saveCheckpoint(dir: string, ckpt: TrainingCheckpoint): string {
  const n = ckpt.trainable.length;
  if (ckpt.m.length !== n || ckpt.v.length !== n)
    throw new RangeError(
      `saveCheckpoint: trainable ${n}, m ${ckpt.m.length}, v ${ckpt.v.length} values; they must match`,
    );
  if (!(Number.isInteger(ckpt.step) && ckpt.step >= 0))
    throw new RangeError(`saveCheckpoint: step must be a non-negative integer, got ${ckpt.step}`);
  makePrivateDir(dir);
  // A crashed save's leftovers: a partial version, a pointer never renamed into place.
  for (const e of readdirSync(dir))
    if (e.startsWith('.tmp-') || e.startsWith(`${LATEST}.tmp-`)) rmSync(join(dir, e), { recursive: true, force: true });
  const name = `step-${String(ckpt.step).padStart(10, '0')}-${randomBytes(4).toString('hex')}`;
  const tmp = join(dir, `.tmp-${name}`);
  makePrivateDir(tmp);
  try {
    writeSafetensors(join(tmp, STATE), [
      { name: 'trainable', shape: [n], data: ckpt.trainable },
      { name: 'adam.m', shape: [n], data: ckpt.m },
      { name: 'adam.v', shape: [n], data: ckpt.v },
    ]);
    const meta = {
      format: FORMAT,
      step: ckpt.step,
      values: n,
      lora: ckpt.lora,
      configHash: ckpt.configHash,
      publishedVersion: ckpt.publishedVersion,
      consumedSampleIds: ckpt.consumedSampleIds,
      ...(ckpt.momentsFrom ? { momentsFrom: ckpt.momentsFrom } : {}),
    };
    writeFileSynced(join(tmp, META), `${JSON.stringify(meta)}\n`);
    fsyncDir(tmp);
    renameSync(tmp, join(dir, name));
    fsyncDir(dir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  writeFileAtomic(join(dir, LATEST), `${name}\n`); // the commit point
  // Older versions, and any a crash left renamed but never named by `latest`.
  for (const e of readdirSync(dir))
    if (VERSION.test(e) && e !== name) rmSync(join(dir, e), { recursive: true, force: true });
  return join(dir, name);
}

/**
 * The current checkpoint of dir, or null when none was ever committed. With `expect`, a
 * checkpoint of another shape is an error rather than a silent mismatch.
 */
export function loadCheckpoint(
  dir: string,
  expect?: { values: number; lora: LoraSpec | 'full' },
): TrainingCheckpoint | null {
  const pointer = join(dir, LATEST);
  if (!existsSync(pointer)) return null;
  const name = readFileSync(pointer, 'utf8').trim();
  if (!VERSION.test(name))
    throw new CheckpointError(pointer, `names ${JSON.stringify(name)}, not a checkpoint version`);
  const version = join(dir, name),
    metaPath = join(version, META),
    statePath = join(version, STATE);
  if (!existsSync(metaPath))
    throw new CheckpointError(pointer, `names ${name}, but ${metaPath} is missing (was the folder changed by hand?)`);
  const fail = (m: string): never => {
    throw new CheckpointError(metaPath, m);
  };
  let meta: Record<string, unknown> = {};
  try {
    meta = (JSON.parse(readFileSync(metaPath, 'utf8')) ?? {}) as Record<string, unknown>;
  } catch (e) {
    fail(`not valid JSON: ${(e as Error).message}`);
  }
  if (meta.format !== FORMAT) fail(`format ${JSON.stringify(meta.format)}, expected "${FORMAT}"`);
  const { step, values, lora, configHash, consumedSampleIds } = meta;
  const publishedVersion = meta.publishedVersion ?? 0;
  const momentsFrom = meta.momentsFrom ?? 0;
  if (!(Number.isInteger(momentsFrom) && (momentsFrom as number) >= 0))
    fail(`"momentsFrom" must be a non-negative integer, got ${JSON.stringify(momentsFrom)}`);
  if (!(Number.isInteger(publishedVersion) && (publishedVersion as number) >= 0))
    fail(`"publishedVersion" must be a non-negative integer, got ${JSON.stringify(publishedVersion)}`);
  if (!(Number.isInteger(step) && (step as number) >= 0))
    fail(`"step" must be a non-negative integer, got ${JSON.stringify(step)}`);
  if (!(Number.isInteger(values) && (values as number) >= 0))
    fail(`"values" must be a non-negative integer, got ${JSON.stringify(values)}`);
  if (!(lora === 'full' || isLoraSpec(lora)))
    fail(`"lora" must be "full" or {rank, alpha, targets}, got ${JSON.stringify(lora)}`);
  if (typeof configHash !== 'string') fail('"configHash" must be a string');
  if (!(Array.isArray(consumedSampleIds) && consumedSampleIds.every((id) => typeof id === 'string')))
    fail('"consumedSampleIds" must be a list of strings');
  const n = values as number;
  if (expect) {
    if (describe(expect.lora) !== describe(lora as LoraSpec | 'full'))
      fail(`trains ${describe(lora as LoraSpec | 'full')}, this run trains ${describe(expect.lora)}`);
    if (expect.values !== n)
      fail(`holds ${n} trainable values, this model needs ${expect.values} (a different model?)`);
  }
  const header = readSafetensorsHeader(statePath);
  const read = (tensor: string): Float32Array => {
    const entry = header.tensors.get(tensor);
    if (!entry) throw new CheckpointError(statePath, `missing tensor "${tensor}"`);
    const count = entry.shape.reduce((a, d) => a * d, 1);
    if (count !== n)
      throw new CheckpointError(statePath, `tensor "${tensor}" holds ${count} values, ${META} says ${n}`);
    const out = new Float32Array(n);
    readTensorInto(statePath, entry, out);
    return out;
  };
  return {
    step: step as number,
    consumedSampleIds: consumedSampleIds as string[],
    lora: lora as LoraSpec | 'full',
    configHash: configHash as string,
    publishedVersion: publishedVersion as number,
    trainable: read('trainable'),
    m: read('adam.m'),
    v: read('adam.v'),
    ...(momentsFrom ? { momentsFrom: momentsFrom as number } : {}),
  };
}

function isLoraSpec(x: unknown): x is LoraSpec {
  const s = x as LoraSpec;
  return (
    typeof s === 'object' &&
    s !== null &&
    Number.isInteger(s.rank) &&
    typeof s.alpha === 'number' &&
    Array.isArray(s.targets) &&
    s.targets.every((t) => (LORA_TARGETS as readonly string[]).includes(t))
  );
}

/** Also the comparison key of two specs, so targets are listed in canonical order. */
function describe(lora: LoraSpec | 'full'): string {
  if (lora === 'full') return 'all parameters';
  return `a LoRA (r=${lora.rank}, alpha=${lora.alpha}, targets ${LORA_TARGETS.filter((t) => lora.targets.includes(t)).join(',')})`;
}
