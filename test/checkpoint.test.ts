// What training writes: PEFT adapters (round trip, names other tools write, bad folders), the
// merge for export (W' x = W x + scale B A x through the trainer's own linear forward), and
// training checkpoints that a crash at any instant leaves loadable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { modelConfigOf, PRESETS, randomParams } from '../src/engine/local/model/init.js';
import { type TensorToWrite, writeSafetensors } from '../src/engine/local/model/safetensors.js';
import { createRng } from '../src/engine/local/sampling/random.js';
import { loadCheckpoint, saveCheckpoint, type TrainingCheckpoint } from '../src/engine/local/train/checkpoint.js';
import {
  ADAPTER_CONFIG,
  ADAPTER_WEIGHTS,
  mergeLora,
  readPeftAdapter,
  writePeftAdapter,
} from '../src/engine/local/train/peft-adapter.js';
import { linearForward } from '../src/engine/local/train/linear.js';
import { gemmFor } from '../src/engine/local/precision.js';
import { linearDims, Lora, LORA_TARGETS, PEFT_MODULE } from '../src/engine/local/train/lora.js';
import { scratchDir } from './helpers/models.js';

const cfg = modelConfigOf({ family: 'qwen3', ...PRESETS.tiny!, numLayers: 2 }, [0]);
const root = scratchDir('ocrl-ckpt-');
let folders = 0;
const freshDir = () => join(root, `d${folders++}`);

/** An adapter with non-zero A and B (a fresh PEFT adapter has B = 0, which would hide mistakes). */
function randomLora(targets = [...LORA_TARGETS]): Lora {
  const lora = new Lora(cfg, { rank: 4, alpha: 8, targets });
  const rng = createRng(7);
  for (let i = 0; i < lora.data.length; i++) lora.data[i] = rng.next() - 0.5;
  return lora;
}

test('PEFT adapter round trip: config fields as PEFT writes them, tensors exact', () => {
  const dir = freshDir(),
    lora = randomLora(['q', 'v', 'down']);
  writePeftAdapter(dir, lora, { baseModel: 'Qwen/Qwen3-4B' });
  const config = JSON.parse(readFileSync(join(dir, ADAPTER_CONFIG), 'utf8')) as Record<string, unknown>;
  assert.deepEqual(
    { ...config },
    {
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      base_model_name_or_path: 'Qwen/Qwen3-4B',
      r: 4,
      lora_alpha: 8,
      lora_dropout: 0,
      target_modules: ['q_proj', 'v_proj', 'down_proj'],
      bias: 'none',
      fan_in_fan_out: false,
      inference_mode: true,
      use_rslora: false,
      use_dora: false,
      modules_to_save: null,
    },
  );
  const back = readPeftAdapter(dir, cfg);
  assert.deepEqual(back.spec, lora.spec);
  assert.deepEqual(back.data, lora.data);
  assert.deepEqual(
    back.tensors.map((t) => t.name),
    lora.tensors.map((t) => t.name),
  );
});

test('PEFT adapters with the names other tools write (no base_model.model. prefix, .default. adapter name) load', () => {
  const lora = randomLora(['k', 'up']);
  const variants: ((name: string) => string)[] = [
    (n) => n.replace(/^base_model\.model\./, ''),
    (n) => n.replace(/\.lora_([AB])\.weight$/, '.lora_$1.default.weight'),
    (n) => n.replace(/^base_model\.model\./, '').replace(/\.lora_([AB])\.weight$/, '.lora_$1.default.weight'),
  ];
  for (const rename of variants) {
    const dir = freshDir();
    mkdirSync(dir);
    writeSafetensors(
      join(dir, ADAPTER_WEIGHTS),
      lora.tensors.map((t) => ({ name: rename(t.name), shape: t.shape, data: lora.view(t) })),
      'BF16',
    );
    // Written by hand, the way PEFT does: module paths and a different order are fine.
    writeFileSync(
      join(dir, ADAPTER_CONFIG),
      JSON.stringify({
        peft_type: 'LORA',
        r: 4,
        lora_alpha: 8,
        target_modules: ['mlp.up_proj', 'k_proj'],
        lora_dropout: 0.05,
      }),
    );
    const back = readPeftAdapter(dir, cfg);
    assert.deepEqual(back.spec.targets, ['k', 'up']);
    for (let i = 0; i < lora.data.length; i++)
      assert.ok(Math.abs(back.data[i]! - lora.data[i]!) <= 2 ** -8 * Math.abs(lora.data[i]!));
  }
});

