// Policy versions on disk (src/engine/local/policy-versions.ts): written atomically in the PyTorch
// learner's layout, read back bit for bit, older ones pruned, crash leftovers cleared, and a
// folder that is no version (or not the one it claims) refused with the reason.

import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { loadWeights } from '../src/engine/local/model/weights.js';
import {
  PolicyVersionError,
  policyVersionAt,
  readPolicyUpdate,
  writePolicyVersion,
} from '../src/engine/local/policy-versions.js';
import type { PolicyUpdate } from '../src/engine/types.js';
import { makeTinyModel, scratchDir } from './helpers/models.js';
import { perturbedWeightsUpdate, randomLoraUpdate } from './helpers/policy-updates.js';

const modelDir = makeTinyModel({ family: 'qwen3', seed: 71 });
const cfg = readModelFolder(modelDir).config;
const base = loadWeights(modelDir, cfg).data;
const scratch = scratchDir('ocrl-versions-');
let runs = 0;
const freshDir = () => join(scratch, `versions-${++runs}`);

test('a LoRA version: a PEFT adapter folder, read back bit for bit from the folder alone', () => {
  const dir = freshDir();
  const update = randomLoraUpdate(cfg, 3, 5);
  const v = writePolicyVersion(dir, update, { modelDir, config: cfg });
  assert.equal(v.path, join(dir, 'v-3'));
  assert.equal(v.update, update, 'the written version carries its in-memory update');
  assert.deepEqual(readdirSync(v.path!).sort(), ['adapter_config.json', 'adapter_model.safetensors']);
  const onDisk = policyVersionAt(v.path!);
  assert.deepEqual(onDisk, { version: 3, kind: 'lora', path: v.path });
  const back = readPolicyUpdate(onDisk, cfg);
  assert.ok(back.kind === 'lora');
  assert.deepEqual(back.spec, update.spec);
  assert.deepEqual(back.data, update.data);
});

test('a full version: a model folder (config, tokenizer, weights) that loads as a model', () => {
  const dir = freshDir();
  const update = perturbedWeightsUpdate(base, 1, 9);
  const v = writePolicyVersion(dir, update, { modelDir, config: cfg });
  assert.equal(readModelFolder(v.path!).config.hiddenSize, cfg.hiddenSize);
  const back = readPolicyUpdate(policyVersionAt(v.path!), cfg);
  assert.ok(back.kind === 'full');
  assert.deepEqual(new Float32Array(back.params), new Float32Array(update.params));
});

test('the two newest versions are kept; a crashed write leaves nothing a reader would take for a version', () => {
  const dir = freshDir();
  for (const n of [1, 2, 3]) writePolicyVersion(dir, randomLoraUpdate(cfg, n, n), { modelDir, config: cfg });
  assert.deepEqual(readdirSync(dir).sort(), ['v-2', 'v-3']);

  // A write that fails half-way (the config files are copied, the weights do not fit) leaves no
  // v-4 and no temp folder.
  const short: PolicyUpdate = { version: 4, kind: 'full', params: new SharedArrayBuffer(64) };
  assert.throws(() => writePolicyVersion(dir, short, { modelDir, config: cfg }), /values but shape/);
  assert.deepEqual(readdirSync(dir).sort(), ['v-2', 'v-3']);

  // What a killed writer leaves (a temp folder, a v-N no checkpoint named) goes at the next write.
  mkdirSync(join(dir, '.tmp-v-4-deadbeef'));
  mkdirSync(join(dir, 'v-4'));
  writeFileSync(join(dir, 'v-4', 'junk'), '');
  const v4 = writePolicyVersion(dir, randomLoraUpdate(cfg, 4, 4), { modelDir, config: cfg });
  assert.deepEqual(readdirSync(dir).sort(), ['v-3', 'v-4']);
  assert.equal(policyVersionAt(v4.path!).kind, 'lora');
});

test('a folder that is not a version, or not the version it claims, is refused with the reason', () => {
  const dir = freshDir();
  const lora = writePolicyVersion(dir, randomLoraUpdate(cfg, 1, 1), { modelDir, config: cfg });
  const empty = join(dir, 'v-7');
  mkdirSync(empty);
  assert.throws(() => policyVersionAt(empty), /v-7 is not a policy version: expected a PEFT LoRA adapter/);
  assert.throws(() => policyVersionAt(join(dir, 'v-8')), /v-8: no such folder/);
  assert.throws(() => policyVersionAt(modelDir), /no version number/);
  assert.equal(policyVersionAt(modelDir, 5).kind, 'full', 'a model folder is a full version');
  assert.throws(
    () => readPolicyUpdate({ version: 1, kind: 'full', path: lora.path! }, cfg),
    (e: Error) => e instanceof PolicyVersionError && /holds a LoRA adapter, version 1 says full model/.test(e.message),
  );
  const update = randomLoraUpdate(cfg, 2, 2);
  assert.throws(
    () => readPolicyUpdate({ version: 3, kind: 'lora', path: null, update }, cfg),
    /version 3 \(lora\) carries the weights of version 2/,
  );
  // An adapter for another model shape names the tensor that does not fit.
  const other = readModelFolder(makeTinyModel({ family: 'qwen3', seed: 1, shape: { hiddenSize: 32 } })).config;
  assert.throws(() => readPolicyUpdate(policyVersionAt(lora.path!), other), /adapter_model\.safetensors: tensor/);
});
