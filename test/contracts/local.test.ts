// The contract suite (test/contracts/) against the local engine: its Sampler and Scorer with
// versions read from folders, and its learner (LoRA and full fine-tuning) publishing in memory
// and to a folder.

import { join } from 'node:path';
import { LocalEngine } from '../../src/engine/local/engine.js';
import { LocalLearner } from '../../src/engine/local/learner.js';
import { readModelFolder } from '../../src/engine/local/model/folder.js';
import { policyVersionAt, writePolicyVersion } from '../../src/engine/local/policy-versions.js';
import { makeTinyModel, scratchDir } from '../helpers/models.js';
import { randomLoraUpdate } from '../helpers/policy-updates.js';
import { learnerContract } from './learner.js';
import { type SamplerFixture, samplerContract, scorerContract } from './sampler.js';

const samplerModel = makeTinyModel({ family: 'qwen3', seed: 61 });

async function openLocalSampler(): Promise<SamplerFixture> {
  const engine = await LocalEngine.open(samplerModel);
  const config = engine.folder.config;
  const versionsDir = join(scratchDir('ocrl-contract-versions-'), 'versions');
  let last = engine.version;
  return {
    sampler: engine,
    scorer: engine,
    vocab: config.vocabSize,
    servingVersion: engine.version,
    async nextVersion() {
      const update = randomLoraUpdate(config, ++last, 100 + last);
      const written = writePolicyVersion(versionsDir, update, { modelDir: samplerModel, config });
      // Only the folder, as a sampler in another process would get it.
      return policyVersionAt(written.path!);
    },
    inFlight: () => Atomics.load(engine.activity, 0),
    close: () => engine.close(),
  };
}

samplerContract('local engine, versions read from folders', openLocalSampler);
scorerContract('local engine', openLocalSampler);

const learnerModel = makeTinyModel({ family: 'qwen3', seed: 51, initStd: 0.05 });

learnerContract('local learner', async () => {
  const engine = await LocalEngine.open(learnerModel);
  return {
    cfg: readModelFolder(learnerModel).config,
    reader: engine,
    open: (config, dirs) => LocalLearner.open(engine, { config, ...dirs }),
    openSampler: () => LocalEngine.open(learnerModel),
    close: () => engine.close(),
  };
}, ['lora', 'full']);
