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
#include <string.h>

#include "int8.h"

#ifdef INT8_X86_INTRINSICS
#include <immintrin.h>

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t vnni_rows_bytes(size_t m, size_t k) {
  size_t blocks = k / INT8_BLOCK, pairs = (blocks + 1) / 2;
  return 64 + 2 * round64(m * k) + round64(m * pairs * sizeof(uint64_t)) + round64(m * pairs * 16 * sizeof(float)) +
         round64(m * blocks * sizeof(float));
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
  memset(rows->neg, 0, m * pairs * sizeof(uint64_t));
  memset(rows->scale16, 0, m * pairs * 16 * sizeof(float));
  for (size_t i = 0; i < m; i++)
    for (size_t b = 0; b < blocks; b++) {
      const size_t first = i * k + b * INT8_BLOCK, pair = i * pairs + b / 2, half = b % 2;
      float scale = rows->scales[i * blocks + b];
      for (int l = 0; l < INT8_BLOCK; l++) {
        // The quantizer ignores NaN and maps infinities to finite values; the fp32 product would
        // not, so such a block's scale becomes NaN and so does every output it reaches.
        if (!isfinite(x[first + l])) scale = NAN;
        int8_t v = rows->q[first + l];
        rows->abs[first + l] = (uint8_t)(v < 0 ? -v : v);
        if (v < 0) rows->neg[pair] |= (uint64_t)1 << (half * INT8_BLOCK + (size_t)l);
      }
      for (int l = 0; l < 8; l++) rows->scale16[pair * 16 + half * 8 + (size_t)l] = scale;
    }
}

bool vnni_supported(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
}

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

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
