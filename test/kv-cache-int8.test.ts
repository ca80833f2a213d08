// Caches of int8 rows (--kv-cache-dtype int8): the cache's bookkeeping; attentionInt8 (native on
// AVX-512 and in its generic loops, and portable) against the float32 attention over the same
// rows' values; dequantizeInt8Bf16 bit for bit; where segmentAttention sends int8 rows; a model's
// rows quantized exactly as quantizeInt8 quantizes the f32 rows, and its logits next to the
// f32 cache's; the engine option end to end.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LocalEngine } from '../src/engine/local/engine.js';
import { bf16Bits } from '../src/engine/local/kernels/bf16.js';
import { dequantizeInt8, INT8_BLOCK } from '../src/engine/local/kernels/int8.js';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { defaultKvCacheBytes } from '../src/engine/local/kv-cache-budget.js';
import { modelConfigOf, PRESETS, randomParams } from '../src/engine/local/model/init.js';
import {
  copyKvPrefix,
  createKvCache,
  type Int8Rows,
  isInt8Rows,
  kvBytesPerToken,
  kvCacheBytes,
  reserveKvCache,
  trimKvCache,
} from '../src/engine/local/model/kv-cache.js';
import { BLOCKED_MIN_ROWS, segmentAttention } from '../src/engine/local/model/segment-attention.js';
import { Transformer } from '../src/engine/local/model/transformer.js';
import { makeTinyModel } from './helpers/models.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20261207);
const shape = { ...PRESETS.tiny!, headDim: 32 };
const cfg = modelConfigOf({ family: 'qwen3', ...shape }, [0]);

function int8RowsOf(k: Kernels, x: Float32Array): Int8Rows {
  const rows = { values: new Int8Array(x.length), scales: new Float32Array(x.length / INT8_BLOCK) };
  k.quantizeInt8(rows.values, rows.scales, x, x.length / INT8_BLOCK, INT8_BLOCK);
  return rows;
}

