// The contract suite's fixture for an HTTP sampler over a protocol test double (vllm-double.ts,
// sglang-double.ts): versions written as folders the double loads by path, as a server would.

import { join } from 'node:path';
import { policyVersionAt, writePolicyVersion } from '../../src/engine/local/policy-versions.js';
import type { HttpSampler } from '../../src/engine/remote/http-sampler.js';
import type { SamplerFixture } from '../contracts/sampler.js';
import type { InferenceDouble } from './inference-double.js';
import { scratchDir } from './models.js';
import { randomLoraUpdate } from './policy-updates.js';

export function remoteFixture(
  double: InferenceDouble,
  sampler: HttpSampler,
  modelDir: string,
): SamplerFixture & { double: InferenceDouble } {
  const config = double.engine.folder.config;
  const versionsDir = join(scratchDir('ocrl-remote-versions-'), 'versions');
  let last = 0;
  return {
    double,
    sampler,
    scorer: sampler,
    vocab: config.vocabSize,
    servingVersion: 0,
    async nextVersion() {
      const update = randomLoraUpdate(config, ++last, 100 + last);
      return policyVersionAt(writePolicyVersion(versionsDir, update, { modelDir, config }).path!);
    },
    // No inFlight: a broken-out request's cancel reaches the double when its socket closes,
    // which may come after a later request on another connection, so no count read at once is
    // exact (the contract lets a backend that cannot tell omit it).
    close: () => double.close(),
  };
}
