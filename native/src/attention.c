// Causal grouped-query attention, two-pass softmax in float32, one query row at a time:
//   1. scores[h][j] = q[t,h] . k[j, kv(h)] * scale for every head h and visible key j;
//   2. softmax over j for each head (max subtracted);
//   3. out[t,h] = sum_j p[h][j] * v[j, kv(h)].
// Steps 1 and 3 walk the cache rows in order, all heads of a row together, so k and v stream
// through memory once per query: walking one head's column instead jumps a whole row
// (kvStride floats, often a page) per key, which defeats the prefetcher.
//
// The cache rows are float32, bf16 bits (the bf16 and int8 engines' caches, half the bytes a
// decode step streams) or int8 with a scale per block of 32 values (--kv-cache-dtype int8, 1.125
// bytes a value); bf16 rows are widened to float32 exactly and the arithmetic is the same, int8
// rows are multiplied by their block's scale.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "kernels.h"
#include "spin_pool.h"
#include "vec_math.h"

// Steps 1 and 3 take this many cache rows at a time, so that each load of the query (step 1)
// or load and store of the output row (step 3) serves that many multiply-adds instead of one.
#define KEYS_PER_PASS 4

// scores[i] = scale * (x . rows[i * stride ..]) for `keys` (<= KEYS_PER_PASS) rows. One
// accumulator per row: two per row measured slower (register pressure).
static inline void dot_rows(float* scores, const float* x, const float* rows, size_t keys, size_t stride, size_t n,
                            float scale) {
  if (keys == KEYS_PER_PASS && n % 8 == 0) {
    const float *r0 = rows, *r1 = rows + stride, *r2 = rows + 2 * stride, *r3 = rows + 3 * stride;
    f32x8 acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
    for (size_t d = 0; d < n; d += 8) {
      f32x8 xd = load8(x + d);
      acc0 += xd * load8(r0 + d);
      acc1 += xd * load8(r1 + d);
      acc2 += xd * load8(r2 + d);
      acc3 += xd * load8(r3 + d);
    }
    scores[0] = add_lanes(acc0) * scale;
    scores[1] = add_lanes(acc1) * scale;
    scores[2] = add_lanes(acc2) * scale;
    scores[3] = add_lanes(acc3) * scale;
    return;
  }
  for (size_t i = 0; i < keys; i++) scores[i] = dot_f32(x, rows + i * stride, n) * scale;
}

// out[d] += sum_i p[i] * rows[i * stride + d] over `keys` (<= KEYS_PER_PASS) rows.
static inline void add_weighted_rows(float* out, const float* p, const float* rows, size_t keys, size_t stride,
                                     size_t n) {
  if (keys == KEYS_PER_PASS) {
    const float *r0 = rows, *r1 = rows + stride, *r2 = rows + 2 * stride, *r3 = rows + 3 * stride;
    for (size_t d = 0; d < n; d++) out[d] += (p[0] * r0[d] + p[1] * r1[d]) + (p[2] * r2[d] + p[3] * r3[d]);
    return;
  }
  for (size_t i = 0; i < keys; i++)
    for (size_t d = 0; d < n; d++) out[d] += p[i] * rows[i * stride + d];
}

// dot_rows on bf16 rows, in the same order of operations.
static inline void dot_rows_bf16(float* scores, const float* x, const uint16_t* rows, size_t keys, size_t stride,
                                 size_t n, float scale) {
  if (keys == KEYS_PER_PASS && n % 8 == 0) {
    const uint16_t *r0 = rows, *r1 = rows + stride, *r2 = rows + 2 * stride, *r3 = rows + 3 * stride;
    f32x8 acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
    for (size_t d = 0; d < n; d += 8) {
      f32x8 xd = load8(x + d);
      acc0 += xd * load8_bf16(r0 + d);
      acc1 += xd * load8_bf16(r1 + d);
      acc2 += xd * load8_bf16(r2 + d);
      acc3 += xd * load8_bf16(r3 + d);
    }
    scores[0] = add_lanes(acc0) * scale;
    scores[1] = add_lanes(acc1) * scale;
    scores[2] = add_lanes(acc2) * scale;
    scores[3] = add_lanes(acc3) * scale;
    return;
  }
  for (size_t i = 0; i < keys; i++) {
    const uint16_t* r = rows + i * stride;
    f32x8 acc = {0};
    size_t d = 0;
    for (; d + 8 <= n; d += 8) acc += load8(x + d) * load8_bf16(r + d);
    float tail = 0.f;
    for (; d < n; d++) tail += x[d] * bf16_to_f32(r[d]);
    scores[i] = (add_lanes(acc) + tail) * scale;
  }
}

