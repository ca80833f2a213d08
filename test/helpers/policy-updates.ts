// Policy versions for tests that publish: a random LoRA adapter and perturbed full weights, far
// enough from the base that results under the wrong version would show.

import assert from 'node:assert/strict';
import type { LocalEngine } from '../../src/engine/local/engine.js';
import type { ModelConfig } from '../../src/engine/local/model/config.js';
import { createRng } from '../../src/engine/local/sampling/random.js';
import { Lora } from '../../src/engine/local/train/lora.js';
import type { GenerationEvent, PolicyUpdate } from '../../src/engine/types.js';

type LoraUpdate = Extract<PolicyUpdate, { kind: 'lora' }>;
type FullUpdate = Extract<PolicyUpdate, { kind: 'full' }>;

export function randomLoraUpdate(cfg: ModelConfig, version: number, seed: number): LoraUpdate {
  const lora = new Lora(cfg, { rank: 4, alpha: 8, targets: ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] });
  lora.initialise(seed);
  const rng = createRng(seed + 1);
  for (const t of lora.tensors) {
    if (t.part === 'B')
      lora.view(t).forEach((_, i, v) => {
        v[i] = (rng.next() - 0.5) * 0.5;
      });
  }
  return { version, kind: 'lora', spec: lora.spec, data: lora.data };
}

/** The base parameters plus uniform noise of +-0.025, in a new SharedArrayBuffer. */
export function perturbedWeightsUpdate(base: Float32Array, version: number, seed: number): FullUpdate {
  const next = new Float32Array(new SharedArrayBuffer(base.byteLength));
  const rng = createRng(seed);
  for (let i = 0; i < next.length; i++) next[i] = base[i]! + (rng.next() - 0.5) * 0.05;
  return { version, kind: 'full', params: next.buffer as SharedArrayBuffer };
}

/**
 * Publishes perturbed full weights (version 1, seed 4) while a generation is in flight, checks that
 * the generation finishes on version 0, and returns the published weights.
 */
export async function publishDuringGeneration(engine: LocalEngine, prompt: number[]): Promise<Float32Array> {
  const inFlight = engine.generate(prompt, { maxTokens: 30, seed: 1, stopTokenIds: [] })[Symbol.asyncIterator]();
  await inFlight.next();
  const update = perturbedWeightsUpdate(new Float32Array(engine.info.baseParams), 1, 4);
  await engine.publish(update);
  let last: GenerationEvent | undefined;
  for (let r = await inFlight.next(); !r.done; r = await inFlight.next()) last = r.value;
  assert.ok(last?.type === 'finish' && last.version === 0, 'the in-flight generation must finish on version 0');
  return new Float32Array(update.params);
}
