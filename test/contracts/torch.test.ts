// The learner part of the contract suite against the PyTorch learner (python/openclaw_rl_learner),
// read by the local engine from the version folders it writes. Like the other PyTorch tests it
// always runs: CI installs python3-torch, and a missing PyTorch fails here with the learner's message.

import { join } from 'node:path';
import { LocalEngine } from '../../src/engine/local/engine.js';
import { readModelFolder } from '../../src/engine/local/model/folder.js';
import { writePeftAdapter } from '../../src/engine/local/train/peft-adapter.js';
import { Lora } from '../../src/engine/local/train/lora.js';
import { DEFAULT_LAUNCH } from '../../src/engine/torch/launcher.js';
import { TorchLearner } from '../../src/engine/torch/learner.js';
import { makeTinyModel, PYTHON, scratchDir } from '../helpers/models.js';
import { learnerContract } from './learner.js';

const model = makeTinyModel({ family: 'qwen3', seed: 51, initStd: 0.05 });

learnerContract('PyTorch learner', async () => {
  const engine = await LocalEngine.open(model);
  const cfg = readModelFolder(model).config;
  return {
    cfg,
    reader: engine,
    async open(config, dirs) {
      let initAdapter: string | null = null;
      if (config.mode.kind === 'lora') {
        // The embedded learner's seeded start, as serve hands it over (cli/serve-torch.ts).
        const lora = new Lora(cfg, config.mode.spec);
        lora.initialise(config.seed);
        initAdapter = join(scratchDir('ocrl-contract-init-'), 'adapter');
        writePeftAdapter(initAdapter, lora, { baseModel: model });
      }
      return TorchLearner.open({
        launch: { ...DEFAULT_LAUNCH, python: PYTHON },
        config,
        modelDir: model,
        initAdapter,
        versionAfter: engine.version,
        ...dirs,
      });
    },
    openSampler: () => LocalEngine.open(model),
    close: () => engine.close(),
  };
}, ['lora']);
