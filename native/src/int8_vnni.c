// gemmInt8 on CPUs with AVX512-VNNI (int8.c picks it): the activations are quantized too, per
// block of 32 as the weights are (int8_quantize_rows), and each block's dot product is an exact
// int32 sum of int8 products (vpdpbusd), scaled by the two blocks' scales in fp32, as llama.cpp
// does for Q8_0 weights. It removes the int8 -> fp32 conversions that hold the fp32-activation
// variants back, at the cost of the activations' rounding.
//
// vpdpbusd multiplies unsigned bytes by signed ones. The activations are given as |q| (unsigned)
// and their signs move onto the weights (negated where the activation is negative): |a| * (+-w)
// equals a * w, and neither side reaches -128 (both are clamped to +-127).
#include <math.h>
#include <stdint.h>

#include "int8.h"

#ifdef INT8_X86_INTRINSICS
#include <immintrin.h>

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t vnni_rows_bytes(size_t m, size_t k) {
  size_t blocks = k / INT8_BLOCK, pairs = (blocks + 1) / 2;
  return 64 + 2 * round64(m * k) + round64(m * pairs * sizeof(uint64_t)) + round64(m * pairs * 16 * sizeof(float)) +
         round64(m * blocks * sizeof(float));
}

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

// One block pair (or a last single block, `bytes` 32) of row values q and x: |q|, the sign bits,
// and the two scales over their 8 lanes each. The quantizer ignores NaN and maps infinities to
// finite values; the fp32 product would not, so such a block's scale becomes NaN and so does
// every output it reaches.
VNNI_TARGET static void vnni_layout_pair(uint8_t* abs, uint64_t* neg, float* scale16, const int8_t* q,
                                         const float* x, const float* scales, size_t bytes) {
  const __mmask64 valid = bytes == 64 ? ~(__mmask64)0 : 0xFFFFFFFFull;
  const __m512i v = _mm512_maskz_loadu_epi8(valid, q);
  _mm512_mask_storeu_epi8(abs, valid, _mm512_abs_epi8(v));
  *neg = _mm512_movepi8_mask(v) & valid;
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  for (size_t half = 0; half < bytes / INT8_BLOCK; half++) {
    __mmask16 nonfinite = 0;
    for (size_t l = 0; l < INT8_BLOCK; l += 16) {
      const __m512i bits = _mm512_loadu_si512(x + half * INT8_BLOCK + l);
      nonfinite |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, exponent), exponent);
    }
    _mm256_storeu_ps(scale16 + half * 8, _mm256_set1_ps(nonfinite ? NAN : scales[half]));
  }
  if (bytes < 64) _mm256_storeu_ps(scale16 + 8, _mm256_setzero_ps());
}

void vnni_quantize(VnniRows* rows, void* memory, size_t m, size_t k, const float* x) {
  size_t blocks = k / INT8_BLOCK, pairs = (blocks + 1) / 2;
  uint8_t* at = (uint8_t*)(((uintptr_t)memory + 63) & ~(uintptr_t)63);
  rows->m = m;
  rows->k = k;
  rows->pairs = pairs;
  rows->abs = at;
  at += round64(m * k);
  rows->q = (int8_t*)at;
  at += round64(m * k);
  rows->neg = (uint64_t*)at;
  at += round64(m * pairs * sizeof(uint64_t));
  rows->scale16 = (float*)at;
  at += round64(m * pairs * 16 * sizeof(float));
  rows->scales = (float*)at;

  int8_quantize_rows(0, m, k, rows->q, rows->scales, x);
  for (size_t i = 0; i < m; i++)
    for (size_t pair = 0; pair < pairs; pair++) {
      const size_t first = i * k + pair * 64, b = 2 * pair;
      vnni_layout_pair(rows->abs + first, rows->neg + i * pairs + pair, rows->scale16 + (i * pairs + pair) * 16,
                       rows->q + first, x + first, rows->scales + i * blocks + b, b + 1 < blocks ? 64 : 32);
    }
}

bool vnni_supported(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
}

// Lane l of a pair's dot products sums bytes 4l..4l+3: lanes 0-7 hold the first block's sums,
// lanes 8-15 the second's. Two accumulators (even and odd pairs) hide the FMA latency.
VNNI_TARGET static float dot_vnni(const uint8_t* abs, const uint64_t* neg, const float* scale16, const int8_t* q,
                                  const float* scales, size_t blocks) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  size_t pair = 0;
  for (; 2 * pair + 1 < blocks; pair++) {
    __m512i w = _mm512_loadu_si512(q + pair * 64);
    __m512i signed_w = _mm512_mask_sub_epi8(w, (__mmask64)neg[pair], zero, w);
    __m512i dot = _mm512_dpbusd_epi32(zero, _mm512_loadu_si512(abs + pair * 64), signed_w);
    __m128 two_scales = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i*)(scales + 2 * pair)));
    __m512 scale = _mm512_mul_ps(_mm512_permutexvar_ps(halves, _mm512_castps128_ps512(two_scales)),
                                 _mm512_loadu_ps(scale16 + pair * 16));
    acc[pair & 1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[pair & 1]);
  }
  if (2 * pair < blocks) {
    // An odd last block: the low 32 bytes only (scale16's upper half is zero there).
    const __mmask64 low = 0xFFFFFFFFull;
    __m512i w = _mm512_maskz_loadu_epi8(low, q + pair * 64);
    __m512i signed_w = _mm512_mask_sub_epi8(w, (__mmask64)neg[pair], zero, w);
    __m512i dot = _mm512_dpbusd_epi32(zero, _mm512_maskz_loadu_epi8(low, abs + pair * 64), signed_w);
    __m512 scale = _mm512_mul_ps(_mm512_set1_ps(scales[2 * pair]), _mm512_loadu_ps(scale16 + pair * 16));
    acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[0]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

// Each row of q is read from memory once and stays in L1 for the m rows of x.
VNNI_TARGET void vnni_gemm_columns(const VnniRows* rows, size_t first, size_t count, size_t n, const int8_t* q,
                                   const float* scales, float* y) {
  const size_t k = rows->k, blocks = k / INT8_BLOCK, pairs = rows->pairs;
  for (size_t j = first; j < first + count; j++)
    for (size_t i = 0; i < rows->m; i++)
      y[i * n + j] = dot_vnni(rows->abs + i * k, rows->neg + i * pairs, rows->scale16 + i * pairs * 16, q + j * k,
                              scales + j * blocks, blocks);
}
#endif
