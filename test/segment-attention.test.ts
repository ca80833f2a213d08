// The blocked (GEMM) attention of a segment against the one-row kernel it replaces for prefill:
// same outputs to 1e-5 on both kernel sets, across GQA ratios, cached prefixes, several query
// blocks and single rows; scratch linear in the keys; the one-row kernel kept for short segments;
// a model's logits with prompts in chunks (blocked) as with one token at a time (one-row).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Kernels } from '../src/engine/local/kernels/kernels.js';
import { portableKernels } from '../src/engine/local/kernels/portable.js';
import { modelConfigOf, PRESETS, randomParams } from '../src/engine/local/model/init.js';
import { createKvCache } from '../src/engine/local/model/kv-cache.js';
import {
  type AttentionHeads,
  BLOCKED_MIN_ROWS,
  blockedAttention,
  FLASH_MIN_ROWS,
  QUERY_BLOCK,
  segmentAttention,
} from '../src/engine/local/model/segment-attention.js';
import { Transformer } from '../src/engine/local/model/transformer.js';
import { native, skipNative } from './helpers/native.js';
import { randomArrayFrom, randomSource } from './helpers/random-arrays.js';

const random = randomSource(20260301);

interface Case extends AttentionHeads {
  Tq: number;
  start: number;
  qScale: number;
}

const cases: Case[] = [
  { Tq: 3 * QUERY_BLOCK + 5, start: 0, numHeads: 8, numKvHeads: 4, headDim: 32, qScale: 1 }, // uncached prompt
  { Tq: 2 * QUERY_BLOCK + 1, start: 300, numHeads: 4, numKvHeads: 2, headDim: 16, qScale: 1 }, // after a prefix
  { Tq: QUERY_BLOCK + 7, start: 1000, numHeads: 8, numKvHeads: 2, headDim: 64, qScale: 1 }, // group of 4
  { Tq: 70, start: 17, numHeads: 4, numKvHeads: 4, headDim: 8, qScale: 1 }, // no grouping
  { Tq: 1, start: 50, numHeads: 2, numKvHeads: 1, headDim: 16, qScale: 1 }, // one row
  { Tq: 20, start: 5, numHeads: 2, numKvHeads: 1, headDim: 16, qScale: 40 }, // large scores: max subtraction
];

const name = (c: Case) => `Tq ${c.Tq} start ${c.start} heads ${c.numHeads}/${c.numKvHeads}x${c.headDim} q x${c.qScale}`;

function inputs(c: Case) {
  const kvDim = c.numKvHeads * c.headDim,
    rows = c.start + c.Tq;
  return {
    q: randomArrayFrom(random, c.Tq * c.numHeads * c.headDim, c.qScale),
    k: randomArrayFrom(random, rows * kvDim),
    v: randomArrayFrom(random, rows * kvDim),
  };
}

type Inputs = ReturnType<typeof inputs>;

function oneRow(k: Kernels, c: Case, x: Inputs): Float32Array {
  const out = new Float32Array(x.q.length);
  k.attention(
    out,
    x.q,
    x.k,
    x.v,
    c.Tq,
    c.start,
    c.numHeads,
    c.numKvHeads,
    c.headDim,
    c.numKvHeads * c.headDim,
    1 / Math.sqrt(c.headDim),
  );
  return out;
}

/** blockedAttention's output, and the most scratch floats it asked for. */
function blocked(
  k: Kernels,
  c: Case,
  x: { q: Float32Array; k: Float32Array | Uint16Array; v: Float32Array | Uint16Array },
): { out: Float32Array; scratchFloats: number } {
  const out = new Float32Array(x.q.length).fill(NaN);
  let scratchFloats = 0;
  const scratch = (n: number) => {
    scratchFloats = Math.max(scratchFloats, n);
    return new Float32Array(n).fill(NaN); // stale contents must not matter
  };
  blockedAttention(k, out, x.q, x.k, x.v, c.Tq, c.start, c, scratch);
  return { out, scratchFloats };
}

