// bfloat16 conversions and the small-M bf16 GEMM. The loops are compiled per instruction set
// (dispatch.h); the OpenMP pragmas only take effect in a oneDNN build (-fopenmp, binding.gyp),
// where they share oneDNN's threads.
#include "bf16.h"

#include <string.h>

#include "dispatch.h"
#include "parallel.h"
#include "spin_pool.h"
#include "vec_math.h"

static inline uint16_t bf16_bits(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  // NaN: keep sign and top payload bits, force the quiet bit so that truncation cannot make Inf.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u);
  // Round to nearest, ties to even: add just under half an ulp, plus the lsb that is kept.
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

SIMD_CLONES
static void bf16_from_f32_integer(uint16_t* out, const float* x, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = bf16_bits(x[i]);
}

#ifdef BF16_X86
#include <immintrin.h>

// vcvtne2ps2bf16 rounds 32 values in one instruction, to nearest even with NaN made quiet as
// bf16_bits does, but flushes subnormal inputs to zero: a run of 32 that holds one goes the integer
// way, so the bits are bf16_bits' in every case.
BF16_TARGET static void bf16_from_f32_instruction(uint16_t* out, const float* x, size_t n) {
  const __m512i exponent = _mm512_set1_epi32(0x7f800000), mantissa = _mm512_set1_epi32(0x007fffff);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i lo = _mm512_loadu_si512(x + i), hi = _mm512_loadu_si512(x + i + 16);
    const __mmask16 subnormal_lo = _mm512_testn_epi32_mask(lo, exponent) & _mm512_test_epi32_mask(lo, mantissa);
    const __mmask16 subnormal_hi = _mm512_testn_epi32_mask(hi, exponent) & _mm512_test_epi32_mask(hi, mantissa);
    if (subnormal_lo | subnormal_hi) {
      bf16_from_f32_integer(out + i, x + i, 32);
      continue;
    }
    const __m512bh bits = _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(hi), _mm512_castsi512_ps(lo));
    _mm512_storeu_si512(out + i, (__m512i)bits);
  }
  if (i < n) bf16_from_f32_integer(out + i, x + i, n - i);
}
#endif

void bf16_from_f32(uint16_t* out, const float* x, size_t n) {
#ifdef BF16_X86
  // Asked once: bf16_dot_supported reads the environment.
  static int instruction = -1;
  if (instruction < 0) instruction = bf16_dot_supported();
  if (instruction) {
    bf16_from_f32_instruction(out, x, n);
    return;
  }
#endif
  bf16_from_f32_integer(out, x, n);
}

void bf16_from_f32_parallel(uint16_t* out, const float* x, size_t n) {
#pragma omp parallel if (n >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share(n, &first, &count);
    bf16_from_f32(out + first, x + first, count);
  }
}

SIMD_CLONES
static void pack_rows(void* out, bool out_bf16, const void* x, bool is_bf16, size_t rows, size_t cols,
                      size_t ld) {
  for (size_t r = 0; r < rows; r++) {
    const float* xf = (const float*)x + r * ld;
    const uint16_t* xb = (const uint16_t*)x + r * ld;
    uint16_t* ob = (uint16_t*)out + r * cols;
    float* of = (float*)out + r * cols;
    if (out_bf16 && is_bf16)
      memcpy(ob, xb, cols * sizeof *ob);
    else if (out_bf16)
      for (size_t c = 0; c < cols; c++) ob[c] = bf16_bits(xf[c]);
    else if (is_bf16)
      for (size_t c = 0; c < cols; c++) of[c] = bf16_to_f32(xb[c]);
    else
      for (size_t c = 0; c < cols; c++) of[c] = bf16_to_f32(bf16_bits(xf[c]));
  }
}

// Only the small-M path's A (a row or a few) is copied transposed, so a plain gather is enough.
static void pack_transposed(void* out, bool out_bf16, const void* x, bool is_bf16, size_t rows, size_t cols,
                            size_t ld) {
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) {
      size_t at = c * ld + r;
      uint16_t bits = is_bf16 ? ((const uint16_t*)x)[at] : bf16_bits(((const float*)x)[at]);
      if (out_bf16)
        ((uint16_t*)out)[r * cols + c] = bits;
      else
        ((float*)out)[r * cols + c] = bf16_to_f32(bits);
    }
}

static void pack(void* out, bool out_bf16, const void* x, bool is_bf16, size_t rows, size_t cols, size_t ld,
                 bool transposed) {
  if (transposed) {
    pack_transposed(out, out_bf16, x, is_bf16, rows, cols, ld);
    return;
  }
  size_t out_size = out_bf16 ? sizeof(uint16_t) : sizeof(float), in_size = is_bf16 ? sizeof(uint16_t) : sizeof(float);
#pragma omp parallel if (rows * cols >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share(rows, &first, &count);
    pack_rows((char*)out + first * cols * out_size, out_bf16, (const char*)x + first * ld * in_size, is_bf16, count,
              cols, ld);
  }
}

void pack_bf16(uint16_t* out, const void* x, bool is_bf16, size_t rows, size_t cols, size_t ld, bool transposed) {
  pack(out, true, x, is_bf16, rows, cols, ld, transposed);
}

void pack_rounded_f32(float* out, const void* x, bool is_bf16, size_t rows, size_t cols, size_t ld,
                      bool transposed) {
  pack(out, false, x, is_bf16, rows, cols, ld, transposed);
}

// Columns [first, first + count): each b row is read from memory once and then stays in L1
// for the m (a row or a few) rows of a, so the kernel runs at the speed of streaming b.
SIMD_CLONES
static void gemm_bf16_columns(size_t m, size_t first, size_t count, size_t k, float alpha, const float* a,
                              const uint16_t* b, size_t ldb, float beta, float* c, size_t ldc) {
  for (size_t j = first; j < first + count; j++)
    for (size_t i = 0; i < m; i++) {
      float sum = alpha * dot_f32_bf16(a + i * k, b + j * ldb, k);
      float* out = c + i * ldc + j;
      *out = beta == 0.f ? sum : sum + beta * *out;
    }
}

typedef struct {
  size_t m, n, k, ldb, ldc;
  float alpha, beta;
  const float* a;
  const uint16_t* b;
  float* c;
} BF16Rows;

static void bf16_rows_share(void* ctx, size_t first, size_t count) {
  const BF16Rows* r = ctx;
  gemm_bf16_columns(r->m, first, count, r->k, r->alpha, r->a, r->b, r->ldb, r->beta, r->c, r->ldc);
}

// On decode's pool (spin_pool.c): these are decode's products, one to a few rows.
void gemm_bf16_rows(size_t m, size_t n, size_t k, float alpha, const float* a, const uint16_t* b, size_t ldb,
                    float beta, float* c, size_t ldc) {
  BF16Rows r = {.m = m, .n = n, .k = k, .ldb = ldb, .ldc = ldc, .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c};
  pool_run(n, n * k, bf16_rows_share, &r);
}
