// sgemm, sgemv and the thread count, forwarded once every size has been checked against the
// arrays: to oneDNN when the addon uses it (gemm.h), else to the system BLAS (OpenBLAS on Linux,
// Accelerate on macOS).
#include <string.h>

#ifdef __APPLE__
#include <Accelerate/Accelerate.h>
#else
#include <cblas.h>
// Declared here too because a generic cblas.h (not OpenBLAS's own) lacks it; the addon links
// OpenBLAS explicitly, so the symbol is always there.
void openblas_set_num_threads(int num_threads);
#endif

#include "args.h"
#include "gemm.h"
#include "ops.h"

// BLAS reads no input when the inner dimension is 0 but implementations differ in whether
// they then still apply beta, so that case is handled here.
void gemm_scale_rows(float* y, size_t rows, size_t cols, size_t stride, float beta) {
  for (size_t r = 0; r < rows; r++) {
    float* row = y + r * stride;
    if (beta == 0.f)
      memset(row, 0, cols * sizeof(float));
    else
      for (size_t c = 0; c < cols; c++) row[c] *= beta;
  }
}

// sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
napi_value op_sgemm(napi_env env, napi_callback_info info) {
  OpCall call;
  bool trans_a, trans_b;
  size_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  F32Array a, b, c;
  if (!op_begin(env, info, "sgemm", 13, &call) || !op_bool(&call, 0, "transA", &trans_a) ||
      !op_bool(&call, 1, "transB", &trans_b) || !op_size(&call, 2, "M", 0, &m) || !op_size(&call, 3, "N", 0, &n) ||
      !op_size(&call, 4, "K", 0, &k) || !op_float(&call, 5, "alpha", &alpha) || !op_f32_array(&call, 6, "A", &a) ||
      !op_size(&call, 7, "lda", 0, &lda) || !op_f32_array(&call, 8, "B", &b) || !op_size(&call, 9, "ldb", 0, &ldb) ||
      !op_float(&call, 10, "beta", &beta) || !op_f32_array(&call, 11, "C", &c) ||
      !op_size(&call, 12, "ldc", 0, &ldc))
    return NULL;
  // A is stored [M,K], or [K,M] when transposed; B is stored [K,N], or [N,K].
  if (!op_check_matrix(&call, "A", a.length, trans_a ? k : m, trans_a ? m : k, trans_a ? "K x M" : "M x K", lda,
                       "lda") ||
      !op_check_matrix(&call, "B", b.length, trans_b ? n : k, trans_b ? k : n, trans_b ? "N x K" : "K x N", ldb,
                       "ldb") ||
      !op_check_matrix(&call, "C", c.length, m, n, "M x N", ldc, "ldc"))
    return NULL;
  if (m == 0 || n == 0) return NULL;
  if (k == 0) {
    gemm_scale_rows(c.data, m, n, ldc, beta);
    return NULL;
  }
  if (gemm_uses_onednn()) {
    const char* failure = onednn_sgemm(trans_a, trans_b, m, n, k, alpha, a.data, lda, b.data, ldb, beta, c.data, ldc);
    if (failure) op_throw_value(&call, "oneDNN's sgemm failed: %s", failure);
    return NULL;
  }
  blas_sgemm(trans_a, trans_b, m, n, k, alpha, a.data, lda, b.data, ldb, beta, c.data, ldc);
  return NULL;
}

void blas_sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
                const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (int)m,
              (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

// sgemv(trans, M, N, alpha, A, lda, x, beta, y), A stored [M,N]
napi_value op_sgemv(napi_env env, napi_callback_info info) {
  OpCall call;
  bool trans;
  size_t m, n, lda;
  float alpha, beta;
  F32Array a, x, y;
  if (!op_begin(env, info, "sgemv", 9, &call) || !op_bool(&call, 0, "trans", &trans) ||
      !op_size(&call, 1, "M", 0, &m) || !op_size(&call, 2, "N", 0, &n) || !op_float(&call, 3, "alpha", &alpha) ||
      !op_f32_array(&call, 4, "A", &a) || !op_size(&call, 5, "lda", 0, &lda) || !op_f32_array(&call, 6, "x", &x) ||
      !op_float(&call, 7, "beta", &beta) || !op_f32_array(&call, 8, "y", &y))
    return NULL;
  size_t x_length = trans ? m : n;
  size_t y_length = trans ? n : m;
  if (!op_check_matrix(&call, "A", a.length, m, n, "M x N", lda, "lda") ||
      !op_check_length(&call, "x", x.length, x_length, 1, 1, trans ? "M" : "N") ||
      !op_check_length(&call, "y", y.length, y_length, 1, 1, trans ? "N" : "M"))
    return NULL;
  if (y_length == 0) return NULL;
  if (x_length == 0) {
    gemm_scale_rows(y.data, 1, y_length, y_length, beta);
    return NULL;
  }
  if (gemm_uses_onednn()) {
    // Kept off OpenBLAS so that a decode step, which alternates sgemv with the LoRA sgemms, keeps
    // to one thread pool: with sgemv on OpenBLAS, the serving benchmark decoded 2.5 tok/s on 2
    // busy cores, against 4.9 with everything on oneDNN. A^T x is a one-row sgemm, x^T A.
    if (!trans) {
      gemv_f32(m, n, alpha, a.data, lda, x.data, beta, y.data);
      return NULL;
    }
    const char* failure = onednn_sgemm(false, false, 1, n, m, alpha, x.data, m, a.data, lda, beta, y.data, n);
    if (failure) op_throw_value(&call, "oneDNN's sgemm failed: %s", failure);
    return NULL;
  }
  cblas_sgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, (int)m, (int)n, alpha, a.data, (int)lda, x.data, 1,
              beta, y.data, 1);
  return NULL;
}

// setThreads(n). BLAS threads are process-wide, so a call from one worker affects all of them;
// OpenMP's (oneDNN's) are per calling thread.
napi_value op_set_threads(napi_env env, napi_callback_info info) {
  OpCall call;
  size_t threads;
  if (!op_begin(env, info, "setThreads", 1, &call) || !op_size(&call, 0, "n", 1, &threads)) return NULL;
#ifdef __APPLE__
  // Accelerate sizes its own thread pool and has no call to change it.
  (void)threads;
#else
  openblas_set_num_threads((int)threads);
#endif
  gemm_set_threads((int)threads);
  return NULL;
}
