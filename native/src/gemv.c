// y = alpha * A x + beta * y for a row-major A, as one dot product per row, on decode's pool
// (spin_pool.c; threaded in a oneDNN build, see binding.gyp). oneDNN's sgemm with one row is
// 2-3x slower than this on the 151936 x 1024 output head (bench/gemm.ts), and OpenBLAS's sgemv
// would bring its own spinning thread pool into a decode step (see blas_ops.c).
#include "gemm.h"

#include "dispatch.h"
#include "spin_pool.h"
#include "vec_math.h"

SIMD_CLONES
static void gemv_rows(size_t first, size_t count, size_t n, float alpha, const float* a, size_t lda, const float* x,
                      float beta, float* y) {
  for (size_t i = first; i < first + count; i++) {
    float sum = alpha * dot_f32(a + i * lda, x, n);
    y[i] = beta == 0.f ? sum : sum + beta * y[i];
  }
}

typedef struct {
  size_t m, n, lda;
  float alpha, beta;
  const float *a, *x;
  float* y;
} Gemv;

static void gemv_share(void* ctx, size_t first, size_t count) {
  const Gemv* g = ctx;
  gemv_rows(first, count, g->n, g->alpha, g->a, g->lda, g->x, g->beta, g->y);
}

void gemv_f32(size_t m, size_t n, float alpha, const float* a, size_t lda, const float* x, float beta, float* y) {
  Gemv g = {.m = m, .n = n, .lda = lda, .alpha = alpha, .beta = beta, .a = a, .x = x, .y = y};
  pool_run(m, m * n, gemv_share, &g);
}