function assertMaxAbsDiff(actual: Float32Array, expected: Float32Array, tolerance: number, what: string): void {
  assert.equal(actual.length, expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  assert.ok(worst <= tolerance, `${what}: max |blocked - one-row| = ${worst} > ${tolerance}`); // NaN fails too
}

describe('blocked segment attention', () => {
  test('portable: equals the one-row kernel to 1e-5', () => {
    for (const c of cases) {
      const x = inputs(c);
      assertMaxAbsDiff(blocked(portableKernels, c, x).out, oneRow(portableKernels, c, x), 1e-5, `portable ${name(c)}`);
    }
  });

  test('native: equals the native one-row kernel and the portable one to 1e-5', { skip: skipNative }, () => {
    for (const c of cases) {
      const x = inputs(c);
      const { out } = blocked(native(), c, x);
      assertMaxAbsDiff(out, oneRow(native(), c, x), 1e-5, `native ${name(c)}`);
      assertMaxAbsDiff(out, oneRow(portableKernels, c, x), 1e-5, `native vs portable ${name(c)}`);
    }
  });

  test('scratch grows with the block times the keys, not with the keys squared', () => {
    const heads = { numHeads: 4, numKvHeads: 2, headDim: 8 };
    const scratchAt = (Tq: number, start: number) => {
      const c = { ...heads, Tq, start, qScale: 1 };
      return blocked(portableKernels, c, inputs(c)).scratchFloats;
    };
    const keys = 8 * QUERY_BLOCK;
    assert.ok(scratchAt(keys, 0) <= QUERY_BLOCK * (keys + 1));
    assert.ok(scratchAt(keys, 0) < 2.2 * scratchAt(keys / 2, 0), 'doubling the keys at most doubles the scratch');
  });

  test('segmentAttention keeps the one-row kernel below BLOCKED_MIN_ROWS rows and uses GEMMs from there', () => {
    const heads = { numHeads: 4, numKvHeads: 2, headDim: 8 };
    for (const Tq of [1, BLOCKED_MIN_ROWS - 1, BLOCKED_MIN_ROWS]) {
      const c = { ...heads, Tq, start: 9, qScale: 1 };
      const x = inputs(c);
      const calls = { attention: 0, sgemm: 0 };
      const counting: Kernels = {
        ...portableKernels,
        attention: (...args) => {
          calls.attention++;
          portableKernels.attention(...args);
        },
        sgemm: (...args) => {
          calls.sgemm++;
          portableKernels.sgemm(...args);
        },
      };
      const out = new Float32Array(x.q.length);
      segmentAttention(counting, out, x.q, x.k, x.v, Tq, c.start, heads, (n) => new Float32Array(n));
      const blockedExpected = Tq >= BLOCKED_MIN_ROWS;
      assert.deepEqual(calls.attention > 0, !blockedExpected, `Tq ${Tq}: one-row kernel`);
      assert.deepEqual(calls.sgemm > 0, blockedExpected, `Tq ${Tq}: GEMMs`);
      assertMaxAbsDiff(out, oneRow(portableKernels, c, x), 1e-5, `segmentAttention Tq ${Tq}`);
    }
  });
});

describe('the transformer with blocked prefill attention', () => {
  test('logits of a prompt in two chunks equal those of the same prompt fed one token at a time, to 1e-5', () => {
    // Portable kernels: their sgemm and sgemv sum in the same order, so the two runs differ only in
    // the attention path (the native BLAS would add its own GEMM-vs-GEMV rounding).
    const cfg = modelConfigOf({ family: 'qwen3', ...PRESETS.tiny! }, [0]);
    const model = new Transformer(cfg, randomParams(cfg, 5, 0.1), portableKernels);
    const prompt = Array.from({ length: 2 * QUERY_BLOCK + 60 }, (_, i) => (i * 31 + 7) % cfg.vocabSize);
    const V = cfg.vocabSize,
      cut = QUERY_BLOCK + 30; // both chunks cross a block boundary; the second has start > 0

    const chunked = new Float32Array(prompt.length * V);
    const cache = createKvCache(cfg);
    for (const [from, to] of [
      [0, cut],
      [cut, prompt.length],
    ] as const) {
      const [logits] = model.forward([{ cache, tokens: prompt.slice(from, to), logitsFrom: 0 }]);
      chunked.set(logits!, from * V);
    }
    const oneByOne = new Float32Array(prompt.length * V);
    const cache1 = createKvCache(cfg);
    prompt.forEach((id, i) => oneByOne.set(model.forward([{ cache: cache1, tokens: [id], logitsFrom: 0 }])[0]!, i * V));

    let worst = 0,
      largest = 0;
    for (let i = 0; i < chunked.length; i++) {
      worst = Math.max(worst, Math.abs(chunked[i]! - oneByOne[i]!));
      largest = Math.max(largest, Math.abs(oneByOne[i]!));
    }
    assert.ok(largest > 0.5, `logits too small to test anything (max |logit| ${largest})`);
    assert.ok(worst <= 1e-5, `max |chunked - one by one| logit = ${worst}`);
  });
});

describe('prefillAttentionBf16 (native, bf16 cache rows)', () => {
  const flashCases: Case[] = [
    { Tq: QUERY_BLOCK + 5, start: 0, numHeads: 8, numKvHeads: 4, headDim: 32, qScale: 1 }, // uncached, padded block
    { Tq: 2 * QUERY_BLOCK + 1, start: 300, numHeads: 4, numKvHeads: 2, headDim: 16, qScale: 1 }, // keys not a multiple of 64
    { Tq: QUERY_BLOCK + 7, start: 1000, numHeads: 8, numKvHeads: 2, headDim: 64, qScale: 1 }, // three key chunks
    { Tq: 300, start: 37, numHeads: 16, numKvHeads: 8, headDim: 128, qScale: 1 }, // Qwen3-0.6B's heads
    { Tq: QUERY_BLOCK, start: 600, numHeads: 2, numKvHeads: 1, headDim: 16, qScale: 40 }, // large scores: the running max
    { Tq: 20, start: 700, numHeads: 4, numKvHeads: 2, headDim: 32, qScale: 1 }, // 2 heads of 32 rows stacked
    { Tq: 50, start: 90, numHeads: 4, numKvHeads: 1, headDim: 16, qScale: 1 }, // 4 heads of 64 rows stacked
    { Tq: 8, start: 2000, numHeads: 16, numKvHeads: 8, headDim: 128, qScale: 1 }, // 2 heads of 32 rows stacked
    { Tq: 100, start: 70, numHeads: 8, numKvHeads: 2, headDim: 32, qScale: 1 }, // 4 x 128 rows: too many to stack
  ];
  /** The cache rows as bf16 bits, and the float32 values those bits hold (what the reference reads). */
  const bf16Rows = (k: Kernels, x: Float32Array) => {
    const bits = new Uint16Array(x.length);
    k.toBf16(bits, x, x.length);
    return { bits, values: Float32Array.from(bits, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]!) };
  };

  test('equals the one-row kernel over the same bf16 rows to bf16 rounding of Q and P', { skip: skipNative }, () => {
    const k = native();
    for (const c of flashCases) {
      const x = inputs(c);
      const [kr, vr] = [bf16Rows(k, x.k), bf16Rows(k, x.v)];
      const out = new Float32Array(x.q.length).fill(NaN);
      const computed = k.prefillAttentionBf16!(
        out,
        x.q,
        kr.bits,
        vr.bits,
        c.Tq,
        c.start,
        c.numHeads,
        c.numKvHeads,
        c.headDim,
      );
      assert.equal(computed, true, 'this build has oneDNN (CI installs it)');
      const reference = oneRow(portableKernels, c, { q: x.q, k: kr.values, v: vr.values });
      // Q and P rounded to bf16 (2^-9 relative each) move an output by a few 2^-9 of max |v| (1);
      // Q's rounding moves the scores in proportion to their size (qScale).
      assertMaxAbsDiff(out, reference, 8e-3 * c.qScale, `flash ${name(c)}`);
      const gemmPath = blocked({ ...k, prefillAttentionBf16: undefined }, c, { q: x.q, k: kr.bits, v: vr.bits });
      assertMaxAbsDiff(out, gemmPath.out, 8e-3, `flash vs the GEMM path ${name(c)}`);
    }
  });

  test('segmentAttention sends bf16 rows to it from FLASH_MIN_ROWS query rows, never f32 rows', {
    skip: skipNative,
  }, () => {
    const heads = { numHeads: 4, numKvHeads: 2, headDim: 16 };
    for (const [Tq, bf16, expected] of [
      [FLASH_MIN_ROWS - 1, true, false],
      [FLASH_MIN_ROWS, true, true],
      [FLASH_MIN_ROWS, false, false],
    ] as const) {
      const c = { ...heads, Tq, start: 40, qScale: 1 };
      const x = inputs(c);
      let calls = 0;
      const counting: Kernels = {
        ...native(),
        prefillAttentionBf16: (...args) => {
          calls++;
          return native().prefillAttentionBf16!(...args);
        },
      };
      const [kRows, vRows] = bf16 ? [bf16Rows(native(), x.k).bits, bf16Rows(native(), x.v).bits] : [x.k, x.v];
      segmentAttention(
        counting,
        new Float32Array(x.q.length),
        x.q,
        kRows,
        vRows,
        Tq,
        c.start,
        heads,
        (n) => new Float32Array(n),
      );
      assert.equal(calls > 0, expected, `Tq ${Tq}, ${bf16 ? 'bf16' : 'f32'} rows`);
    }
  });

  test('checks its arguments', { skip: skipNative }, () => {
    const k = native();
    const [q, out] = [new Float32Array(4 * 2 * 8), new Float32Array(4 * 2 * 8)];
    const rows = new Uint16Array(6 * 8);
    assert.throws(
      () => k.prefillAttentionBf16!(out, q, rows, rows, 4, 3, 2, 1, 8),
      /k.*\(start\+Tq\)\*nKvHeads\*headDim/,
    );
    assert.throws(() => k.prefillAttentionBf16!(out, q, rows, rows, 4, 0, 3, 2, 8), /not a multiple of nKvHeads/);
    assert.throws(() => k.prefillAttentionBf16!(out, q, q as unknown as Uint16Array, rows, 4, 0, 2, 1, 8), TypeError);
  });
});