test('bad adapter folders get errors naming the file and the problem', () => {
  const good = freshDir(),
    lora = randomLora(['q', 'v']);
  writePeftAdapter(good, lora, { baseModel: 'base' });
  const goodConfig = JSON.parse(readFileSync(join(good, ADAPTER_CONFIG), 'utf8')) as Record<string, unknown>;
  const tensors: TensorToWrite[] = lora.tensors.map((t) => ({ name: t.name, shape: t.shape, data: lora.view(t) }));
  const folder = (config: unknown, weights: TensorToWrite[] | null): string => {
    const dir = freshDir();
    mkdirSync(dir);
    if (config !== undefined)
      writeFileSync(join(dir, ADAPTER_CONFIG), typeof config === 'string' ? config : JSON.stringify(config));
    if (weights) writeSafetensors(join(dir, ADAPTER_WEIGHTS), weights);
    return dir;
  };
  const cases: [string, string, RegExp][] = [
    ['no config', folder(undefined, tensors), /adapter_config.json: missing \(not a PEFT adapter folder\?\)/],
    ['bad JSON', folder('{"r": 4,', tensors), /adapter_config.json: not valid JSON/],
    ['not LoRA', folder({ ...goodConfig, peft_type: 'IA3' }, tensors), /peft_type is "IA3"; only "LORA" adapters load/],
    ['rsLoRA', folder({ ...goodConfig, use_rslora: true }, tensors), /unsupported setting: use_rslora true/],
    [
      'regex targets',
      folder({ ...goodConfig, target_modules: '.*proj' }, tensors),
      /"target_modules" must be a list of module names or "all-linear".*regular expressions are not supported/,
    ],
    [
      'unknown target',
      folder({ ...goodConfig, target_modules: ['q_proj', 'lm_head'] }, tensors),
      /target module "lm_head" is not one of q_proj/,
    ],
    ['no weights', folder(goodConfig, null), /adapter_model.safetensors: missing/],
    [
      'missing tensor',
      folder(goodConfig, tensors.slice(1)),
      /adapter_model.safetensors: missing tensor "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" \[4, 64\]/,
    ],
    [
      'wrong rank',
      folder({ ...goodConfig, r: 8 }, tensors),
      /tensor ".*q_proj.lora_A.weight" has shape \[4, 64\], r=8 and this model need \[8, 64\]/,
    ],
    [
      'extra layer',
      folder(goodConfig, [...tensors, { ...tensors[0]!, name: tensors[0]!.name.replace('layers.0', 'layers.9') }]),
      /tensors ".*layers.9.*" match no layer or target module/,
    ],
    [
      'not LoRA tensor',
      folder(goodConfig, [
        ...tensors,
        { name: 'base_model.model.lm_head.weight', shape: [4], data: new Float32Array(4) },
      ]),
      /tensor "base_model.model.lm_head.weight" is not a LoRA A\/B weight/,
    ],
  ];
  for (const [what, dir, message] of cases) assert.throws(() => readPeftAdapter(dir, cfg), message, what);
  const pickle = folder(goodConfig, null);
  writeFileSync(join(pickle, 'adapter_model.bin'), 'x');
  assert.throws(
    () => readPeftAdapter(pickle, cfg),
    /missing \(adapter_model.bin, a PyTorch pickle, is not read: save with safe_serialization=True\)/,
  );
});

