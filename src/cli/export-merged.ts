// openclaw-rl export --merge --model DIR --adapter DIR --out DIR [--dtype F32|BF16]
//
//   openclaw-rl export --merge --model models/small --adapter adapters/a1 --out models/small-a1
//
// Folds a PEFT LoRA adapter into the base weights (W + alpha/r * B A) and writes a complete
// model folder that any tool loads without PEFT.

import { loadKernels } from '../engine/local/kernels/index.js';
import { readModelFolder } from '../engine/local/model/folder.js';
import { saveModelFolder } from '../engine/local/model/save.js';
import { loadWeights } from '../engine/local/model/weights.js';
import { mergeLora, readPeftAdapter } from '../engine/local/train/peft-adapter.js';
import { CliError, parseFlags, stringFlag } from './args.js';

const USAGE = `usage: openclaw-rl export --merge --model DIR --adapter DIR --out DIR [--dtype F32|BF16]

options:
  --model DIR     the base model folder the adapter was trained on
  --adapter DIR   a PEFT adapter folder (adapter_config.json + adapter_model.safetensors)
  --out DIR       a new folder for the merged model
  --dtype D       stored weight type (default F32)`;

export async function runMergeExport(argv: string[]): Promise<number> {
  const v = parseFlags(
    argv,
    {
      merge: { type: 'boolean' },
      model: { type: 'string' },
      adapter: { type: 'string' },
      out: { type: 'string' },
      dtype: { type: 'string' },
    },
    USAGE,
  );
  if (v.help) {
    console.log(USAGE);
    return 0;
  }
  const modelDir = stringFlag(v, 'model', USAGE);
  const adapterDir = stringFlag(v, 'adapter', USAGE);
  const out = stringFlag(v, 'out', USAGE);
  const dtype = ((v.dtype as string | undefined) ?? 'F32').toUpperCase();
  if (dtype !== 'F32' && dtype !== 'BF16') throw new CliError(`--dtype must be F32 or BF16, got "${dtype}"`);
  const folder = readModelFolder(modelDir);
  const lora = readPeftAdapter(adapterDir, folder.config);
  const merged = mergeLora(loadWeights(modelDir, folder.config), lora, loadKernels());
  saveModelFolder(out, modelDir, merged, dtype);
  console.error(`merged the rank-${lora.spec.rank} adapter ${adapterDir} into ${modelDir}: wrote ${out}`);
  return 0;
}
