// The GGUF writer (src/engine/llama-cpp/gguf*.ts): number formats against hand-derived values,
// files read back by our reader, and model and LoRA adapter files that llama.cpp loads and
// computes the local engine's log-probs with (Qwen3 as written, Llama 3 with permuted q/k rows
// and its rope_freqs tensor; adapters with permuted B rows).

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  dequantizeQ8_0,
  fromFp16Bits,
  GGML_TYPE,
  quantizeQ8_0,
  readGgufHeader,
  readGgufTensorBytes,
  toFp16Bits,
} from '../src/engine/llama-cpp/gguf-format.js';
import { cachedModelGguf, folderGgufSource, writeModelGguf } from '../src/engine/llama-cpp/gguf.js';
import { LocalEngine } from '../src/engine/local/engine.js';
import { readModelFolder } from '../src/engine/local/model/folder.js';
import { writePolicyVersion } from '../src/engine/local/policy-versions.js';
import { openTestLlamaCpp } from './helpers/llama-cpp.js';
import { makeTinyModel, maxAbsDiff, readAllTensors, scratchDir } from './helpers/models.js';
import { randomLoraUpdate } from './helpers/policy-updates.js';

describe('GGUF number formats', () => {
  test('fp16 bits: exact values, rounding to nearest even, subnormals, overflow', () => {
    assert.equal(toFp16Bits(1), 0x3c00);
    assert.equal(toFp16Bits(-2), 0xc000);
    assert.equal(toFp16Bits(65504), 0x7bff);
    assert.equal(toFp16Bits(65520), 0x7c00); // halfway to the next binade rounds up: infinity
    assert.equal(toFp16Bits(2 ** -24), 0x0001);
    assert.equal(toFp16Bits(2 ** -26), 0x0000); // below half the smallest subnormal
    assert.equal(toFp16Bits(1 + 2 ** -11), 0x3c00); // a tie goes to the even mantissa
    assert.equal(toFp16Bits(1 + 3 * 2 ** -11), 0x3c02);
    for (const x of [0.1, -3.75, 1e-3, 1234.5])
      assert.ok(Math.abs(fromFp16Bits(toFp16Bits(x)) - x) <= Math.abs(x) * 2 ** -11);
  });

  test('Q8_0: one fp16 scale max|x|/127 per 32 values, int8 rounded half away from zero', () => {
    // Block 1: max|x| = 127, so d = 1 and the ints are the values rounded; block 2: all zero.
    const x = new Float32Array(64);
    for (let j = 0; j < 32; j++) x[j] = j === 0 ? 127 : j === 1 ? -63.5 : j === 2 ? 62.5 : j - 16.25;
    const q = quantizeQ8_0(x);
    assert.equal(q.length, 2 * 34);
    assert.equal(q.readUInt16LE(0), 0x3c00);
    const ints = new Int8Array(q.buffer, q.byteOffset + 2, 32);
    assert.deepEqual([ints[0], ints[1], ints[2], ints[3], ints[31]], [127, -64, 63, -13, 15]);
    assert.equal(q.readUInt16LE(34), 0);
    assert.ok(new Int8Array(q.buffer, q.byteOffset + 36, 32).every((v) => v === 0));
    // Other values: each within half a step of its dequantized value, plus the fp16 rounding of d.
    const r = Float32Array.from({ length: 320 }, (_, i) => Math.sin(i * 1.7) * (1 + (i % 7)));
    const back = dequantizeQ8_0(quantizeQ8_0(r), r.length);
    for (let b = 0; b < 10; b++) {
      const block = r.subarray(b * 32, b * 32 + 32);
      const d = fromFp16Bits(toFp16Bits(Math.max(...block.map(Math.abs)) / 127));
      for (let j = 0; j < 32; j++) assert.ok(Math.abs(back[b * 32 + j]! - block[j]!) <= d * 0.5 + d * 127 * 2 ** -11);
    }
  });
});

