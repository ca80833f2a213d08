// KV caches of bf16 rows (the bf16 and int8 engines'): the cache's bookkeeping at 2 bytes an
// element, decode attention on bf16 rows against the same rows widened to fp32 (native and
// portable), the blocked prefill attention on bf16 rows (gemmBf16) within the bound its bf16
// rounding of the probabilities allows, and a bf16 model writing exactly its rounded keys and values.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { toBf16, widenBf16 } from '../src/engine/local/kernels/bf16.js';
import { loadKernels } from '../src/engine/local/kernels/index.js';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { modelConfigOf, PRESETS, randomParams } from '../src/engine/local/model/init.js';
import {
  copyKvPrefix,
  createKvCache,
  kvBytesPerToken,
  kvCacheBytes,
  reserveKvCache,
  trimKvCache,
} from '../src/engine/local/model/kv-cache.js';
import { blockedAttention, QUERY_BLOCK } from '../src/engine/local/model/segment-attention.js';
import { Transformer } from '../src/engine/local/model/transformer.js';
import { bf16ParamsOf } from '../src/engine/local/precision.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20261207);
const cfg = modelConfigOf({ family: 'qwen3', ...PRESETS.tiny! }, [0]);

function bf16Of(x: Float32Array): Uint16Array {
  const out = new Uint16Array(x.length);
  toBf16(out, x, x.length);
  return out;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst; // NaN propagates into a failed comparison
}

describe('a cache of bf16 rows', () => {
  test('takes 2 bytes an element, keeps its rows when it grows, is trimmed and copied as bf16', () => {
    assert.equal(kvBytesPerToken(cfg, 'bf16') * 2, kvBytesPerToken(cfg, 'f32'));
    const cache = createKvCache(cfg, 4, cfg.maxPositionEmbeddings, 'bf16');
    assert.equal(cache.dtype, 'bf16');
    assert.ok(cache.k[0] instanceof Uint16Array && cache.v[1] instanceof Uint16Array);
    assert.equal(kvCacheBytes(cache), 4 * kvBytesPerToken(cfg, 'bf16'));
    const rows = cache.rowSize * 3;
    for (let l = 0; l < cfg.numLayers; l++)
      for (let i = 0; i < rows; i++) {
        (cache.k[l] as Uint16Array)[i] = (i * 7 + l) & 0xffff;
        (cache.v[l] as Uint16Array)[i] = (i * 13 + l) & 0xffff;
      }
    cache.length = 3;
    reserveKvCache(cache, 20);
    assert.ok(cache.capacity >= 20 && cache.k[0] instanceof Uint16Array);
    assert.equal(
      (cache.k[1] as Uint16Array)[2 * cache.rowSize + 5],
      ((2 * cache.rowSize + 5) * 7 + 1) & 0xffff,
      'rows kept',
    );
    const trimmed = trimKvCache(cache);
    assert.equal(trimmed.dtype, 'bf16');
    assert.equal(kvCacheBytes(trimmed), 3 * kvBytesPerToken(cfg, 'bf16'));
    const copy = createKvCache(cfg, 2, cfg.maxPositionEmbeddings, 'bf16');
    copyKvPrefix(trimmed, copy, 2);
    assert.deepEqual(
      (copy.v[1] as Uint16Array).subarray(0, 2 * cache.rowSize),
      (cache.v[1] as Uint16Array).subarray(0, 2 * cache.rowSize),
    );
    assert.throws(
      () => copyKvPrefix(trimmed, createKvCache(cfg, 2), 2),
      (e: Error) => e instanceof TypeError && /bf16 keys and values into a f32 cache/.test(e.message),
    );
  });
});

interface Case {
  H: number;
  KV: number;
  hd: number;
  start: number;
  Tq: number;
}

