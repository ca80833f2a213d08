// int8 weights for decoding (quantizeInt8, gemmInt8; see kernels.ts). A weight matrix [N,K] is
// stored as int8 in blocks of 32 along K with one fp32 scale per block, 1.125 bytes per weight
// against bf16's 2, and a decode step's speed is the speed of streaming its weights.
//
// gemmInt8 picks, per call, the widest variant the CPU runs:
// - AVX512-VNNI (int8_vnni.c): the activations are quantized too and the dot products are int8;
// - else AVX-512, AVX2 or generic C: the weights are dequantized on the fly (int8 -> fp32, times
//   the fp32 activations, summed in fp32), so the weights' rounding is the only error. The
//   conversions cost more than bf16's (a shift): these stream fewer GB/s than gemmBf16
//   (docs/cpu-performance.md).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bf16.h"
#include "dispatch.h"
#include "int8.h"
#include "ops.h"
#include "parallel.h"
#include "spin_pool.h"

#define BLOCK INT8_BLOCK

// Buffers larger than this are freed after the call instead of kept for the next one.
#define SCRATCH_KEEP_BYTES ((size_t)1 << 20)

SIMD_CLONES
void int8_quantize_rows(size_t first, size_t count, size_t k, int8_t* q, float* scales, const float* w) {
  size_t blocks = k / BLOCK;
  for (size_t b = first * blocks; b < (first + count) * blocks; b++) {
    const float* wb = w + b * BLOCK;
    // Comparisons rather than fmaxf/fminf, which gcc calls out of line (their NaN rules): the
    // same results, NaN included (a comparison with NaN is false: NaN is skipped by the maximum
    // and clamps to -127, as fmaxf(-127, NaN) does), in vector code.
    float max = 0.f;
    for (int i = 0; i < BLOCK; i++) {
      float a = fabsf(wb[i]);
      max = a > max ? a : max;
    }
    float scale = max / 127.f;
    scales[b] = scale;
    for (int i = 0; i < BLOCK; i++) {
      float v = scale == 0.f ? 0.f : nearbyintf(wb[i] / scale);
      v = v > -127.f ? v : -127.f;
      q[b * BLOCK + i] = (int8_t)(v < 127.f ? v : 127.f);
    }
  }
}

// sum over blocks of scale * (x . q) for one row of x against one row of q. gcc turns int8 ->
// float vector conversions written with vector extensions into scalar code (measured: 6 GB/s of
// weights, a third of bf16's speed), so the x86 variants are written with intrinsics and picked
// at run time; the generic one is for other CPUs.
typedef float (*DotI8)(const float* x, const int8_t* q, const float* scales, size_t blocks);

static float dot_i8_generic(const float* x, const int8_t* q, const float* scales, size_t blocks) {
  float sum = 0.f;
  for (size_t b = 0; b < blocks; b++) {
    float block = 0.f;
    for (int i = 0; i < BLOCK; i++) block += x[b * BLOCK + i] * (float)q[b * BLOCK + i];
    sum += block * scales[b];
  }
  return sum;
}

#ifdef INT8_X86_INTRINSICS
#include <immintrin.h>

// Two accumulators (even and odd blocks) hide the FMA latency of the per-block chain.
__attribute__((target("avx512f,avx512bw"))) static float dot_i8_avx512(const float* x, const int8_t* q,
                                                                       const float* scales, size_t blocks) {
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (size_t b = 0; b < blocks; b++) {
    const float* xb = x + b * BLOCK;
    const int8_t* qb = q + b * BLOCK;
    __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)qb)));
    __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(qb + 16))));
    __m512 t = _mm512_fmadd_ps(_mm512_loadu_ps(xb + 16), q1, _mm512_mul_ps(_mm512_loadu_ps(xb), q0));
    acc[b & 1] = _mm512_fmadd_ps(t, _mm512_set1_ps(scales[b]), acc[b & 1]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

__attribute__((target("avx2,fma"))) static float dot_i8_avx2(const float* x, const int8_t* q, const float* scales,
                                                             size_t blocks) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (size_t b = 0; b < blocks; b++) {
    const float* xb = x + b * BLOCK;
    const int8_t* qb = q + b * BLOCK;
    __m256 t = _mm256_setzero_ps();
    for (int i = 0; i < BLOCK; i += 8) {
      __m256 qi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(qb + i))));
      t = _mm256_fmadd_ps(_mm256_loadu_ps(xb + i), qi, t);
    }
    acc[b & 1] = _mm256_fmadd_ps(t, _mm256_set1_ps(scales[b]), acc[b & 1]);
  }
  __m256 sum = _mm256_add_ps(acc[0], acc[1]);
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  half = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(half, _mm_shuffle_ps(half, half, 1)));
}
#endif

