// A policy version the PyTorch learner wrote (python/openclaw_rl_learner/store.py) as the
// embedded sampler's PolicyUpdate: a PEFT LoRA adapter folder, or a full model folder.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelConfig } from '../local/model/config.js';
import { loadWeights } from '../local/model/weights.js';
import { readPeftAdapter } from '../local/train/checkpoint.js';
import type { PolicyUpdate } from '../types.js';

export function readPolicyVersion(dir: string, version: number, cfg: ModelConfig): PolicyUpdate {
  if (existsSync(join(dir, 'adapter_config.json'))) {
    const lora = readPeftAdapter(dir, cfg);
    return { version, kind: 'lora', spec: lora.spec, data: lora.data };
  }
  const params = loadWeights(dir, cfg);
  return { version, kind: 'full', params: params.data.buffer as SharedArrayBuffer };
}
