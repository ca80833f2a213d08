// The benchmark models: generated once into .cache/bench-models/ (the 0.6B one in BF16, as
// Qwen3 ships, 1.2 GB), so every benchmark measures the same weights.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRESETS, writeModelFolder } from '../src/engine/local/model/init.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const PYTHON = process.env.OPENCLAW_RL_PYTHON ?? '/usr/bin/python3';
export type BenchPreset = 'tiny' | 'qwen3-0.6b';

export function benchModel(preset: BenchPreset): string {
  const dir = join(ROOT, '.cache', 'bench-models', preset);
  if (!existsSync(join(dir, 'config.json'))) {
    console.log(`generating ${preset} model in ${dir} ...`);
    writeModelFolder({ out: dir, shape: { family: 'qwen3', ...PRESETS[preset]! }, seed: 0, dtype: preset === 'tiny' ? 'F32' : 'BF16', shards: 1, tokenizerVocab: Math.min(PRESETS[preset]!.vocabSize, 4096), initStd: 0.02 });
  }
  return dir;
}