describe('GGUF model files', () => {
  test('a Qwen3 folder as F16 and Q8_0: metadata, tensor names, shapes and data read back', () => {
    const dir = makeTinyModel({ family: 'qwen3', seed: 3 });
    const cfg = readModelFolder(dir).config;
    const source = readAllTensors(join(dir, 'model.safetensors'));
    for (const type of ['F16', 'Q8_0'] as const) {
      const path = join(scratchDir('ocrl-gguf-'), `m-${type}.gguf`);
      writeModelGguf(folderGgufSource(dir), path, type, 'test');
      const file = readGgufHeader(path);
      assert.equal(file.version, 3);
      assert.equal(file.meta.get('general.architecture'), 'qwen3');
      assert.equal(file.meta.get('qwen3.block_count'), cfg.numLayers);
      assert.equal(file.meta.get('qwen3.attention.head_count_kv'), cfg.numKvHeads);
      assert.equal((file.meta.get('tokenizer.ggml.tokens') as string[]).length, cfg.vocabSize);
      assert.equal(file.meta.get('tokenizer.ggml.eos_token_id'), cfg.eosTokenIds[0]);
      // Tied head: no output.weight; every layer has its nine tensors plus two norms of q and k.
      assert.equal(file.tensors.length, 2 + cfg.numLayers * 11);
      assert.ok(!file.tensors.some((t) => t.name === 'output.weight'));
      const q = file.tensors.find((t) => t.name === 'blk.1.attn_q.weight')!;
      assert.deepEqual(q.shape, [cfg.numHeads * cfg.headDim, cfg.hiddenSize]);
      assert.equal(q.type, GGML_TYPE[type]);
      const hf = source.get('model.layers.1.self_attn.q_proj.weight')!;
      const bytes = readGgufTensorBytes(path, q);
      const values =
        type === 'F16'
          ? Float32Array.from({ length: hf.length }, (_, i) => fromFp16Bits(bytes.readUInt16LE(2 * i)))
          : dequantizeQ8_0(bytes, hf.length);
      const expected =
        type === 'F16' ? hf.map((x) => fromFp16Bits(toFp16Bits(x))) : dequantizeQ8_0(quantizeQ8_0(hf), hf.length);
      assert.deepEqual(values, expected);
      const norm = file.tensors.find((t) => t.name === 'blk.0.attn_k_norm.weight')!;
      assert.equal(norm.type, GGML_TYPE.F32);
      const normBytes = readGgufTensorBytes(path, norm);
      assert.deepEqual(
        new Float32Array(normBytes.buffer, normBytes.byteOffset, cfg.headDim),
        source.get('model.layers.0.self_attn.k_norm.weight'),
      );
    }
  });

  test('cached next to the model: converted once, reused while up to date', () => {
    const dir = makeTinyModel({ family: 'qwen3', seed: 4 });
    const path = cachedModelGguf(dir, 'Q8_0');
    assert.equal(path, join(dir, 'gguf', 'model-q8_0.gguf'));
    let converted = 0;
    assert.equal(
      cachedModelGguf(dir, 'Q8_0', () => converted++),
      path,
    );
    assert.equal(converted, 0);
  });

  for (const family of ['qwen3', 'llama'] as const) {
    test(`${family}: llama.cpp computes the local engine's log-probs from the model and a LoRA adapter`, async () => {
      const dir = makeTinyModel({ family, seed: 7 });
      const cfg = readModelFolder(dir).config;
      const engine = await LocalEngine.open(dir, { precision: 'fp32' });
      // F32 weights: what is left is llama.cpp's order of sums and its F16 keys and values.
      const llama = await openTestLlamaCpp(dir, { ggufType: 'F32' });
      try {
        const prompt = Array.from({ length: 40 }, (_, i) => (i * 29 + 3) % cfg.vocabSize);
        const completion = Array.from({ length: 24 }, (_, i) => (i * 53 + 11) % cfg.vocabSize);
        const base = await engine.logprobs(prompt, completion);
        const viaLlama = await llama.logprobs(prompt, completion, { version: 0 });
        assert.ok(
          maxAbsDiff(base.logprobs, viaLlama.logprobs) < 2e-2,
          `base: ${maxAbsDiff(base.logprobs, viaLlama.logprobs)}`,
        );

        const update = randomLoraUpdate(cfg, 1, 9);
        const v = writePolicyVersion(join(scratchDir('ocrl-gguf-lora-'), 'versions'), update, {
          modelDir: dir,
          config: cfg,
        });
        await engine.publish(update);
        await llama.use({ version: 1, kind: 'lora', path: v.path! });
        const local = await engine.logprobs(prompt, completion, { version: 1 });
        const adapted = await llama.logprobs(prompt, completion, { version: 1 });
        assert.ok(maxAbsDiff(local.logprobs, base.logprobs) > 0.1, 'the adapter changes the log-probs');
        assert.ok(
          maxAbsDiff(local.logprobs, adapted.logprobs) < 2e-2,
          `lora: ${maxAbsDiff(local.logprobs, adapted.logprobs)}`,
        );
      } finally {
        await llama.close();
        await engine.close();
      }
    });
  }
});