// head dims a multiple of 8 and not (the vector and the scalar loops), key counts that are and are
// not a multiple of 4 (the kernel's passes), groups of 1 to 4, decode rows and a few rows.
// On AVX-512 the head dims that are multiples of 16 take attention_avx512.c's path: chunks of keys
// (several at 1024 keys, combined at the end), blocks of 8 keys and a tail, pairs of query heads
// and a last single one (groups of 3).
const decodeCases: Case[] = [
  { H: 16, KV: 8, hd: 64, start: 301, Tq: 1 },
  { H: 4, KV: 1, hd: 12, start: 37, Tq: 3 },
  { H: 6, KV: 6, hd: 32, start: 0, Tq: 5 },
  { H: 10, KV: 5, hd: 128, start: 1024, Tq: 2 },
  { H: 6, KV: 2, hd: 32, start: 2100, Tq: 1 },
];

function attentionInputs(c: Case) {
  const n = (c.start + c.Tq) * c.KV * c.hd;
  const k = bf16Of(randomArrayFrom(random, n, 2)),
    v = bf16Of(randomArrayFrom(random, n, 3));
  return { q: randomArrayFrom(random, c.Tq * c.H * c.hd, 2), k, v, kf: widenBf16(k, n), vf: widenBf16(v, n) };
}

function oneRow(
  kernels: Kernels,
  c: Case,
  q: Float32Array,
  k: Float32Array | Uint16Array,
  v: Float32Array | Uint16Array,
): Float32Array {
  const out = new Float32Array(c.Tq * c.H * c.hd);
  kernels.attention(out, q, k, v, c.Tq, c.start, c.H, c.KV, c.hd, c.KV * c.hd, 1 / Math.sqrt(c.hd));
  return out;
}

describe('decode attention on bf16 rows', () => {
  test('portable: exactly the attention over the rows widened to fp32', () => {
    for (const c of decodeCases) {
      const x = attentionInputs(c);
      assert.deepEqual(oneRow(portableKernels, c, x.q, x.k, x.v), oneRow(portableKernels, c, x.q, x.kf, x.vf));
    }
  });

  test('native: the attention over the widened rows (to 1e-6), on 1 and 2 threads, and the portable one', {
    skip: skipNative,
  }, () => {
    const k = native();
    try {
      for (const threads of [1, 2]) {
        k.setThreads(threads);
        for (const c of decodeCases) {
          const x = attentionInputs(c);
          const got = oneRow(k, c, x.q, x.k, x.v);
          const widened = oneRow(k, c, x.q, x.kf, x.vf);
          const what = `${threads} threads, ${JSON.stringify(c)}`;
          assert.ok(maxAbsDiff(got, widened) <= 1e-6, `${what}: against the widened rows`);
          assert.ok(maxAbsDiff(got, oneRow(portableKernels, c, x.q, x.kf, x.vf)) <= 1e-5, `${what}: portable`);
        }
      }
    } finally {
      k.setThreads(2);
    }
  });

  test('native: the AVX-512 path and the generic loops agree (to 1e-5), on fp32 and bf16 rows', {
    skip: skipNative,
  }, () => {
    const k = native();
    for (const c of decodeCases) {
      const x = attentionInputs(c);
      const fast = [oneRow(k, c, x.q, x.k, x.v), oneRow(k, c, x.q, x.kf, x.vf)];
      process.env.OPENCLAW_RL_ATTENTION = 'generic';
      try {
        assert.ok(maxAbsDiff(fast[0]!, oneRow(k, c, x.q, x.k, x.v)) <= 1e-5, `bf16 rows ${JSON.stringify(c)}`);
        assert.ok(maxAbsDiff(fast[1]!, oneRow(k, c, x.q, x.kf, x.vf)) <= 1e-5, `fp32 rows ${JSON.stringify(c)}`);
      } finally {
        delete process.env.OPENCLAW_RL_ATTENTION;
      }
    }
  });

  test('k and v of different kinds are refused with a TypeError, native and portable', () => {
    const c = decodeCases[1]!;
    const x = attentionInputs(c);
    const kernels = skipNative ? [portableKernels] : [portableKernels, native()];
    for (const kernel of kernels)
      assert.throws(
        () => oneRow(kernel, c, x.q, x.k, x.vf),
        (e: Error) => e instanceof TypeError && /k and v/.test(e.message),
      );
  });
});