function maxAbs(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

describe('a cache of int8 rows', () => {
  test('takes 1.125 bytes an element, keeps rows and scales when it grows, is trimmed and copied as int8', () => {
    assert.equal(kvBytesPerToken(cfg, 'int8'), (kvBytesPerToken(cfg, 'f32') * 1.125) / 4);
    const cache = createKvCache(cfg, 4, cfg.maxPositionEmbeddings, 'int8');
    assert.ok(isInt8Rows(cache.k[0]!) && isInt8Rows(cache.v[1]!));
    assert.equal(kvCacheBytes(cache), 4 * kvBytesPerToken(cfg, 'int8'));
    const rows = 3 * cache.rowSize;
    for (let l = 0; l < cfg.numLayers; l++) {
      const k = cache.k[l] as Int8Rows;
      for (let i = 0; i < rows; i++) k.values[i] = ((i * 7 + l) % 255) - 127;
      for (let b = 0; b < rows / INT8_BLOCK; b++) k.scales[b] = b + l / 10;
    }
    cache.length = 3;
    reserveKvCache(cache, 20);
    const grown = cache.k[1] as Int8Rows;
    assert.ok(cache.capacity >= 20 && grown.values.length === cache.capacity * cache.rowSize);
    assert.equal(grown.scales.length, grown.values.length / INT8_BLOCK);
    assert.equal(grown.values[2 * cache.rowSize + 5], (((2 * cache.rowSize + 5) * 7 + 1) % 255) - 127, 'values kept');
    assert.equal(grown.scales[rows / INT8_BLOCK - 1], Math.fround(rows / INT8_BLOCK - 1 + 0.1), 'scales kept');
    const trimmed = trimKvCache(cache);
    assert.equal(kvCacheBytes(trimmed), 3 * kvBytesPerToken(cfg, 'int8'));
    const copy = createKvCache(cfg, 2, cfg.maxPositionEmbeddings, 'int8');
    copyKvPrefix(trimmed, copy, 2);
    const [from, to] = [trimmed.k[1] as Int8Rows, copy.k[1] as Int8Rows];
    const n = 2 * cache.rowSize;
    assert.deepEqual(to.values.subarray(0, n), from.values.subarray(0, n));
    assert.deepEqual(to.scales.subarray(0, n / INT8_BLOCK), from.scales.subarray(0, n / INT8_BLOCK));
    to.values[0] = 99;
    assert.notEqual(from.values[0], 99, 'a copy, not a view');
    assert.throws(
      () => copyKvPrefix(trimmed, createKvCache(cfg, 2, cfg.maxPositionEmbeddings, 'bf16'), 2),
      (e: Error) => e instanceof TypeError && /int8 keys and values into a bf16 cache/.test(e.message),
    );
  });

  test('refuses a model whose head_dim is not a multiple of 32, naming the way out', () => {
    const small = modelConfigOf({ family: 'qwen3', ...PRESETS.tiny! }, [0]); // head_dim 16
    assert.throws(
      () => createKvCache(small, 4, small.maxPositionEmbeddings, 'int8'),
      (e: Error) =>
        e instanceof RangeError && /head_dim a multiple of 32; this model's is 16: use bf16/.test(e.message),
    );
  });
});

interface Case {
  Tq: number;
  start: number;
  H: number;
  KV: number;
  hd: number;
  qScale: number;
}

const cases: Case[] = [
  { Tq: 1, start: 1100, H: 16, KV: 8, hd: 128, qScale: 1 }, // Qwen3's heads, decode after 1.1k keys (prefetched)
  { Tq: 1, start: 37, H: 4, KV: 1, hd: 64, qScale: 1 }, // group of 4, keys not a multiple of 8
  { Tq: 3, start: 130, H: 4, KV: 4, hd: 32, qScale: 1 }, // several rows, no grouping
  { Tq: 2, start: 0, H: 2, KV: 1, hd: 32, qScale: 1 }, // the first keys
  { Tq: 1, start: 300, H: 8, KV: 4, hd: 64, qScale: 30 }, // large scores: max subtraction
];

const caseName = (c: Case) => `Tq ${c.Tq} start ${c.start} heads ${c.H}/${c.KV}x${c.hd} q x${c.qScale}`;

function attentionCase(c: Case) {
  const rows = c.start + c.Tq,
    kvDim = c.KV * c.hd;
  const q = randomArrayFrom(random, c.Tq * c.H * c.hd, c.qScale);
  // Keys with a few large channels, as real models' keys have: the blocks' scales differ.
  const kf = randomArrayFrom(random, rows * kvDim).map((x, i) => (i % 97 === 0 ? 20 * x : x));
  const k = int8RowsOf(portableKernels, kf),
    v = int8RowsOf(portableKernels, randomArrayFrom(random, rows * kvDim));
  const n = rows * kvDim;
  const expected = new Float32Array(q.length);
  const scale = 1 / Math.sqrt(c.hd);
  const [kd, vd] = [dequantizeInt8(k.values, k.scales, n), dequantizeInt8(v.values, v.scales, n)];
  portableKernels.attention(expected, q, kd, vd, c.Tq, c.start, c.H, c.KV, c.hd, kvDim, scale);
  const run = (kernels: Kernels) => {
    const out = new Float32Array(q.length).fill(NaN);
    kernels.attentionInt8(out, q, k.values, k.scales, v.values, v.scales, c.Tq, c.start, c.H, c.KV, c.hd, kvDim, scale);
    return out;
  };
  return { expected, run };
}

describe('attentionInt8', () => {
  test('portable: equals attention over the rows dequantized to float32, to 1e-6', () => {
    for (const c of cases) {
      const { expected, run } = attentionCase(c);
      assert.ok(maxAbs(run(portableKernels), expected) <= 1e-6, caseName(c));
    }
  });

  test('native, on AVX-512 and in the generic loops (AVX2 and scalar): equal attention over the dequantized rows to 2e-5', {
    skip: skipNative,
  }, () => {
    const k = native();
    for (const c of cases) {
      const { expected, run } = attentionCase(c);
      assert.ok(maxAbs(run(k), expected) <= 2e-5, `${caseName(c)}: ${maxAbs(run(k), expected)}`);
      for (const loops of ['generic', 'scalar']) {
        process.env.OPENCLAW_RL_ATTENTION = loops;
        try {
          const out = run(k);
          assert.ok(maxAbs(out, expected) <= 2e-5, `${loops} ${caseName(c)}: ${maxAbs(out, expected)}`);
        } finally {
          delete process.env.OPENCLAW_RL_ATTENTION;
        }
      }
    }
  });

  test('native: checks its arguments', { skip: skipNative }, () => {
    const k = native();
    const f = (n: number) => new Float32Array(n),
      i8 = (n: number) => new Int8Array(n);
    // 2 rows of one kv head of 32: 64 values, 2 scales.
    assert.doesNotThrow(() => k.attentionInt8(f(32), f(32), i8(64), f(2), i8(64), f(2), 1, 1, 1, 1, 32, 32, 1));
    assert.throws(
      () => k.attentionInt8(f(16), f(16), i8(32), f(2), i8(32), f(2), 1, 1, 1, 1, 16, 16, 1),
      /headDim = 16 and kvStride = 16 must be multiples of 32/,
    );
    assert.throws(
      () => k.attentionInt8(f(32), f(32), i8(64), f(1), i8(64), f(2), 1, 1, 1, 1, 32, 32, 1),
      /k's scales hold 1 blocks of 32 values; the call reads 64 values/,
    );
    assert.throws(() => k.attentionInt8(f(32), f(32), i8(63), f(2), i8(64), f(2), 1, 1, 1, 1, 32, 32, 1), /k has 63/);
  });
});

describe('dequantizeInt8Bf16', () => {
  test('gives the bf16 bits of each float32 product, native and portable alike', { skip: skipNative }, () => {
    const n = 32 * 700; // several of the native loop's groups of 16 blocks, and a partial one
    const rows = int8RowsOf(portableKernels, randomArrayFrom(random, n, 3));
    const expected = new Uint16Array(n);
    for (let i = 0; i < n; i++) expected[i] = bf16Bits(Math.fround(rows.scales[(i / 32) | 0]! * rows.values[i]!));
    for (const kernels of [portableKernels, native()]) {
      const out = new Uint16Array(n);
      kernels.dequantizeInt8Bf16(out, rows.values, rows.scales, n);
      assert.deepEqual(out, expected, kernels.name);
    }
    assert.throws(() => native().dequantizeInt8Bf16(new Uint16Array(40), new Int8Array(40), new Float32Array(2), 40));
  });
});

describe('segmentAttention over int8 rows', () => {
  test('reads them as they are below BLOCKED_MIN_ROWS, through bf16 copies from there', () => {
    const heads = { numHeads: 4, numKvHeads: 2, headDim: 32 };
    for (const Tq of [1, BLOCKED_MIN_ROWS - 1, BLOCKED_MIN_ROWS, 40]) {
      const start = 50,
        kvDim = 64,
        n = (start + Tq) * kvDim;
      const q = randomArrayFrom(random, Tq * 128);
      const k = int8RowsOf(portableKernels, randomArrayFrom(random, n)),
        v = int8RowsOf(portableKernels, randomArrayFrom(random, n));
      const calls = { attentionInt8: 0, dequantizeInt8Bf16: 0 };
      const counting: Kernels = {
        ...portableKernels,
        attentionInt8: (...args) => {
          calls.attentionInt8++;
          portableKernels.attentionInt8(...args);
        },
        dequantizeInt8Bf16: (...args) => {
          calls.dequantizeInt8Bf16++;
          portableKernels.dequantizeInt8Bf16(...args);
        },
      };
      const out = new Float32Array(q.length);
      const scratch = new Map<string, Float32Array>();
      segmentAttention(counting, out, q, k, v, Tq, start, heads, (floats, purpose) => {
        const buffer = new Float32Array(floats).fill(NaN); // stale contents must not matter
        scratch.set(purpose, buffer);
        return buffer;
      });
      const oneRow = Tq < BLOCKED_MIN_ROWS;
      assert.equal(calls.attentionInt8 > 0, oneRow, `Tq ${Tq}: int8 kernel`);
      assert.equal(calls.dequantizeInt8Bf16, oneRow ? 0 : 2, `Tq ${Tq}: K and V copied to bf16 once`);
      // Against float32 attention over the int8 values: bf16 copies and bf16 products add about
      // bf16's rounding (2^-9 relative) to Q, K, V and P.
      const expected = new Float32Array(q.length);
      const [kd, vd] = [dequantizeInt8(k.values, k.scales, n), dequantizeInt8(v.values, v.scales, n)];
      portableKernels.attention(expected, q, kd, vd, Tq, start, 4, 2, 32, kvDim, 1 / Math.sqrt(32));
      assert.ok(maxAbs(out, expected) <= (oneRow ? 1e-6 : 2e-2), `Tq ${Tq}: ${maxAbs(out, expected)}`);
      if (!oneRow) assert.ok(scratch.get('rows')!.length >= n, 'room for the bf16 copies of K and V');
    }
  });
});

describe('a transformer with an int8 key/value cache', () => {
  const params = randomParams(cfg, 11, 0.25);
  const prompt = Array.from({ length: 40 }, (_, i) => (i * 29 + 3) % cfg.vocabSize);

  function run(model: Transformer, cache = model.newKvCache()) {
    const first = model.forward([{ cache, tokens: prompt.slice(0, 30), logitsFrom: 0 }])[0]!.slice(); // bf16 copies
    const next = model.forward([{ cache, tokens: prompt.slice(30, 32), logitsFrom: 0 }])[0]!.slice(); // int8 rows
    return { cache, logits: Float32Array.from([...first, ...next]) };
  }

  test("stores quantizeInt8 of the rows an f32 cache holds, and logits near the f32 cache's", () => {
    const exact = run(new Transformer(cfg, params, portableKernels));
    const int8 = run(new Transformer(cfg, params, portableKernels, undefined, undefined, 'int8'));
    const bf16 = run(new Transformer(cfg, params, portableKernels, undefined, undefined, 'bf16'));
    assert.equal(int8.cache.dtype, 'int8');
    const n = 32 * int8.cache.rowSize;
    // Layer 0's keys and values come from the embeddings alone, so both caches saw the same values.
    for (const which of ['k', 'v'] as const) {
      const expected = int8RowsOf(portableKernels, (exact.cache[which][0] as Float32Array).subarray(0, n));
      const rows = int8.cache[which][0] as Int8Rows;
      assert.deepEqual(rows.values.subarray(0, n), expected.values, which);
      assert.deepEqual(rows.scales.subarray(0, n / 32), expected.scales, which);
    }
    // int8 rounds a value to 1/254 of its block's largest, bf16 to 2^-9 of itself: int8's logits
    // move further, 2.4-2.7x bf16's distance from f32's on this model at init scales 0.02-0.25
    // (measured), by rounding; a wrong scale or block moves them by their spread (2 here).
    const int8Error = maxAbs(int8.logits, exact.logits),
      bf16Error = maxAbs(bf16.logits, exact.logits);
    assert.ok(int8Error > 0 && int8Error < 4 * bf16Error, `int8 ${int8Error} against bf16 ${bf16Error}`);
  });

  test("native kernels give the portable kernels' logits", { skip: skipNative }, () => {
    const portable = run(new Transformer(cfg, params, portableKernels, undefined, undefined, 'int8'));
    // The same attention as the portable kernels' (the GEMM path): the fused prefill kernel's online
    // softmax rounds differently, and segment-attention.test.ts bounds it against this path.
    const sameAttention: Kernels = { ...native(), prefillAttentionBf16: undefined };
    const fast = run(new Transformer(cfg, params, sameAttention, undefined, undefined, 'int8'));
    assert.ok(maxAbs(fast.logits, portable.logits) < 1e-3, `${maxAbs(fast.logits, portable.logits)}`);
  });
});

test('LocalEngine with kvCacheDtype int8: reported, budgeted at 1.125 bytes a value, and generating', async () => {
  const dir = makeTinyModel({ family: 'qwen3', seed: 5, shape: { headDim: 32 } });
  const engine = await LocalEngine.open(dir, { kvCacheDtype: 'int8', precision: 'bf16' });
  try {
    assert.equal(engine.info.kvDtype, 'int8');
    assert.equal(engine.info.kvCacheBytes, defaultKvCacheBytes(engine.folder.config, 'int8'));
    const prompt = Array.from({ length: 60 }, (_, i) => (i * 13 + 1) % 500);
    const ids: number[] = [];
    for await (const e of engine.generate(prompt, { maxTokens: 8, temperature: 0, stopTokenIds: [] }))
      if (e.type === 'token') ids.push(e.token.id);
    assert.equal(ids.length, 8);
  } finally {
    await engine.close();
  }
  await assert.rejects(
    LocalEngine.open(makeTinyModel({ family: 'qwen3', seed: 5 }), { kvCacheDtype: 'int8' }),
    /head_dim a multiple of 32; this model's is 16: use bf16/,
  );
  await assert.rejects(LocalEngine.open(dir, { kvCacheDtype: 'fp8' as 'int8' }), /must be auto, f32, bf16, int8/);
});