test("mergeLora: the merged linear equals base plus adapter, x W'^T = x W^T + scale (x A^T) B^T", () => {
  const params = randomParams(cfg, 3, 0.2),
    lora = randomLora(['q', 'k', 'o', 'gate', 'down']);
  const merged = mergeLora(params, lora, portableKernels);
  const T = 3,
    rng = createRng(11);
  const fp32 = gemmFor(portableKernels, 'fp32');
  for (let l = 0; l < cfg.numLayers; l++) {
    for (const target of LORA_TARGETS) {
      const name = `model.layers.${l}.${PEFT_MODULE[target]}.weight`;
      const [inDim, outDim] = linearDims(cfg, target);
      const x = Float32Array.from({ length: T * inDim }, () => rng.next() - 0.5);
      const withAdapter = new Float32Array(T * outDim),
        viaMerge = new Float32Array(T * outDim);
      const pair = lora.weights(l, target);
      const adapter = pair ? { ...pair, dA: new Float32Array(0), dB: new Float32Array(0) } : null;
      linearForward(
        fp32,
        withAdapter,
        x,
        T,
        {
          inDim,
          outDim,
          W: params.get(name),
          W16: null,
          packed: null,
          bias: null,
          dW: null,
          dBias: null,
          lora: adapter,
        },
        { data: new Float32Array(T * 4), ld: 4, col: 0 },
      );
      linearForward(
        fp32,
        viaMerge,
        x,
        T,
        { inDim, outDim, W: merged.get(name), W16: null, packed: null, bias: null, dW: null, dBias: null, lora: null },
        null,
      );
      for (let i = 0; i < withAdapter.length; i++)
        assert.ok(
          Math.abs(viaMerge[i]! - withAdapter[i]!) <= 1e-5,
          `${name}[${i}]: ${viaMerge[i]} vs ${withAdapter[i]}`,
        );
      if (!pair) assert.deepEqual(merged.get(name), params.get(name), `${name} is not adapted and must not change`);
    }
  }
  assert.deepEqual(merged.get('model.norm.weight'), params.get('model.norm.weight'));
  assert.notEqual(merged.data, params.data);
});

function checkpointAt(step: number, n = 50): TrainingCheckpoint {
  const fill = (k: number) => Float32Array.from({ length: n }, (_, i) => step * 1000 + k * 100 + i);
  return {
    step,
    consumedSampleIds: Array.from({ length: step }, (_, i) => `sample-${i}`),
    lora: { rank: 4, alpha: 8, targets: ['q', 'v'] },
    configHash: 'abc123',
    publishedVersion: step,
    trainable: fill(0),
    m: fill(1),
    v: fill(2),
  };
}

test('checkpoints: save, load, replace; only the current version is kept', () => {
  const dir = freshDir();
  assert.equal(loadCheckpoint(dir), null);
  saveCheckpoint(dir, checkpointAt(1));
  assert.deepEqual(loadCheckpoint(dir), checkpointAt(1));
  const second = saveCheckpoint(dir, checkpointAt(2));
  assert.deepEqual(loadCheckpoint(dir), checkpointAt(2));
  assert.deepEqual(readdirSync(dir).sort(), ['latest', basename(second)]);
});

test('checkpoints: a crash at any point of a save leaves the previous checkpoint loadable', () => {
  const dir = freshDir();
  saveCheckpoint(dir, checkpointAt(4));
  // Crash while writing: a partial temp version (truncated state, no metadata) and a pointer
  // file written but never renamed over `latest`.
  const partial = join(dir, '.tmp-step-0000000005-deadbeef');
  mkdirSync(partial);
  writeFileSync(join(partial, 'state.safetensors'), Buffer.alloc(100));
  writeFileSync(join(dir, 'latest.tmp-99999'), 'step-0000000005-deadbeef\n');
  assert.deepEqual(loadCheckpoint(dir), checkpointAt(4));
  // Crash after the new version was renamed into place but before `latest` named it.
  const uncommitted = saveCheckpoint(freshDir(), checkpointAt(5));
  const copy = join(dir, basename(uncommitted));
  mkdirSync(copy);
  for (const f of readdirSync(uncommitted)) writeFileSync(join(copy, f), readFileSync(join(uncommitted, f)));
  assert.deepEqual(loadCheckpoint(dir), checkpointAt(4));
  // The next save clears every leftover.
  const next = saveCheckpoint(dir, checkpointAt(6));
  assert.deepEqual(readdirSync(dir).sort(), ['latest', basename(next)]);
  assert.deepEqual(loadCheckpoint(dir), checkpointAt(6));
});

