// y = alpha * A x + beta * y for a row-major A, as one dot product per row, on the OpenMP
// threads (in a oneDNN build; see binding.gyp). oneDNN's sgemm with one row is 2-3x slower than
// this on the 151936 x 1024 output head (bench/gemm.ts), and OpenBLAS's sgemv would bring its
// own thread pool into a decode step that otherwise runs on OpenMP's (see blas_ops.c).
#include "gemm.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include "dispatch.h"
#include "vec_math.h"

// Below this many elements of A, one thread streams it faster than a parallel region starts.
#define PARALLEL_MIN_ELEMENTS ((size_t)1 << 16)

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
    size_t first = 0, count = m;
#ifdef _OPENMP
    size_t teams = (size_t)omp_get_num_threads(), me = (size_t)omp_get_thread_num();
    first = m * me / teams;
    count = m * (me + 1) / teams - first;
#endif
    gemv_rows(first, count, n, alpha, a, lda, x, beta, y);
  }
}
