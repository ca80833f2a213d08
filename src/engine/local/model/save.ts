// Writes trained weights as a complete model folder: the source folder's config, generation
// config, tokenizer and chat template files, plus the new safetensors, all appearing at once
// (temp folder + rename) so a reader never sees half a model.

import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { makePrivateDir } from '../../../private-files.js';
import { basename, dirname, join } from 'node:path';
import { writeSafetensors } from './safetensors.js';
import type { ParamStore } from './weights.js';

const CARRIED_FILES = [
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'chat_template.jinja',
  'special_tokens_map.json',
];

export function saveModelFolder(
  out: string,
  sourceDir: string,
  params: ParamStore,
  dtype: 'F32' | 'BF16' = 'F32',
): void {
  if (existsSync(out) && readdirSync(out).length > 0)
    throw new Error(`${out} exists and is not empty; choose a new folder`);
  mkdirSync(dirname(out), { recursive: true });
  const tmp = join(dirname(out), `.${basename(out)}.tmp-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  // Trained weights: the folder is private like the store (see private-files.ts).
  makePrivateDir(tmp);
  try {
    writeModelFiles(tmp, sourceDir, params, dtype);
    if (existsSync(out)) rmSync(out, { recursive: true });
    renameSync(tmp, out);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
}

/** Writes the weights and the source folder's config and tokenizer files into dir (which exists). */
export function writeModelFiles(dir: string, sourceDir: string, params: ParamStore, dtype: 'F32' | 'BF16'): void {
  for (const f of CARRIED_FILES) if (existsSync(join(sourceDir, f))) copyFileSync(join(sourceDir, f), join(dir, f));
  writeSafetensors(
    join(dir, 'model.safetensors'),
    params.specs.map((s) => ({ name: s.name, shape: s.shape, data: params.get(s.name) })),
    dtype,
  );
}