test('checkpoints: mismatched or damaged checkpoints get clear errors', () => {
  const dir = freshDir();
  const version = saveCheckpoint(dir, checkpointAt(7));
  assert.throws(
    () => loadCheckpoint(dir, { values: 60, lora: checkpointAt(7).lora }),
    /checkpoint.json: holds 50 trainable values, this model needs 60/,
  );
  assert.throws(
    () => loadCheckpoint(dir, { values: 50, lora: 'full' }),
    /trains a LoRA \(r=4, alpha=8, targets q,v\), this run trains all parameters/,
  );
  assert.deepEqual(loadCheckpoint(dir, { values: 50, lora: checkpointAt(7).lora }), checkpointAt(7));
  writeSafetensors(join(version, 'state.safetensors'), [
    { name: 'trainable', shape: [49], data: new Float32Array(49) },
  ]);
  assert.throws(
    () => loadCheckpoint(dir),
    /state.safetensors: tensor "trainable" holds 49 values, checkpoint.json says 50/,
  );
  rmSync(version, { recursive: true });
  assert.throws(() => loadCheckpoint(dir), /latest: names step-0000000007-[0-9a-f]+, but .*checkpoint.json is missing/);
  writeFileSync(join(dir, 'latest'), '../../etc\n');
  assert.throws(() => loadCheckpoint(dir), /latest: names "..\/..\/etc", not a checkpoint version/);
  assert.throws(
    () => saveCheckpoint(dir, { ...checkpointAt(8), m: new Float32Array(3) }),
    /trainable 50, m 3, v 50 values; they must match/,
  );
  assert.deepEqual(
    readdirSync(dir).filter((e) => e.startsWith('.tmp-')),
    [],
    'a refused save leaves nothing behind',
  );
});

test('checkpoints: a process killed at random instants while saving always leaves a complete checkpoint', async () => {
  const dir = freshDir();
  const module = new URL('../src/engine/local/train/checkpoint.js', import.meta.url).href;
  // The child saves ever larger steps, each filled with values derived from its step.
  const child = `
    const { saveCheckpoint } = await import(${JSON.stringify(module)});
    const n = 1 << 20;
    for (let step = Number(process.argv[1]); ; step++) {
      const fill = (k) => new Float32Array(n).fill(step * 10 + k);
      saveCheckpoint(${JSON.stringify(dir)}, { step, consumedSampleIds: ['s' + step], lora: 'full', configHash: 'h', trainable: fill(0), m: fill(1), v: fill(2) });
      process.stdout.write('saved\\n');
    }`;
  const rng = createRng(5);
  let lastStep = 0;
  for (let round = 0; round < 6; round++) {
    const proc = spawn(process.execPath, ['--input-type=module', '-e', child, String(lastStep + 1)], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    // Killed at a random instant after its first completed save (however slow the machine is to
    // start it), so it is usually in the middle of a later one.
    await new Promise((r) => proc.stdout!.once('data', r));
    await new Promise((r) => setTimeout(r, rng.next() * 250));
    proc.kill('SIGKILL');
    await new Promise((r) => proc.once('exit', r));
    const ckpt = loadCheckpoint(dir);
    assert.ok(ckpt, 'a save completed before the kill');
    assert.ok(ckpt.step >= lastStep, `step went back from ${lastStep} to ${ckpt.step}`);
    assert.deepEqual(ckpt.consumedSampleIds, [`s${ckpt.step}`]);
    for (const [k, values] of [ckpt.trainable, ckpt.m, ckpt.v].entries()) {
      assert.ok(
        values.every((x) => x === ckpt.step * 10 + k),
        `values of step ${ckpt.step} are complete`,
      );
    }
    lastStep = ckpt.step;
  }
  assert.ok(lastStep > 0, 'some saves completed');
});
