// Decode attention on AVX-512 (attention.c picks it where the CPU has it and head_dim is a
// multiple of 16), flash-decoding style: a query row's keys are cut into chunks, each thread takes
// whole chunks (so it streams whole cache rows, contiguous memory, instead of its kv heads' part of
// every row), and each chunk keeps its own softmax (its log-sum-exp per head) and normalised
// weighted sum, which are combined at the end. The rows are float32, bf16 or int8 (times their
// block's scale; head_dim a multiple of 32 there), widened to float32 as they are loaded. Within a
// chunk, over blocks of 8 cache rows:
//   scores: each pair of query heads that share a kv head takes 8 keys' dot products at once,
//     16 accumulators in registers, reduced in one transpose-and-add tree, instead of one
//     horizontal sum per key and head;
//   weighted sum: each pair of heads adds the 8 rows' values to its output with the 16 weights
//     held in registers, one load and store of the output per 8 rows.
// The generic loops in attention.c (split by kv head, so each thread read half of every row) ran
// at 15-18 GB/s at 8k-16k keys on two Zen 5 cores, and at 30-40 GFLOP/s with the rows in cache:
// at long contexts decode was bound by those loops, not by the bytes.
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "spin_pool.h"
#include "vec_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define AVX512_TARGET __attribute__((target("avx512f")))
#define INLINE __attribute__((always_inline)) static inline
// Keys per chunk at least (a chunk is the unit of work a thread takes), and chunks at most.
#define CHUNK_KEYS 128
#define MAX_CHUNKS 16

bool attention_avx512_available(void) { return __builtin_cpu_supports("avx512f"); }

// 16 elements at index i of float32 rows, of bf16 rows widened exactly, or of int8 rows times
// their block's scale (i is a multiple of 16, so the 16 share a block of 32).
AVX512_TARGET INLINE __m512 load16(const KvRowsRef* rows, KvKind kind, size_t i) {
  if (kind == KV_BF16) {
    const __m256i bits = _mm256_loadu_si256((const __m256i*)((const uint16_t*)rows->data + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  if (kind == KV_INT8) {
    const __m128i bytes = _mm_loadu_si128((const __m128i*)((const int8_t*)rows->data + i));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)), _mm512_set1_ps(rows->scales[i / 32]));
  }
  return _mm512_loadu_ps((const float*)rows->data + i);
}

