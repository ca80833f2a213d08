// openclaw-rl model init --family qwen3 --out DIR [--preset tiny|small|qwen3-0.6b] [size flags]
//
//   openclaw-rl model init --family qwen3 --preset tiny --out models/tiny
//   openclaw-rl model init --family llama --layers 4 --hidden 256 --heads 8 --kv-heads 2 --out models/l4

import { PRESETS, writeModelFolder, type ModelShape } from '../engine/local/model/init.js';
import type { ModelFamily } from '../engine/local/model/config.js';
import { CliError, numberFlag, parseFlags, stringFlag } from './args.js';

const USAGE = `usage: openclaw-rl model init --family qwen3|qwen2|llama --out DIR [options]

options:
  --preset NAME        tiny (default), small, qwen3-0.6b (the real Qwen3-0.6B shapes)
  --layers N --hidden N --heads N --kv-heads N --head-dim N --ffn N
  --vocab N            rows of the embedding (>= the tokenizer's size)
  --tokenizer-vocab N  target size of the trained tokenizer (default min(vocab, 4096))
  --context N          max_position_embeddings
  --untied             separate lm_head instead of tied embeddings
  --dtype F32|BF16     stored weight type (default F32)
  --shards N           split the weights into N safetensors shards with an index
  --seed N             random seed (default 0)
  --init-std X         standard deviation of the weights (default 0.02)`;

export async function runModelInit(argv: string[]): Promise<number> {
  const v = parseFlags(
    argv,
    {
      family: { type: 'string' },
      out: { type: 'string' },
      preset: { type: 'string' },
      layers: { type: 'string' },
      hidden: { type: 'string' },
      heads: { type: 'string' },
      'kv-heads': { type: 'string' },
      'head-dim': { type: 'string' },
      ffn: { type: 'string' },
      vocab: { type: 'string' },
      'tokenizer-vocab': { type: 'string' },
      context: { type: 'string' },
      untied: { type: 'boolean' },
      dtype: { type: 'string' },
      shards: { type: 'string' },
      seed: { type: 'string' },
      'init-std': { type: 'string' },
    },
    USAGE,
  );
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const family = stringFlag(v, 'family', USAGE);
  if (!['qwen3', 'qwen2', 'llama'].includes(family))
    throw new CliError(`--family must be qwen3, qwen2 or llama, got "${family}"`);
  const out = stringFlag(v, 'out', USAGE);
  const presetName = (v.preset as string | undefined) ?? 'tiny';
  const preset = PRESETS[presetName];
  if (!preset) throw new CliError(`--preset must be one of ${Object.keys(PRESETS).join(', ')}, got "${presetName}"`);
  const int = (name: string) => numberFlag(v, name, { integer: true, min: 1 });
  const hiddenSize = int('hidden') ?? preset.hiddenSize;
  const numHeads = int('heads') ?? preset.numHeads;
  const shape: ModelShape = {
    family: family as ModelFamily,
    vocabSize: int('vocab') ?? preset.vocabSize,
    hiddenSize,
    intermediateSize: int('ffn') ?? preset.intermediateSize,
    numLayers: int('layers') ?? preset.numLayers,
    numHeads,
    numKvHeads: int('kv-heads') ?? (v.heads ? numHeads : preset.numKvHeads),
    headDim: int('head-dim') ?? (v.hidden || v.heads ? hiddenSize / numHeads : preset.headDim),
    maxPositionEmbeddings: int('context') ?? preset.maxPositionEmbeddings,
    tieWordEmbeddings: v.untied ? false : preset.tieWordEmbeddings,
  };
  if (!Number.isInteger(shape.headDim) || shape.headDim % 2 !== 0)
    throw new CliError(`head dim ${shape.headDim} must be an even integer (set --head-dim)`);
  if (shape.numHeads % shape.numKvHeads !== 0)
    throw new CliError(`--heads ${shape.numHeads} must be a multiple of --kv-heads ${shape.numKvHeads}`);
  const dtype = ((v.dtype as string | undefined) ?? 'F32').toUpperCase();
  if (dtype !== 'F32' && dtype !== 'BF16') throw new CliError(`--dtype must be F32 or BF16, got "${dtype}"`);
  const t0 = performance.now();
  const cfg = writeModelFolder({
    out,
    shape,
    dtype,
    seed: numberFlag(v, 'seed', { integer: true, min: 0 }) ?? 0,
    shards: int('shards') ?? 1,
    tokenizerVocab: int('tokenizer-vocab') ?? Math.min(shape.vocabSize, 4096),
    initStd: numberFlag(v, 'init-std', { min: 0 }) ?? 0.02,
  });
  const params =
    cfg.vocabSize * cfg.hiddenSize * (cfg.tieWordEmbeddings ? 1 : 2) +
    cfg.numLayers *
      (cfg.hiddenSize * cfg.headDim * (2 * cfg.numHeads + 2 * cfg.numKvHeads) +
        3 * cfg.hiddenSize * cfg.intermediateSize);
  console.log(
    `wrote ${cfg.family} model to ${out}: ${cfg.numLayers} layers, hidden ${cfg.hiddenSize}, ~${(params / 1e6).toFixed(1)}M parameters, ${dtype} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
  return 0;
}
