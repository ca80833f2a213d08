// The benchmark models: generated once into .cache/bench-models/ (the 0.6B one in BF16, as
// Qwen3 ships, 1.2 GB), so every benchmark measures the same weights.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRESETS, writeModelFolder } from '../src/engine/local/model/init.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const PYTHON = process.env.OPENCLAW_RL_PYTHON ?? '/usr/bin/python3';
export type BenchPreset = 'tiny' | 'small' | 'qwen3-0.6b';

/** The preset's model; with `context`, a copy whose context is at least that long (for long-context runs). */
export function benchModel(preset: BenchPreset, context?: number): string {
  const shape = PRESETS[preset]!;
  const maxPositionEmbeddings = Math.max(shape.maxPositionEmbeddings, context ?? 0);
  const name =
    maxPositionEmbeddings === shape.maxPositionEmbeddings ? preset : `${preset}-${maxPositionEmbeddings / 1024}k`;
  const dir = join(ROOT, '.cache', 'bench-models', name);
  if (!existsSync(join(dir, 'config.json'))) {
    console.log(`generating ${name} model in ${dir} ...`);
    writeModelFolder({
      out: dir,
      shape: { family: 'qwen3', ...shape, maxPositionEmbeddings },
      seed: 0,
      dtype: preset === 'qwen3-0.6b' ? 'BF16' : 'F32',
      shards: 1,
      tokenizerVocab: Math.min(shape.vocabSize, 4096),
      initStd: 0.02,
    });
  }
  return dir;
}
