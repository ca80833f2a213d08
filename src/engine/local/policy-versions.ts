// Policy versions on disk (the PolicyVersion contract, ../policy-version.ts): each one a folder
// <versions>/v-<N>/ holding a PEFT LoRA adapter or a complete model folder, the same layout the
// PyTorch learner writes (python/openclaw_rl_learner/store.py), so any sampler loads either.
//
// A version appears all at once: written into <versions>/.tmp-v-<N>-<id>/, every file and the
// folder fsynced, then renamed to v-<N> and the parent fsynced. A reader never sees a partial
// folder; a crash leaves only a .tmp- folder, which the next write removes (one writer a folder).

import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { makePrivateDir } from '../../private-files.js';
import type { PolicyVersion } from '../policy-version.js';
import type { PolicyUpdate } from '../types.js';
import type { ModelConfig } from './model/config.js';
import { writeModelFiles } from './model/save.js';
import { loadWeights, paramStoreOver, tensorSpecs } from './model/weights.js';
import { fsyncDir } from './train/durable-files.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, readPeftAdapter, writePeftAdapter } from './train/peft-adapter.js';
import { Lora } from './train/lora.js';

/** A folder that is not a policy version, or not the one it claims to be; the message says why. */
export class PolicyVersionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyVersionError';
  }
}

const VERSION_DIR = /^v-(\d+)$/;

export interface WriteVersionOptions {
  /** The base model folder: its config and tokenizer files go into a full version's folder. */
  modelDir: string;
  /** The base model's config (the update's shapes). */
  config: ModelConfig;
  /**
   * Versions kept: those numbered within `keep` of the new one, which a reader may still be
   * loading or a rollback may restore (default 2; Infinity keeps all).
   */
  keep?: number;
}

/**
 * Writes `update` as <versionsDir>/v-<version>/ (atomically, see above) and removes versions
 * older than the `keep` newest. Returns the PolicyVersion, carrying `update` as its fast path.
 */
export function writePolicyVersion(
  versionsDir: string,
  update: PolicyUpdate,
  opts: WriteVersionOptions,
): PolicyVersion {
  const keep = opts.keep ?? 2;
  if (!(Number.isInteger(update.version) && update.version > 0))
    throw new RangeError(`a published version must be a positive integer, got ${update.version}`);
  if (!((Number.isInteger(keep) && keep >= 1) || keep === Number.POSITIVE_INFINITY))
    throw new RangeError(`keep must be a positive integer or Infinity, got ${keep}`);
  makePrivateDir(versionsDir);
  for (const e of readdirSync(versionsDir))
    if (e.startsWith('.tmp-')) rmSync(join(versionsDir, e), { recursive: true, force: true });
  const name = `v-${update.version}`;
  const final = join(versionsDir, name);
  const tmp = join(versionsDir, `.tmp-${name}-${randomBytes(4).toString('hex')}`);
  makePrivateDir(tmp);
  try {
    // Both writers fsync each file before renaming it into the temp folder.
    const cfg = opts.config;
    if (update.kind === 'lora') {
      writePeftAdapter(tmp, new Lora(cfg, update.spec, update.data), { baseModel: opts.modelDir });
    } else {
      const params = paramStoreOver(tensorSpecs(cfg), new Float32Array(update.params));
      writeModelFiles(tmp, opts.modelDir, params, 'F32');
    }
    fsyncDir(tmp);
    // Left by a run that crashed after publishing this number but before its checkpoint named it.
    if (existsSync(final)) rmSync(final, { recursive: true, force: true });
    renameSync(tmp, final);
    fsyncDir(versionsDir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  for (const e of readdirSync(versionsDir)) {
    const m = VERSION_DIR.exec(e);
    if (m && Number(m[1]) <= update.version - keep) rmSync(join(versionsDir, e), { recursive: true, force: true });
  }
  return { version: update.version, kind: update.kind, path: final, update };
}

/**
 * The PolicyVersion a folder holds, its kind told by its files. `version` defaults to the N of a
 * folder named v-<N>; a folder that is neither a PEFT adapter nor a model folder is an error.
 */
export function policyVersionAt(path: string, version?: number): PolicyVersion {
  const n = version ?? Number(VERSION_DIR.exec(basename(path))?.[1] ?? Number.NaN);
  if (!(Number.isInteger(n) && n >= 0))
    throw new PolicyVersionError(`${path}: no version number (name the folder v-<N> or give the version)`);
  return { version: n, kind: kindOf(path), path };
}

/** The weights of `v` for a sampler of the model `cfg`: its in-memory update, else read from its folder. */
export function readPolicyUpdate(v: PolicyVersion, cfg: ModelConfig): PolicyUpdate {
  if (v.update) {
    if (v.update.version !== v.version || v.update.kind !== v.kind)
      throw new PolicyVersionError(
        `version ${v.version} (${v.kind}) carries the weights of version ${v.update.version} (${v.update.kind})`,
      );
    return v.update;
  }
  if (v.path === null) throw new PolicyVersionError(`version ${v.version} has neither a folder nor weights`);
  const kind = kindOf(v.path);
  if (kind !== v.kind)
    throw new PolicyVersionError(`${v.path}: holds a ${kindName(kind)}, version ${v.version} says ${kindName(v.kind)}`);
  if (kind === 'lora') {
    const lora = readPeftAdapter(v.path, cfg);
    return { version: v.version, kind, spec: lora.spec, data: lora.data };
  }
  // loadWeights checks every tensor's presence and shape against the sampler's model.
  return { version: v.version, kind, params: loadWeights(v.path, cfg).data.buffer as SharedArrayBuffer };
}

function kindOf(path: string): 'lora' | 'full' {
  if (!(existsSync(path) && statSync(path).isDirectory()))
    throw new PolicyVersionError(`${path}: no such folder (not a policy version)`);
  if (existsSync(join(path, ADAPTER_CONFIG))) return 'lora';
  if (
    existsSync(join(path, 'config.json')) &&
    (existsSync(join(path, 'model.safetensors')) || existsSync(join(path, 'model.safetensors.index.json')))
  )
    return 'full';
  throw new PolicyVersionError(
    `${path} is not a policy version: expected a PEFT LoRA adapter (${ADAPTER_CONFIG} + ${ADAPTER_WEIGHTS}) ` +
      'or a model folder (config.json + model.safetensors)',
  );
}

function kindName(kind: 'lora' | 'full'): string {
  return kind === 'lora' ? 'LoRA adapter' : 'full model';
}