// add_weighted_rows on bf16 rows.
static inline void add_weighted_rows_bf16(float* out, const float* p, const uint16_t* rows, size_t keys,
                                          size_t stride, size_t n) {
  if (keys == KEYS_PER_PASS && n % 8 == 0) {
    const uint16_t *r0 = rows, *r1 = rows + stride, *r2 = rows + 2 * stride, *r3 = rows + 3 * stride;
    const f32x8 p0 = splat8(p[0]), p1 = splat8(p[1]), p2 = splat8(p[2]), p3 = splat8(p[3]);
    for (size_t d = 0; d < n; d += 8)
      store8(out + d, load8(out + d) + ((p0 * load8_bf16(r0 + d) + p1 * load8_bf16(r1 + d)) +
                                        (p2 * load8_bf16(r2 + d) + p3 * load8_bf16(r3 + d))));
    return;
  }
  for (size_t i = 0; i < keys; i++)
    for (size_t d = 0; d < n; d++) out[d] += p[i] * bf16_to_f32(rows[i * stride + d]);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define INT8_AVX2 1
#define AVX2_TARGET __attribute__((target("avx2,fma")))

// gcc turns int8 -> float conversions written with vector extensions into scalar code
// (int8.c), so the int8 rows' loops have an AVX2 variant in intrinsics, picked at run time.
static bool int8_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// 8 int8 values at p, as floats.
AVX2_TARGET static inline __m256 load8_i8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)));
}

