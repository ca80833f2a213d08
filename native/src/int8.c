// int8 weights for decoding (quantizeInt8, gemmInt8; see kernels.ts). A weight matrix [N,K] is
// stored as int8 in blocks of 32 along K with one fp32 scale per block, 1.125 bytes per weight
// against bf16's 2, and a decode step's speed is the speed of streaming its weights.
//
// The product dequantizes on the fly (int8 -> fp32, times the fp32 activations, sums in fp32)
// rather than quantizing the activations too for VNNI's int8 dot products: that would add a
// second rounding error, and with the row of weights in L1 after its first use the fp32
// arithmetic is not what limits a decode step on the machines measured (docs/engine.md).
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "args.h"
#include "dispatch.h"
#include "ops.h"
#include "vec_math.h"

#define BLOCK 32

// As in gemv.c: below this many weights one thread is faster than starting a parallel region.
#define PARALLEL_MIN_ELEMENTS ((size_t)1 << 16)

typedef int8_t i8x8 __attribute__((vector_size(8)));

static inline f32x8 widen8_i8(const int8_t* p) {
  i8x8 v;
  memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, f32x8);
}

// Rows [first, first + count): scale = max|w| / 127 per block, q = w / scale rounded to nearest
// (ties to even, the default rounding mode), so the largest weight of a block maps to +-127.
SIMD_CLONES
static void quantize_rows(size_t first, size_t count, size_t k, int8_t* q, float* scales, const float* w) {
  size_t blocks = k / BLOCK;
  for (size_t b = first * blocks; b < (first + count) * blocks; b++) {
    const float* wb = w + b * BLOCK;
    float max = 0.f;
    for (int i = 0; i < BLOCK; i++) max = fmaxf(max, fabsf(wb[i]));
    float scale = max / 127.f;
    scales[b] = scale;
    for (int i = 0; i < BLOCK; i++) {
      float v = scale == 0.f ? 0.f : nearbyintf(wb[i] / scale);
      q[b * BLOCK + i] = (int8_t)fminf(127.f, fmaxf(-127.f, v));
    }
  }
}

// sum over blocks of scale * (x . q) for one row of x against one row of q.
static inline float dot_f32_i8(const float* x, const int8_t* q, const float* scales, size_t blocks) {
  f32x8 acc0 = {0}, acc1 = {0};
  for (size_t b = 0; b < blocks; b++) {
    const float* xb = x + b * BLOCK;
    const int8_t* qb = q + b * BLOCK;
    f32x8 s = splat8(scales[b]);
    f32x8 lo = load8(xb) * widen8_i8(qb) + load8(xb + 8) * widen8_i8(qb + 8);
    f32x8 hi = load8(xb + 16) * widen8_i8(qb + 16) + load8(xb + 24) * widen8_i8(qb + 24);
    acc0 += lo * s;
    acc1 += hi * s;
  }
  return add_lanes(acc0 + acc1);
}

// Output columns [first, first + count): each row of q is read from memory once and stays in L1
// for the m (decode: one to a few) rows of x.
SIMD_CLONES
static void gemm_int8_columns(size_t m, size_t first, size_t count, size_t n, size_t k, const float* x,
                              const int8_t* q, const float* scales, float* y) {
  size_t blocks = k / BLOCK;
  for (size_t j = first; j < first + count; j++)
    for (size_t i = 0; i < m; i++) y[i * n + j] = dot_f32_i8(x + i * k, q + j * k, scales + j * blocks, blocks);
}

// This thread's share [first, first + count) of `rows`, in a parallel region of a oneDNN build.
#ifdef _OPENMP
#define SHARE_ROWS(rows, first, count)                                        \
  size_t teams = (size_t)omp_get_num_threads(), me = (size_t)omp_get_thread_num(); \
  first = (rows) * me / teams;                                                \
  count = (rows) * (me + 1) / teams - first;
#else
#define SHARE_ROWS(rows, first, count)
#endif

// Checks [N,K] with K a multiple of BLOCK; the arrays' lengths are checked by the callers.
static bool check_blocks(OpCall* call, size_t k) {
  if (k % BLOCK == 0) return true;
  op_throw_size(call, "K = %zu must be a multiple of %d, the quantization block", k, BLOCK);
  return false;
}

// quantizeInt8(q, scales, w, N, K)
napi_value op_quantize_int8(napi_env env, napi_callback_info info) {
  OpCall call;
  I8Array q;
  F32Array scales, w;
  size_t n, k;
  if (!op_begin(env, info, "quantizeInt8", 5, &call) || !op_i8_array(&call, 0, "q", &q) ||
      !op_f32_array(&call, 1, "scales", &scales) || !op_f32_array(&call, 2, "w", &w) ||
      !op_size(&call, 3, "N", 0, &n) || !op_size(&call, 4, "K", 0, &k) || !check_blocks(&call, k) ||
      !op_check_length(&call, "q", q.length, n, k, 1, "N*K") ||
      !op_check_length(&call, "scales", scales.length, n, k / BLOCK, 1, "N*K/32") ||
      !op_check_length(&call, "w", w.length, n, k, 1, "N*K"))
    return NULL;
#pragma omp parallel if (n * k >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first = 0, count = n;
    SHARE_ROWS(n, first, count)
    quantize_rows(first, count, k, q.data, scales.data, w.data);
  }
  return NULL;
}

// gemmInt8(M, N, K, x, q, scales, y)
napi_value op_gemm_int8(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array x, scales, y;
  I8Array q;
  size_t m, n, k;
  if (!op_begin(env, info, "gemmInt8", 7, &call) || !op_size(&call, 0, "M", 0, &m) ||
      !op_size(&call, 1, "N", 0, &n) || !op_size(&call, 2, "K", 0, &k) || !op_f32_array(&call, 3, "x", &x) ||
      !op_i8_array(&call, 4, "q", &q) || !op_f32_array(&call, 5, "scales", &scales) ||
      !op_f32_array(&call, 6, "y", &y) || !check_blocks(&call, k) ||
      !op_check_length(&call, "x", x.length, m, k, 1, "M*K") ||
      !op_check_length(&call, "q", q.length, n, k, 1, "N*K") ||
      !op_check_length(&call, "scales", scales.length, n, k / BLOCK, 1, "N*K/32") ||
      !op_check_length(&call, "y", y.length, m, n, 1, "M*N"))
    return NULL;
#pragma omp parallel if (n * k >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first = 0, count = n;
    SHARE_ROWS(n, first, count)
    gemm_int8_columns(m, first, count, n, k, x.data, q.data, scales.data, y.data);
  }
  return NULL;
}
