// The bf16 GEMM with a short inner dimension (K <= SMALL_K_MAX in bf16_ops.c): a LoRA adapter's up
// projection (y += scale * u B^T, K = the rank) and its share of the input gradient (dx += scale
// dyB A). Such a product is a pass over C, and oneDNN's matmul made it a slow one: measured on 2
// threads, 512 x 3072 x 16 with beta 1 on a C not in cache took 566-677 us (about 20 GB/s of C
// read and written), where scaling the same C in place takes 150 us.
//
// Each thread takes whole rows of C, four at a time, and computes them a strip of 64 columns at a
// time in 16 registers. With AVX512-BF16 the products are bf16 dot products of pairs along K
// (vdpbf16ps, half the instructions of fp32 FMAs); elsewhere fp32 FMAs on the rounded values
// (products of two bf16 values are exact in float32, summed in fp32, as every path sums them).
// b is copied strip by strip into contiguous memory first: read in place, its rows n floats apart
// fell into the same L1 sets (3x slower).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "dispatch.h"
#include "parallel.h"

#define ROWS 4
#define VECTORS 4
#define STRIP (16 * VECTORS)

typedef float f32x16 __attribute__((vector_size(64), aligned(4)));

static inline f32x16 load16(const float* p) { return *(const f32x16*)p; }
static inline void store16(float* p, f32x16 x) { *(f32x16*)p = x; }

static size_t even(size_t k) { return (k + 1) & ~(size_t)1; }

size_t small_k_work_bytes(size_t m, size_t n, size_t k) {
  const size_t fp32 = k * n * sizeof(float), pairs = (m + n) * even(k) * sizeof(uint16_t);
  return fp32 > pairs ? fp32 : pairs;
}

// c = alpha * sum + beta * c, C not read when beta is 0.
static inline float finish(float sum, float alpha, float beta, float c) {
  return beta != 0.f ? alpha * sum + beta * c : alpha * sum;
}

// The rows from `first_row` on in full, and every row's columns from `first_col` on (what the
// blocked loops leave), one value at a time.
static void small_k_edges(size_t rows, size_t first_row, size_t first_col, size_t n, size_t k, float alpha,
                          const float* a, const float* b, float beta, float* c, size_t ldc) {
  for (size_t i = 0; i < rows; i++)
    for (size_t j = i < first_row ? first_col : 0; j < n; j++) {
      float sum = 0.f;
      for (size_t p = 0; p < k; p++) sum += a[i * k + p] * b[p * n + j];
      c[i * ldc + j] = finish(sum, alpha, beta, c[i * ldc + j]);
    }
}

SIMD_CLONES
static void small_k_rows(size_t rows, size_t n, size_t k, float alpha, const float* a, const float* strips,
                         float beta, float* c, size_t ldc) {
  const size_t whole_cols = n / STRIP * STRIP, whole_rows = rows / ROWS * ROWS;
  for (size_t i0 = 0; i0 < whole_rows; i0 += ROWS)
    for (size_t j0 = 0; j0 < whole_cols; j0 += STRIP) {
      const float* strip = strips + j0 * k;
      f32x16 acc[ROWS][VECTORS] = {{{0}}};
      for (size_t p = 0; p < k; p++) {
        f32x16 bv[VECTORS];
        for (int v = 0; v < VECTORS; v++) bv[v] = load16(strip + p * STRIP + 16 * v);
        for (int r = 0; r < ROWS; r++) {
          const float x = a[(i0 + r) * k + p];
          for (int v = 0; v < VECTORS; v++) acc[r][v] += x * bv[v];
        }
      }
      for (int r = 0; r < ROWS; r++)
        for (int v = 0; v < VECTORS; v++) {
          float* out = c + (i0 + r) * ldc + j0 + 16 * v;
          f32x16 y = acc[r][v] * alpha;
          if (beta != 0.f) y += load16(out) * beta;
          store16(out, y);
        }
    }
}

#ifdef BF16_X86
#include <immintrin.h>

bool bf16_dot_supported(void) {
  const char* cap = getenv("OPENCLAW_RL_BF16_DOT");
  if (cap && strcmp(cap, "fp32") == 0) return false;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
}