describe('blocked prefill attention on bf16 rows', () => {
  // gemmBf16 rounds Q and the probabilities to bf16 as it reads them. Against the one-row kernel
  // given Q already rounded, only P's rounding is left: each p moves by at most bf16's unit roundoff
  // (2^-8) of itself and the p of a row sum to 1, so each output moves by at most 2^-8 * max|v|
  // (plus fp32 sums' order).
  const cases: Case[] = [
    { H: 8, KV: 4, hd: 32, start: 0, Tq: 2 * QUERY_BLOCK + 9 },
    { H: 4, KV: 2, hd: 64, start: 700, Tq: QUERY_BLOCK + 3 },
    { H: 2, KV: 1, hd: 16, start: 5, Tq: 20 },
  ];
  for (const [name, kernels] of [
    ['portable', () => portableKernels],
    ['native', native],
  ] as const) {
    test(`${name}: within 2^-8 max|v| of the one-row kernel fed bf16-rounded queries`, {
      skip: name === 'native' && skipNative,
    }, () => {
      const k = kernels();
      for (const c of cases) {
        const x = attentionInputs(c);
        const out = new Float32Array(x.q.length).fill(NaN);
        blockedAttention(
          k,
          out,
          x.q,
          x.k,
          x.v,
          c.Tq,
          c.start,
          { numHeads: c.H, numKvHeads: c.KV, headDim: c.hd },
          (n) => new Float32Array(n).fill(NaN),
        );
        const qRounded = widenBf16(bf16Of(x.q), x.q.length);
        const reference = oneRow(portableKernels, c, qRounded, x.kf, x.vf);
        const maxV = x.vf.reduce((m, y) => Math.max(m, Math.abs(y)), 0);
        const bound = 2 ** -8 * maxV + 1e-5;
        const worst = maxAbsDiff(out, reference);
        assert.ok(worst <= bound, `${name} ${JSON.stringify(c)}: max |blocked - one-row| = ${worst} > ${bound}`);
      }
    });
  }
});

describe('a bf16 model', () => {
  test('creates bf16 caches, and layer 0 holds exactly its fp32-cache keys and values rounded to bf16', () => {
    const k = loadKernels();
    const params = randomParams(cfg, 3, 0.1);
    const model = new Transformer(cfg, params, k, bf16ParamsOf(k, params.specs, params.data));
    assert.equal(model.kvDtype, 'bf16');
    assert.equal(new Transformer(cfg, params, k).newKvCache().dtype, 'f32', 'fp32 stays the exact reference');
    const prompt = Array.from({ length: 40 }, (_, i) => (i * 29 + 3) % cfg.vocabSize);
    const rounded = model.newKvCache(),
      exact = createKvCache(cfg);
    assert.equal(rounded.dtype, 'bf16');
    for (const cache of [rounded, exact]) {
      model.forward([{ cache, tokens: prompt.slice(0, 30), logitsFrom: 30 }]); // blocked
      model.forward([{ cache, tokens: prompt.slice(30, 32), logitsFrom: 2 }]); // one-row
    }
    const n = 32 * rounded.rowSize;
    // Layer 0's keys and values come from the embeddings alone, so both caches saw the same values.
    assert.deepEqual((rounded.k[0] as Uint16Array).subarray(0, n), bf16Of((exact.k[0] as Float32Array).subarray(0, n)));
    assert.deepEqual((rounded.v[0] as Uint16Array).subarray(0, n), bf16Of((exact.v[0] as Float32Array).subarray(0, n)));
  });
});