typedef enum { INT8_VNNI, INT8_AVX512, INT8_AVX2, INT8_GENERIC } Int8Variant;

// The widest variant the CPU runs; OPENCLAW_RL_INT8_DOT=avx512|avx2|generic caps it (to test them).
static Int8Variant pick_variant(void) {
  const char* cap = getenv("OPENCLAW_RL_INT8_DOT");
  int limit = !cap || !*cap                ? INT8_VNNI
              : strcmp(cap, "avx512") == 0 ? INT8_AVX512
              : strcmp(cap, "avx2") == 0   ? INT8_AVX2
                                           : INT8_GENERIC;
#ifdef INT8_X86_INTRINSICS
  __builtin_cpu_init();
  if (limit <= INT8_VNNI && vnni_supported()) return INT8_VNNI;
  if (limit <= INT8_AVX512 && __builtin_cpu_supports("avx512bw")) return INT8_AVX512;
  if (limit <= INT8_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return INT8_AVX2;
#else
  (void)limit;
#endif
  return INT8_GENERIC;
}

const char* int8_variant_name(void) {
  static const char* const names[] = {"vnni", "avx512", "avx2", "generic"};
  return names[pick_variant()];
}

static DotI8 dot_of(Int8Variant variant) {
#ifdef INT8_X86_INTRINSICS
  if (variant == INT8_AVX512) return dot_i8_avx512;
  if (variant == INT8_AVX2) return dot_i8_avx2;
#else
  (void)variant;
#endif
  return dot_i8_generic;
}

// Output columns [first, first + count): each row of q is read from memory once and stays in L1
// for the m (decode: one to a few) rows of x.
static void gemm_int8_columns(DotI8 dot, size_t m, size_t first, size_t count, size_t n, size_t k, const float* x,
                              const int8_t* q, const float* scales, float* y) {
  size_t blocks = k / BLOCK;
  for (size_t j = first; j < first + count; j++)
    for (size_t i = 0; i < m; i++) y[i * n + j] = dot(x + i * k, q + j * k, scales + j * blocks, blocks);
}

#ifdef INT8_X86_INTRINSICS
// Per thread, so that workers never share it; grown on demand, freed when the thread's JS
// environment goes.
static __thread void* vnni_scratch;
static __thread size_t vnni_scratch_bytes;
static __thread bool vnni_scratch_hooked;

static void vnni_scratch_release(void* unused) {
  (void)unused;
  free(vnni_scratch);
  vnni_scratch = NULL;
  vnni_scratch_bytes = 0;
  vnni_scratch_hooked = false;
}

// x quantized into this thread's scratch memory, or false (and a thrown error) without memory.
static bool vnni_rows(OpCall* call, VnniRows* rows, size_t m, size_t k, const float* x) {
  size_t bytes = vnni_rows_bytes(m, k);
  op_release_at_env_exit(call, &vnni_scratch_hooked, vnni_scratch_release);
  if (bytes > vnni_scratch_bytes) {
    void* grown = realloc(vnni_scratch, bytes);
    if (!grown) {
      op_throw_size(call, "could not allocate %zu bytes of scratch memory", bytes);
      return false;
    }
    vnni_scratch = grown;
    vnni_scratch_bytes = bytes;
  }
  vnni_quantize(rows, vnni_scratch, m, k, x);
  return true;
}

static void vnni_scratch_trim(void) {
  if (vnni_scratch_bytes <= SCRATCH_KEEP_BYTES) return;
  free(vnni_scratch);
  vnni_scratch = NULL;
  vnni_scratch_bytes = 0;
}
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
    size_t first, count;
    thread_share(n, &first, &count);
    int8_quantize_rows(first, count, k, q.data, scales.data, w.data);
  }
  return NULL;
}