AVX512_TARGET INLINE __m256 halves_added(__m512 a) {
  return _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

// The sums of each of a[0..7]'s 16 lanes, as 8 floats in order.
AVX512_TARGET INLINE __m256 lane_sums(const __m512 a[8]) {
  const __m256 s01 = _mm256_hadd_ps(halves_added(a[0]), halves_added(a[1]));
  const __m256 s23 = _mm256_hadd_ps(halves_added(a[2]), halves_added(a[3]));
  const __m256 s45 = _mm256_hadd_ps(halves_added(a[4]), halves_added(a[5]));
  const __m256 s67 = _mm256_hadd_ps(halves_added(a[6]), halves_added(a[7]));
  const __m256 s0123 = _mm256_hadd_ps(s01, s23), s4567 = _mm256_hadd_ps(s45, s67);
  return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

// One query row of a call: its queries, the keys it sees, and the chunks they are split into.
typedef struct {
  const float* q;
  const KvRowsRef *k, *v;
  const AttentionShape* shape;
  size_t n_keys, chunks;
  bool prefetch; // n_keys >= PREFETCH_MIN_KEYS
  float* scores;  // [n_heads][n_keys]
  float* partial; // [chunks][n_heads][head_dim]
  float* lse;     // [chunks][n_heads]
} Row;

// s0[0..7] (and s1 when two) = scale * q0 (q1) . the 8 rows at `at`, `stride` apart.
AVX512_TARGET INLINE void scores_block(float* s0, float* s1, const float* q0, const float* q1, const KvRowsRef* k,
                                       KvKind kind, size_t at, size_t stride, size_t hd, float scale, bool two) {
  __m512 a[8], b[8];
  for (int i = 0; i < 8; i++) a[i] = b[i] = _mm512_setzero_ps();
  for (size_t c = 0; c < hd; c += 16) {
    const __m512 x0 = _mm512_loadu_ps(q0 + c), x1 = two ? _mm512_loadu_ps(q1 + c) : x0;
    for (int i = 0; i < 8; i++) {
      const __m512 row = load16(k, kind, at + i * stride + c);
      a[i] = _mm512_fmadd_ps(x0, row, a[i]);
      if (two) b[i] = _mm512_fmadd_ps(x1, row, b[i]);
    }
  }
  const __m256 scale8 = _mm256_set1_ps(scale);
  _mm256_storeu_ps(s0, _mm256_mul_ps(lane_sums(a), scale8));
  if (two) _mm256_storeu_ps(s1, _mm256_mul_ps(lane_sums(b), scale8));
}

// o0 (and o1) += sum over the 8 rows at `at` of p0[i] (p1[i]) * row i.
AVX512_TARGET INLINE void weighted_block(float* o0, float* o1, const float* p0, const float* p1, const KvRowsRef* v,
                                         KvKind kind, size_t at, size_t stride, size_t hd, bool two) {
  __m512 w0[8], w1[8];
  for (int i = 0; i < 8; i++) {
    w0[i] = _mm512_set1_ps(p0[i]);
    w1[i] = two ? _mm512_set1_ps(p1[i]) : w0[i];
  }
  for (size_t c = 0; c < hd; c += 16) {
    // Two partial sums per head: chains of 4 dependent FMAs instead of 8.
    __m512 a0 = _mm512_loadu_ps(o0 + c), a1 = _mm512_setzero_ps();
    __m512 b0 = two ? _mm512_loadu_ps(o1 + c) : a1, b1 = _mm512_setzero_ps();
    for (int i = 0; i < 8; i += 2) {
      const __m512 r0 = load16(v, kind, at + i * stride + c), r1 = load16(v, kind, at + (i + 1) * stride + c);
      a0 = _mm512_fmadd_ps(w0[i], r0, a0);
      a1 = _mm512_fmadd_ps(w0[i + 1], r1, a1);
      if (two) {
        b0 = _mm512_fmadd_ps(w1[i], r0, b0);
        b1 = _mm512_fmadd_ps(w1[i + 1], r1, b1);
      }
    }
    _mm512_storeu_ps(o0 + c, _mm512_add_ps(a0, a1));
    if (two) _mm512_storeu_ps(o1 + c, _mm512_add_ps(b0, b1));
  }
}

// Rows [row, row + count) of a cache into L1: the walk below (8 rows at a time, a kv head's part
// of each after another) is not one the hardware prefetchers follow far enough ahead.
AVX512_TARGET INLINE void prefetch_rows(const KvRowsRef* rows, KvKind kind, size_t row, size_t count, size_t stride) {
  const size_t size = kind == KV_F32 ? 4 : kind == KV_BF16 ? 2 : 1;
  const char* from = (const char*)rows->data + row * stride * size;
  for (size_t b = 0; b < count * stride * size; b += 64) _mm_prefetch(from + b, _MM_HINT_T0);
  if (kind == KV_INT8) {
    const char* scales = (const char*)(rows->scales + row * stride / 32);
    for (size_t b = 0; b < count * stride / 32 * sizeof(float); b += 64) _mm_prefetch(scales + b, _MM_HINT_T0);
  }
}

// Rows ahead of the block being read that prefetch_rows asks for, and from how many keys on:
// below, a row's rows may still be in the caches, where the prefetches only cost instructions.
#define PREFETCH_AHEAD 32
#define PREFETCH_MIN_KEYS 1024

// Scores of keys [from, to) (whole blocks of 8) for every head: scores[h * n + j].
AVX512_TARGET INLINE void scores_rows(const Row* r, size_t from, size_t to, KvKind kind) {
  const AttentionShape* s = r->shape;
  const size_t hd = s->head_dim, stride = s->kv_stride, group = s->n_heads / s->n_kv_heads, n = r->n_keys;
  for (size_t j0 = from; j0 < to; j0 += 8) {
    if (r->prefetch && j0 + PREFETCH_AHEAD + 8 <= to) prefetch_rows(r->k, kind, j0 + PREFETCH_AHEAD, 8, stride);
    for (size_t kvh = 0; kvh < s->n_kv_heads; kvh++) {
      const size_t at = j0 * stride + kvh * hd;
      for (size_t h = kvh * group; h < (kvh + 1) * group; h += 2) {
        float* s0 = r->scores + h * n + j0;
        const float* q0 = r->q + h * hd;
        if (h + 1 < (kvh + 1) * group)
          scores_block(s0, s0 + n, q0, q0 + hd, r->k, kind, at, stride, hd, s->scale, true);
        else
          scores_block(s0, NULL, q0, NULL, r->k, kind, at, stride, hd, s->scale, false);
      }
    }
  }
}

// out[h] += sum over keys [from, to) (whole blocks of 8) of scores[h * n + j] * v row j, every head.
AVX512_TARGET INLINE void weighted_rows(const Row* r, float* out, size_t from, size_t to, KvKind kind) {
  const AttentionShape* s = r->shape;
  const size_t hd = s->head_dim, stride = s->kv_stride, group = s->n_heads / s->n_kv_heads, n = r->n_keys;
  for (size_t j0 = from; j0 < to; j0 += 8) {
    if (r->prefetch && j0 + PREFETCH_AHEAD + 8 <= to) prefetch_rows(r->v, kind, j0 + PREFETCH_AHEAD, 8, stride);
    for (size_t kvh = 0; kvh < s->n_kv_heads; kvh++) {
      const size_t at = j0 * stride + kvh * hd;
      for (size_t h = kvh * group; h < (kvh + 1) * group; h += 2) {
        float* o0 = out + h * hd;
        const float* p0 = r->scores + h * n + j0;
        if (h + 1 < (kvh + 1) * group)
          weighted_block(o0, o0 + hd, p0, p0 + n, r->v, kind, at, stride, hd, true);
        else
          weighted_block(o0, NULL, p0, NULL, r->v, kind, at, stride, hd, false);
      }
    }
  }
}

// The keys after the last whole block, one at a time.
AVX512_TARGET INLINE void tail_scores(const Row* r, size_t from, size_t to, KvKind kind) {
  const AttentionShape* s = r->shape;
  const size_t hd = s->head_dim, group = s->n_heads / s->n_kv_heads;
  for (size_t j = from; j < to; j++)
    for (size_t h = 0; h < s->n_heads; h++) {
      __m512 acc = _mm512_setzero_ps();
      for (size_t c = 0; c < hd; c += 16)
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(r->q + h * hd + c),
                              load16(r->k, kind, j * s->kv_stride + (h / group) * hd + c), acc);
      r->scores[h * r->n_keys + j] = _mm512_reduce_add_ps(acc) * s->scale;
    }
}

AVX512_TARGET INLINE void tail_weighted(const Row* r, float* out, size_t from, size_t to, KvKind kind) {
  const AttentionShape* s = r->shape;
  const size_t hd = s->head_dim, group = s->n_heads / s->n_kv_heads;
  for (size_t j = from; j < to; j++)
    for (size_t h = 0; h < s->n_heads; h++) {
      const __m512 p = _mm512_set1_ps(r->scores[h * r->n_keys + j]);
      for (size_t c = 0; c < hd; c += 16) {
        float* o = out + h * hd + c;
        _mm512_storeu_ps(o, _mm512_fmadd_ps(p, load16(r->v, kind, j * s->kv_stride + (h / group) * hd + c),
                                            _mm512_loadu_ps(o)));
      }
    }
}

static size_t chunks_for(size_t n_keys) {
  const size_t chunks = (n_keys + CHUNK_KEYS - 1) / CHUNK_KEYS;
  return chunks < MAX_CHUNKS ? chunks : MAX_CHUNKS;
}

// Chunk c's keys: whole blocks of 8, the last chunk ending at n_keys.
static void chunk_keys(const Row* r, size_t c, size_t* from, size_t* to) {
  const size_t blocks = (r->n_keys + 7) / 8;
  *from = c * blocks / r->chunks * 8;
  const size_t end = (c + 1) * blocks / r->chunks * 8;
  *to = end < r->n_keys ? end : r->n_keys;
}

// Chunks [first, first + count): each one's softmax over its own keys, its lse per head and its
// normalised weighted sum of values (partial[c]), combined by attention_avx512.
AVX512_TARGET static void chunk_task(void* ctx, size_t first, size_t count) {
  const Row* r = ctx;
  const AttentionShape* s = r->shape;
  const size_t hd = s->head_dim, n = r->n_keys;
  for (size_t c = first; c < first + count; c++) {
    size_t from, to;
    chunk_keys(r, c, &from, &to);
    const size_t wide_end = from + ((to - from) & ~(size_t)7);
    float* out = r->partial + c * s->n_heads * hd;
    switch (r->k->kind) { // a constant kind in each call, so that load16's branches fold away
    case KV_BF16:
      scores_rows(r, from, wide_end, KV_BF16);
      tail_scores(r, wide_end, to, KV_BF16);
      break;
    case KV_INT8:
      scores_rows(r, from, wide_end, KV_INT8);
      tail_scores(r, wide_end, to, KV_INT8);
      break;
    default:
      scores_rows(r, from, wide_end, KV_F32);
      tail_scores(r, wide_end, to, KV_F32);
    }
    for (size_t h = 0; h < s->n_heads; h++)
      r->lse[c * s->n_heads + h] = softmax_f32(r->scores + h * n + from, to - from);
    memset(out, 0, s->n_heads * hd * sizeof(float));
    switch (r->v->kind) {
    case KV_BF16:
      weighted_rows(r, out, from, wide_end, KV_BF16);
      tail_weighted(r, out, wide_end, to, KV_BF16);
      break;
    case KV_INT8:
      weighted_rows(r, out, from, wide_end, KV_INT8);
      tail_weighted(r, out, wide_end, to, KV_INT8);
      break;
    default:
      weighted_rows(r, out, from, wide_end, KV_F32);
      tail_weighted(r, out, wide_end, to, KV_F32);
    }
  }
}

bool attention_avx512(float* out, const float* q, const KvRowsRef* k, const KvRowsRef* v, const AttentionShape* shape) {
  const size_t n_heads = shape->n_heads, hd = shape->head_dim, max_keys = shape->start + shape->tq;
  const size_t max_chunks = chunks_for(max_keys);
  size_t floats;
  if (__builtin_mul_overflow(n_heads, max_keys + max_chunks * (hd + 1), &floats)) return false;
  float* memory = malloc(floats * sizeof(float));
  if (memory == NULL) return false;
  for (size_t t = 0; t < shape->tq; t++) {
    const size_t n_keys = shape->start + t + 1;
    const size_t chunks = chunks_for(n_keys);
    Row r = {.q = q + t * n_heads * hd, .k = k, .v = v, .shape = shape, .n_keys = n_keys, .chunks = chunks,
             .prefetch = n_keys >= PREFETCH_MIN_KEYS, .scores = memory, .partial = memory + n_heads * max_keys,
             .lse = memory + n_heads * (max_keys + max_chunks * hd)};
    // Each key is read once and takes 2 * nHeads * headDim multiply-adds.
    pool_run(chunks, 2 * n_keys * n_heads * hd, chunk_task, &r);
    // out[h] = sum over chunks of exp(lse_c - lse) * partial_c[h], lse the log-sum-exp of the lse_c.
    float* out_t = out + t * n_heads * hd;
    for (size_t h = 0; h < n_heads; h++) {
      float top = -INFINITY;
      for (size_t c = 0; c < chunks; c++) top = fmaxf(top, r.lse[c * n_heads + h]);
      float weights[MAX_CHUNKS], sum = 0.f;
      for (size_t c = 0; c < chunks; c++) sum += weights[c] = expf(r.lse[c * n_heads + h] - top);
      for (size_t d = 0; d < hd; d++) {
        float acc = 0.f;
        for (size_t c = 0; c < chunks; c++) acc += weights[c] * r.partial[(c * n_heads + h) * hd + d];
        out_t[h * hd + d] = acc / sum;
      }
    }
  }
  free(memory);
  return true;
}

#else

bool attention_avx512_available(void) { return false; }

bool attention_avx512(float* out, const float* q, const KvRowsRef* k, const KvRowsRef* v, const AttentionShape* shape) {
  (void)out, (void)q, (void)k, (void)v, (void)shape;
  return false;
}

#endif
