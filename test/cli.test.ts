// The command line as a user runs it: model init, generate --json, train (LoRA and full),
// with the errors a person sees for bad input.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { readPeftAdapter } from '../src/engine/local/train/peft-adapter.js';
import { scratchDir } from './helpers/models.js';

const CLI = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const cli = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
const work = scratchDir('ocrl-cli-');
const model = join(work, 'model');

test.before(() => {
  const r = cli('model', 'init', '--family', 'qwen3', '--preset', 'tiny', '--out', model, '--init-std', '0.05');
  assert.equal(r.status, 0, r.stderr);
});

test('generate --json prints ids with both log-probs, and is reproducible with a seed', () => {
  const run = () =>
    cli(
      'generate',
      '--model',
      model,
      '--prompt',
      'Hello there',
      '--json',
      '--max-tokens',
      '6',
      '--seed',
      '4',
      '--temperature',
      '0.8',
    );
  const a = run(),
    b = run();
  assert.equal(a.status, 0, a.stderr);
  const out = JSON.parse(a.stdout) as {
    completionIds: number[];
    logprobs: number[];
    sampledLogprobs: number[];
    promptIds: number[];
    finishReason: string;
  };
  assert.ok(out.completionIds.length > 0 && out.completionIds.length <= 6);
  assert.equal(out.logprobs.length, out.completionIds.length);
  assert.equal(out.sampledLogprobs.length, out.completionIds.length);
  assert.ok(out.logprobs.every((x) => x <= 0) && out.sampledLogprobs.every((x) => x <= 0));
  assert.deepEqual(JSON.parse(b.stdout).completionIds, out.completionIds);
});

test('generate refuses a broken folder with the file named', () => {
  const r = cli('generate', '--model', join(work, 'nowhere'), '--prompt', 'x');
  assert.equal(r.status, 1);
  assert.match(r.stderr, /model folder .*nowhere does not exist/);
});

test('generate --kv-cache-dtype int8 reports int8 rows; a model or a value it cannot take is refused', () => {
  const wide = join(work, 'head-dim-32');
  const init = cli('model', 'init', '--family', 'qwen3', '--preset', 'tiny', '--head-dim', '32', '--out', wide);
  assert.equal(init.status, 0, init.stderr);
  const r = cli(
    'generate',
    '--model',
    wide,
    '--prompt',
    'Hello',
    '--json',
    '--max-tokens',
    '4',
    '--kv-cache-dtype',
    'int8',
  );
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { completionIds: number[]; kvDtype: string };
  assert.equal(out.kvDtype, 'int8');
  assert.ok(out.completionIds.length > 0);
  const narrow = cli('generate', '--model', model, '--prompt', 'x', '--kv-cache-dtype', 'int8');
  assert.equal(narrow.status, 1);
  assert.match(narrow.stderr, /head_dim a multiple of 32; this model's is 16: use bf16/);
  const bad = cli('generate', '--model', model, '--prompt', 'x', '--kv-cache-dtype', 'fp8');
  assert.equal(bad.status, 2, 'a usage error');
  assert.match(bad.stderr, /--kv-cache-dtype must be auto, f32, bf16 or int8, got "fp8"/);
});

const samples = [
  { promptIds: [10, 11, 12], completionIds: [40, 41, 42, 43], advantages: 1 },
  { promptIds: [20, 21], completionIds: [50, 51], advantages: [-1, 0.5], rolloutLogprobs: [-6.1, -6.2] },
];

test('train writes a PEFT adapter that loads, with a progress line per step', () => {
  const file = join(work, 'samples.jsonl');
  writeFileSync(file, `${samples.map((s) => JSON.stringify(s)).join('\n')}\n`);
  const out = join(work, 'adapter');
  const r = cli(
    'train',
    '--model',
    model,
    '--samples',
    file,
    '--out',
    out,
    '--lora-rank',
    '4',
    '--steps',
    '3',
    '--batch-size',
    '2',
  );
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr.split('\n').filter((l) => /^step +\d+\/3 +loss/.test(l)).length, 3);
  const lora = readPeftAdapter(out, readModelFolder(model).config);
  assert.equal(lora.spec.rank, 4);
  assert.ok(
    lora.tensors.some((t) => t.part === 'B' && lora.view(t).some((x) => x !== 0)),
    'the adapter did not train',
  );
});

test('train with --lora-rank 0 writes a complete model folder that generates', () => {
  const file = join(work, 'samples-full.jsonl');
  writeFileSync(file, samples.map((s) => JSON.stringify(s)).join('\n'));
  const out = join(work, 'full');
  const r = cli('train', '--model', model, '--samples', file, '--out', out, '--lora-rank', '0', '--steps', '2');
  assert.equal(r.status, 0, r.stderr);
  const g = cli('generate', '--model', out, '--prompt', 'hi', '--json', '--max-tokens', '3');
  assert.equal(g.status, 0, g.stderr);
});

test('a malformed samples file is reported by line and nothing is trained or written', () => {
  const file = join(work, 'bad.jsonl');
  writeFileSync(
    file,
    [
      JSON.stringify(samples[0]),
      '{"promptIds": [1, 2], "completionIds": [3]',
      JSON.stringify({ promptIds: [1], completionIds: [2, 3], advantages: [1] }),
      JSON.stringify({ promptIds: [1], completionIds: [99999], advantages: 1 }),
    ].join('\n'),
  );
  const out = join(work, 'never');
  const r = cli('train', '--model', model, '--samples', file, '--out', out);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /nothing was trained: 3 bad lines/);
  assert.match(r.stderr, /bad.jsonl:2: not valid JSON/);
  assert.match(r.stderr, /bad.jsonl:3: "advantages" has 1 values, "completionIds" has 2 tokens/);
  assert.match(r.stderr, /bad.jsonl:4: "completionIds" holds 99999, not a token id of this model/);
  assert.equal(existsSync(out), false);
});

test('export --merge folds the adapter in: the merged folder scores like base + adapter', async () => {
  const { LocalEngine } = await import('../src/engine/local/engine.js');
  const adapter = join(work, 'adapter');
  const merged = join(work, 'merged');
  const r = cli('export', '--merge', '--model', model, '--adapter', adapter, '--out', merged);
  assert.equal(r.status, 0, r.stderr);
  const prompt = [10, 11, 12],
    completion = [40, 41, 42, 43];
  const mergedEngine = await LocalEngine.open(merged);
  const baseEngine = await LocalEngine.open(model);
  try {
    const lora = readPeftAdapter(adapter, readModelFolder(model).config);
    await baseEngine.publish({ version: 1, kind: 'lora', spec: lora.spec, data: lora.data });
    const viaAdapter = await baseEngine.logprobs(prompt, completion, { version: 1 });
    const viaMerge = await mergedEngine.logprobs(prompt, completion);
    const base = await baseEngine.logprobs(prompt, completion, { version: 0 });
    for (let i = 0; i < completion.length; i++)
      assert.ok(Math.abs(viaAdapter.logprobs[i]! - viaMerge.logprobs[i]!) < 1e-4);
    assert.ok(
      viaAdapter.logprobs.some((x, i) => Math.abs(x - base.logprobs[i]!) > 1e-4),
      'the adapter changed nothing',
    );
  } finally {
    await mergedEngine.close();
    await baseEngine.close();
  }
});