// sum over blocks b of scales[b] * (x . row's block b), n a multiple of 32.
AVX2_TARGET static float dot_i8_avx2(const float* x, const int8_t* row, const float* scales, size_t n) {
  __m256 acc = _mm256_setzero_ps();
  for (size_t b = 0; b < n; b += 32) {
    __m256 block = _mm256_mul_ps(_mm256_loadu_ps(x + b), load8_i8(row + b));
    for (size_t d = b + 8; d < b + 32; d += 8)
      block = _mm256_fmadd_ps(_mm256_loadu_ps(x + d), load8_i8(row + d), block);
    acc = _mm256_fmadd_ps(block, _mm256_set1_ps(scales[b / 32]), acc);
  }
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 pairs = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// out[0..n) += w * the row's values (scale times int8), n a multiple of 32.
AVX2_TARGET static void add_i8_avx2(float* out, float w, const int8_t* row, const float* scales, size_t n) {
  for (size_t b = 0; b < n; b += 32) {
    const __m256 ws = _mm256_set1_ps(w * scales[b / 32]);
    for (size_t d = b; d < b + 32; d += 8)
      _mm256_storeu_ps(out + d, _mm256_fmadd_ps(ws, load8_i8(row + d), _mm256_loadu_ps(out + d)));
  }
}
#else
#define INT8_AVX2 0
static bool int8_avx2(void) { return false; }
#endif

// dot_rows on int8 rows starting at element `at`: each block of 32 products is summed, then
// scaled. AVX-512 CPUs take attention_avx512.c instead; AVX2 ones the variant above.
static inline void dot_rows_int8(float* scores, const float* x, const KvRowsRef* rows, size_t at, size_t keys,
                                 size_t stride, size_t n, float scale, bool avx2) {
  const int8_t* data = rows->data;
  for (size_t i = 0; i < keys; i++) {
    const size_t row = at + i * stride;
#if INT8_AVX2
    if (avx2) {
      scores[i] = dot_i8_avx2(x, data + row, rows->scales + row / 32, n) * scale;
      continue;
    }
#endif
    float acc = 0.f;
    for (size_t b = 0; b < n; b += 32) {
      float block = 0.f;
      for (size_t d = b; d < b + 32; d++) block += x[d] * (float)data[row + d];
      acc += block * rows->scales[(row + b) / 32];
    }
    scores[i] = acc * scale;
  }
}

// add_weighted_rows on int8 rows starting at element `at`.
static inline void add_weighted_rows_int8(float* out, const float* p, const KvRowsRef* rows, size_t at, size_t keys,
                                          size_t stride, size_t n, bool avx2) {
  const int8_t* data = rows->data;
  for (size_t i = 0; i < keys; i++) {
    const size_t row = at + i * stride;
#if INT8_AVX2
    if (avx2) {
      add_i8_avx2(out, p[i], data + row, rows->scales + row / 32, n);
      continue;
    }
#endif
    for (size_t b = 0; b < n; b += 32) {
      const float w = p[i] * rows->scales[(row + b) / 32];
      for (size_t d = b; d < b + 32; d++) out[d] += w * (float)data[row + d];
    }
  }
}

typedef struct {
  float* out;
  const float* q;
  const KvRowsRef *k, *v;
  bool int8_avx2; // int8 rows through the AVX2 variants
  const AttentionShape* shape;
  float* scores; // [n_heads][max_keys]
  size_t max_keys;
} AttentionCall;

// The query heads of kv heads [first, first + count), every query row: each kv head's query
// heads read and write only their own columns of q, out and scores.
SIMD_CLONES
static void attention_kv_heads(void* ctx, size_t first, size_t count) {
  const AttentionCall* c = ctx;
  const AttentionShape* shape = c->shape;
  const size_t head_dim = shape->head_dim, group = shape->n_heads / shape->n_kv_heads;
  const size_t row_width = shape->n_heads * head_dim, max_keys = c->max_keys;
  const size_t h_first = first * group, h_end = (first + count) * group;

  for (size_t t = 0; t < shape->tq; t++) {
    const size_t n_keys = shape->start + t + 1;
    const float* q_t = c->q + t * row_width;
    float* out_t = c->out + t * row_width;

    for (size_t j0 = 0; j0 < n_keys; j0 += KEYS_PER_PASS) {
      const size_t keys = n_keys - j0 < KEYS_PER_PASS ? n_keys - j0 : KEYS_PER_PASS;
      for (size_t kvh = first; kvh < first + count; kvh++) {
        const size_t at = j0 * shape->kv_stride + kvh * head_dim;
        for (size_t h = kvh * group; h < (kvh + 1) * group; h++) {
          float* scores = c->scores + h * max_keys + j0;
          const float* x = q_t + h * head_dim;
          if (c->k->kind == KV_BF16)
            dot_rows_bf16(scores, x, (const uint16_t*)c->k->data + at, keys, shape->kv_stride, head_dim, shape->scale);
          else if (c->k->kind == KV_INT8)
            dot_rows_int8(scores, x, c->k, at, keys, shape->kv_stride, head_dim, shape->scale, c->int8_avx2);
          else
            dot_rows(scores, x, (const float*)c->k->data + at, keys, shape->kv_stride, head_dim, shape->scale);
        }
      }
    }
    for (size_t h = h_first; h < h_end; h++) softmax_f32(c->scores + h * max_keys, n_keys);

    // Written only now that these heads of q_t have been read, so out may even alias q.
    memset(out_t + h_first * head_dim, 0, (h_end - h_first) * head_dim * sizeof(float));
    for (size_t j0 = 0; j0 < n_keys; j0 += KEYS_PER_PASS) {
      const size_t keys = n_keys - j0 < KEYS_PER_PASS ? n_keys - j0 : KEYS_PER_PASS;
      for (size_t kvh = first; kvh < first + count; kvh++) {
        const size_t at = j0 * shape->kv_stride + kvh * head_dim;
        for (size_t h = kvh * group; h < (kvh + 1) * group; h++) {
          const float* p = c->scores + h * max_keys + j0;
          float* o = out_t + h * head_dim;
          if (c->v->kind == KV_BF16)
            add_weighted_rows_bf16(o, p, (const uint16_t*)c->v->data + at, keys, shape->kv_stride, head_dim);
          else if (c->v->kind == KV_INT8)
            add_weighted_rows_int8(o, p, c->v, at, keys, shape->kv_stride, head_dim, c->int8_avx2);
          else
            add_weighted_rows(o, p, (const float*)c->v->data + at, keys, shape->kv_stride, head_dim);
        }
      }
    }
  }
}

// OPENCLAW_RL_ATTENTION=generic keeps the loops here on an AVX-512 CPU, =scalar also keeps int8
// rows off the AVX2 variants (read on every call, for tests).
static bool attention_setting(const char* value) {
  const char* setting = getenv("OPENCLAW_RL_ATTENTION");
  return setting != NULL && strcmp(setting, value) == 0;
}

// Decode's attention, so on decode's pool (spin_pool.c): on AVX-512 split by keys
// (attention_avx512.c), else here, split by kv head.
bool attention_f32(float* out, const float* q, const KvRowsRef* k, const KvRowsRef* v, const AttentionShape* shape) {
  const bool scalar = attention_setting("scalar");
  if (shape->head_dim % 16 == 0 && attention_avx512_available() && !scalar && !attention_setting("generic"))
    return attention_avx512(out, q, k, v, shape);
  const size_t max_keys = shape->start + shape->tq;
  size_t scores_bytes;
  if (__builtin_mul_overflow(shape->n_heads * sizeof(float), max_keys, &scores_bytes)) return false;
  float* scores = malloc(scores_bytes);
  if (scores == NULL) return false;
  AttentionCall c = {.out = out, .q = q, .k = k, .v = v, .int8_avx2 = int8_avx2() && !scalar, .shape = shape,
                     .scores = scores, .max_keys = max_keys};
  // Each query row reads every visible key and value of its heads: 2 * keys * nHeads * headDim products.
  pool_run(shape->n_kv_heads, 2 * shape->tq * max_keys * shape->n_heads * shape->head_dim, attention_kv_heads, &c);
  free(scores);
  return true;
}
