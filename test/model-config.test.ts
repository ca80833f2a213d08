import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configJson, parseModelConfig, ropeInvFreq } from '../src/engine/local/model/config.js';

const qwen3 = {
  architectures: ['Qwen3ForCausalLM'],
  model_type: 'qwen3',
  vocab_size: 151936,
  hidden_size: 1024,
  intermediate_size: 3072,
  num_hidden_layers: 28,
  num_attention_heads: 16,
  num_key_value_heads: 8,
  head_dim: 128,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  rope_scaling: null,
  max_position_embeddings: 40960,
  tie_word_embeddings: true,
  attention_bias: false,
  hidden_act: 'silu',
  bos_token_id: 151643,
  eos_token_id: 151645,
  torch_dtype: 'bfloat16',
};

test('parses the real Qwen3-0.6B config.json fields', () => {
  const c = parseModelConfig(qwen3);
  assert.equal(c.family, 'qwen3');
  assert.equal(c.headDim, 128);
  assert.equal(c.qkNorm, true);
  assert.equal(c.qkvBias, false);
  assert.equal(c.tieWordEmbeddings, true);
  assert.deepEqual(c.eosTokenIds, [151645]);
});

test('Qwen2 always has q/k/v bias; head_dim defaults to hidden / heads', () => {
  const c = parseModelConfig({
    ...qwen3,
    model_type: 'qwen2',
    architectures: ['Qwen2ForCausalLM'],
    head_dim: undefined,
    hidden_size: 896,
    num_attention_heads: 14,
    num_key_value_heads: 2,
  });
  assert.equal(c.qkvBias, true);
  assert.equal(c.qkNorm, false);
  assert.equal(c.headDim, 64);
});

test('config errors name the file and the field', () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...qwen3, model_type: 'mistral' }, /model.json: unsupported architecture: model_type "mistral"/],
    [{ ...qwen3, hidden_size: 0 }, /"hidden_size" must be a positive integer/],
    [{ ...qwen3, num_key_value_heads: 5 }, /not a multiple of num_key_value_heads 5/],
    [{ ...qwen3, rope_scaling: { rope_type: 'yarn', factor: 4 } }, /rope_scaling type "yarn" is not supported/],
    [{ ...qwen3, architectures: ['LlamaForCausalLM'] }, /do not include Qwen3ForCausalLM/],
    [{ ...qwen3, hidden_act: 'gelu' }, /hidden_act "gelu" is not supported/],
  ];
  for (const [json, re] of cases) assert.throws(() => parseModelConfig(json, 'model.json'), re);
});

test('configJson round-trips through parseModelConfig', () => {
  for (const family of ['qwen3', 'qwen2', 'llama'] as const) {
    const c = parseModelConfig({
      ...qwen3,
      model_type: family,
      architectures: undefined,
      rope_scaling:
        family === 'llama'
          ? {
              rope_type: 'llama3',
              factor: 8,
              low_freq_factor: 1,
              high_freq_factor: 4,
              original_max_position_embeddings: 8192,
            }
          : null,
    });
    assert.deepEqual(parseModelConfig(configJson(c)), c);
  }
});

test('Llama 3 rope scaling: long wavelengths divided by factor, short ones kept, middle band interpolated', () => {
  const base = parseModelConfig({ ...qwen3, model_type: 'llama', architectures: undefined, rope_theta: 500000 });
  const scaled = parseModelConfig({
    ...qwen3,
    model_type: 'llama',
    architectures: undefined,
    rope_theta: 500000,
    rope_scaling: {
      rope_type: 'llama3',
      factor: 8,
      low_freq_factor: 1,
      high_freq_factor: 4,
      original_max_position_embeddings: 8192,
    },
  });
  const f0 = ropeInvFreq(base),
    f1 = ropeInvFreq(scaled);
  let kept = 0,
    divided = 0,
    mixed = 0;
  for (let i = 0; i < f0.length; i++) {
    const wavelen = (2 * Math.PI) / f0[i]!;
    if (wavelen < 8192 / 4) {
      assert.equal(f1[i], f0[i]);
      kept++;
    } else if (wavelen > 8192) {
      assert.ok(Math.abs(f1[i]! - f0[i]! / 8) < 1e-12 * f0[i]! + 1e-30);
      divided++;
    } else {
      const smooth = (8192 / wavelen - 1) / 3;
      assert.ok(Math.abs(f1[i]! - (((1 - smooth) * f0[i]!) / 8 + smooth * f0[i]!)) <= 1e-6 * f0[i]!);
      mixed++;
    }
  }
  assert.ok(kept > 0 && divided > 0 && mixed > 0, `bands: kept ${kept} divided ${divided} mixed ${mixed}`);
});
