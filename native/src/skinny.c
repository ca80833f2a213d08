// The bf16 product of a long operand and a thin one: C (m x n) = alpha * A B + beta * C with n up to
// SKINNY_MAX (a LoRA rank) and a long K: a LoRA adapter's input u = x A^T and its share of the
// backward dyB = dy B. oneDNN's matmul ran these at 110-220 GFLOP/s in a step at the 0.6B shape (2
// threads), a fifth of its peak on the model's big products: at 16 columns its kernel is a poor
// fit, and it copies A into its own layout on every call for a product that reads A once. (At 32
// columns oneDNN reaches 500-600 GFLOP/s, and this kernel no more: bf16_ops.c sends only up to 16
// here.)
//
// A is read in place. B, a few KB, is first laid out in vdpbf16ps's pairs: each 32-bit lane of a
// vector holds two bf16 values of one column at consecutive K. Each thread takes blocks of ROWS rows
// of C and keeps them in registers along all of K: each step along K broadcasts a pair of A's row
// and adds its products with the pair vectors of B to the row's accumulators (AVX512-BF16; bf16
// products summed in fp32, as every path sums them).
#include <stdint.h>
#include <string.h>

#include "bf16.h"
#include "parallel.h"

#ifdef BF16_X86
#include <immintrin.h>

#define ROWS 16

static size_t pairs_of(size_t k) { return (k + 1) / 2; }

size_t skinny_work_bytes(size_t n, size_t k) {
  (void)n;
  return pairs_of(k) * 32 * sizeof(uint16_t);
}

// pairs[q][j][h] (j < 16, h < 2) = B[2q + h][j] of the k x n matrix B (bf16 bits), 0 past either end.
// b holds B contiguous (row stride n), or B^T (transposed: n rows of k).
static void pair_rows(uint16_t* pairs, const uint16_t* b, bool transposed, size_t k, size_t n) {
  memset(pairs, 0, pairs_of(k) * 32 * sizeof(uint16_t));
  if (transposed) {
    for (size_t j = 0; j < n; j++) {
      for (size_t q = 0; q < k / 2; q++) memcpy(pairs + (q * 16 + j) * 2, b + j * k + 2 * q, 2 * sizeof(uint16_t));
      if (k % 2) pairs[(k / 2 * 16 + j) * 2] = b[j * k + k - 1];
    }
    return;
  }
  for (size_t p = 0; p < k; p++) {
    uint16_t* out = pairs + p / 2 * 32 + p % 2;
    for (size_t j = 0; j < n; j++) out[2 * j] = b[p * n + j];
  }
}

// The pair (row[p], row[p + 1]) as one 32-bit value, the second 0 past the end of K.
static inline int32_t pair_at(const uint16_t* row, size_t p, size_t k) {
  int32_t v;
  if (p + 1 < k) {
    memcpy(&v, row + p, sizeof v);
    return v;
  }
  return (int32_t)row[p];
}

// C's rows 0 .. rows (rows <= ROWS; a constant at each call site, so that acc stays in registers),
// all n (<= 16) columns.
BF16_TARGET __attribute__((always_inline)) static inline void skinny_rows(size_t rows, size_t n, size_t k,
                                                                          float alpha, const uint16_t* a, size_t lda,
                                                                          const uint16_t* pairs, float beta, float* c,
                                                                          size_t ldc) {
  __m512 acc[ROWS];
  for (size_t r = 0; r < rows; r++) acc[r] = _mm512_setzero_ps();
  for (size_t q = 0; q < pairs_of(k); q++) {
    const __m512bh bv = (__m512bh)_mm512_loadu_si512((const void*)(pairs + q * 32));
    for (size_t r = 0; r < rows; r++)
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_set1_epi32(pair_at(a + r * lda, 2 * q, k)), bv);
  }
  const __mmask16 mask = (__mmask16)((1u << n) - 1);
  const __m512 alpha16 = _mm512_set1_ps(alpha), beta16 = _mm512_set1_ps(beta);
  for (size_t r = 0; r < rows; r++) {
    float* out = c + r * ldc;
    __m512 y = _mm512_mul_ps(acc[r], alpha16);
    if (beta != 0.f) y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, out), beta16, y);
    _mm512_mask_storeu_ps(out, mask, y);
  }
}

BF16_TARGET static void skinny_share(size_t m, size_t n, size_t k, float alpha, const uint16_t* a, size_t lda,
                                     const uint16_t* pairs, float beta, float* c, size_t ldc) {
  size_t i = 0;
  for (; i + ROWS <= m; i += ROWS) skinny_rows(ROWS, n, k, alpha, a + i * lda, lda, pairs, beta, c + i * ldc, ldc);
  for (; i < m; i++) skinny_rows(1, n, k, alpha, a + i * lda, lda, pairs, beta, c + i * ldc, ldc);
}

void gemm_skinny(size_t m, size_t n, size_t k, float alpha, const uint16_t* a, size_t lda, const uint16_t* b,
                 bool b_transposed, void* work, float beta, float* c, size_t ldc) {
  uint16_t* pairs = work;
  pair_rows(pairs, b, b_transposed, k, n);
#pragma omp parallel if (m * k >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share_blocks(m, ROWS, &first, &count);
    skinny_share(count, n, k, alpha, a + first * lda, lda, pairs, beta, c + first * ldc, ldc);
  }
}
#endif