// a16: rows x kp bf16 (kp = k rounded up to even, the pad 0); pairs: per strip of 64 columns,
// kp/2 pairs of K by 64 columns by 2 (vdpbf16ps's operand layout).
BF16_TARGET
static void small_k_rows_bf16(size_t rows, size_t n, size_t kp, float alpha, const uint16_t* a16,
                              const uint16_t* pairs, float beta, float* c, size_t ldc) {
  const size_t whole_cols = n / STRIP * STRIP, whole_rows = rows / ROWS * ROWS;
  const __m512 alpha16 = _mm512_set1_ps(alpha), beta16 = _mm512_set1_ps(beta);
  for (size_t i0 = 0; i0 < whole_rows; i0 += ROWS)
    for (size_t j0 = 0; j0 < whole_cols; j0 += STRIP) {
      const uint16_t* strip = pairs + j0 * kp;
      __m512 acc[ROWS][VECTORS];
      for (int r = 0; r < ROWS; r++)
        for (int v = 0; v < VECTORS; v++) acc[r][v] = _mm512_setzero_ps();
      for (size_t q = 0; q < kp / 2; q++) {
        __m512bh bv[VECTORS];
        for (int v = 0; v < VECTORS; v++)
          bv[v] = (__m512bh)_mm512_loadu_si512((const void*)(strip + q * 2 * STRIP + 32 * v));
        for (int r = 0; r < ROWS; r++) {
          int32_t pair;
          memcpy(&pair, a16 + (i0 + r) * kp + 2 * q, sizeof pair);
          const __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
          for (int v = 0; v < VECTORS; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, bv[v]);
        }
      }
      for (int r = 0; r < ROWS; r++)
        for (int v = 0; v < VECTORS; v++) {
          float* out = c + (i0 + r) * ldc + j0 + 16 * v;
          __m512 y = _mm512_mul_ps(acc[r][v], alpha16);
          if (beta != 0.f) y = _mm512_fmadd_ps(_mm512_loadu_ps(out), beta16, y);
          _mm512_storeu_ps(out, y);
        }
    }
}
#else
bool bf16_dot_supported(void) { return false; }
#endif

// The bf16 bits of a rounded float32 value: its upper half, exactly.
static inline uint16_t upper_half(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return (uint16_t)(bits >> 16);
}

void gemm_small_k(size_t m, size_t n, size_t k, float alpha, const float* a, const float* b, void* work, float beta,
                  float* c, size_t ldc) {
  const size_t whole_cols = n / STRIP * STRIP;
  const bool dots = bf16_dot_supported();
  const size_t kp = even(k);
  uint16_t* a16 = work;
  uint16_t* pairs = a16 + m * kp;
  float* strips = work;
  if (dots) {
    for (size_t i = 0; i < m; i++)
      for (size_t p = 0; p < kp; p++) a16[i * kp + p] = p < k ? upper_half(a[i * k + p]) : 0;
    for (size_t j0 = 0; j0 < whole_cols; j0 += STRIP)
      for (size_t q = 0; q < kp / 2; q++)
        for (size_t j = 0; j < STRIP; j++)
          for (size_t h = 0; h < 2; h++) {
            const size_t p = 2 * q + h;
            pairs[j0 * kp + q * 2 * STRIP + 2 * j + h] = p < k ? upper_half(b[p * n + j0 + j]) : 0;
          }
  } else {
    for (size_t j0 = 0; j0 < whole_cols; j0 += STRIP)
      for (size_t p = 0; p < k; p++) memcpy(strips + j0 * k + p * STRIP, b + p * n + j0, STRIP * sizeof(float));
  }
#pragma omp parallel if (m * n >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share(m, &first, &count);
    float* rows_c = c + first * ldc;
#ifdef BF16_X86
    if (dots)
      small_k_rows_bf16(count, n, kp, alpha, a16 + first * kp, pairs, beta, rows_c, ldc);
    else
#endif
      small_k_rows(count, n, k, alpha, a + first * k, strips, beta, rows_c, ldc);
    small_k_edges(count, count / ROWS * ROWS, whole_cols, n, k, alpha, a + first * k, b, beta, rows_c, ldc);
  }
}