// out = bf16 bits of scales[b] * q[b * 32 + i] for blocks [first, first + count), through a
// float32 buffer of 16 blocks so that one bf16_from_f32 call rounds 512 values.
SIMD_CLONES
static void dequantize_blocks_bf16(size_t first, size_t count, uint16_t* out, const int8_t* q, const float* scales) {
  float values[16 * BLOCK];
  for (size_t b0 = first; b0 < first + count; b0 += 16) {
    const size_t blocks = first + count - b0 < 16 ? first + count - b0 : 16;
    for (size_t b = 0; b < blocks; b++)
      for (int i = 0; i < BLOCK; i++) values[b * BLOCK + i] = scales[b0 + b] * (float)q[(b0 + b) * BLOCK + i];
    bf16_from_f32(out + b0 * BLOCK, values, blocks * BLOCK);
  }
}

// dequantizeInt8Bf16(out, q, scales, n): n values (a multiple of 32) back to bf16 bits, for the
// products that read a cache of int8 rows through bf16 GEMMs.
napi_value op_dequantize_int8_bf16(napi_env env, napi_callback_info info) {
  OpCall call;
  U16Array out;
  I8Array q;
  F32Array scales;
  size_t n;
  if (!op_begin(env, info, "dequantizeInt8Bf16", 4, &call) || !op_u16_array(&call, 0, "out", &out) ||
      !op_i8_array(&call, 1, "q", &q) || !op_f32_array(&call, 2, "scales", &scales) ||
      !op_size(&call, 3, "n", 0, &n) || !check_blocks(&call, n) ||
      !op_check_length(&call, "out", out.length, n, 1, 1, "n") ||
      !op_check_length(&call, "q", q.length, n, 1, 1, "n") ||
      !op_check_length(&call, "scales", scales.length, n / BLOCK, 1, 1, "n/32"))
    return NULL;
  const size_t blocks = n / BLOCK;
#pragma omp parallel if (n >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share(blocks, &first, &count);
    dequantize_blocks_bf16(first, count, out.data, q.data, scales.data);
  }
  return NULL;
}

typedef struct {
  DotI8 dot;
  size_t m, n, k;
  const float* x;
  const int8_t* q;
  const float* scales;
  float* y;
} Int8Gemm;

static void int8_gemm_share(void* ctx, size_t first, size_t count) {
  const Int8Gemm* g = ctx;
  gemm_int8_columns(g->dot, g->m, first, count, g->n, g->k, g->x, g->q, g->scales, g->y);
}

#ifdef INT8_X86_INTRINSICS
typedef struct {
  const VnniRows* rows;
  size_t n;
  const int8_t* q;
  const float* scales;
  float* y;
} VnniGemm;

static void vnni_gemm_share(void* ctx, size_t first, size_t count) {
  const VnniGemm* g = ctx;
  vnni_gemm_columns(g->rows, first, count, g->n, g->q, g->scales, g->y);
}
#endif

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
  if (m == 0) return NULL;
  Int8Variant variant = pick_variant();
  // On decode's pool (spin_pool.c): these are decode's products, one to a few rows.
#ifdef INT8_X86_INTRINSICS
  if (variant == INT8_VNNI) {
    VnniRows rows;
    if (!vnni_rows(&call, &rows, m, k, x.data)) return NULL;
    VnniGemm g = {.rows = &rows, .n = n, .q = q.data, .scales = scales.data, .y = y.data};
    pool_run(n, n * k, vnni_gemm_share, &g);
    vnni_scratch_trim();
    return NULL;
  }
#endif
  Int8Gemm g = {.dot = dot_of(variant), .m = m, .n = n, .k = k, .x = x.data, .q = q.data, .scales = scales.data,
                .y = y.data};
  pool_run(n, n * k, int8_gemm_share, &g);
  return NULL;
}
