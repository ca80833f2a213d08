// y = alpha * A x + beta * y for a row-major A, as one dot product per row, on the OpenMP
// threads (in a oneDNN build; see binding.gyp). oneDNN's sgemm with one row is 2-3x slower than
// this on the 151936 x 1024 output head (bench/gemm.ts), and OpenBLAS's sgemv would bring its
// own thread pool into a decode step that otherwise runs on OpenMP's (see blas_ops.c).
#include "gemm.h"

#include "dispatch.h"
#include "parallel.h"
#include "vec_math.h"

SIMD_CLONES
static void gemv_rows(size_t first, size_t count, size_t n, float alpha, const float* a, size_t lda, const float* x,
                      float beta, float* y) {
  for (size_t i = first; i < first + count; i++) {
    float sum = alpha * dot_f32(a + i * lda, x, n);
    y[i] = beta == 0.f ? sum : sum + beta * y[i];
  }
}

void gemv_f32(size_t m, size_t n, float alpha, const float* a, size_t lda, const float* x, float beta, float* y) {
#pragma omp parallel if (m * n >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share(m, &first, &count);
    gemv_rows(first, count, n, alpha, a, lda, x, beta, y);
  }
}
