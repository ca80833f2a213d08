// The GEMM backends shared by sgemm (blas_ops.c) and gemmBf16 (bf16_ops.c): the system BLAS,
// and oneDNN when the addon was built with it (OPENCLAW_ONEDNN, see binding.gyp). Callers
// have checked every size; nothing here validates.
#ifndef OPENCLAW_GEMM_H
#define OPENCLAW_GEMM_H

#include <node_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// y = beta * y over rows x cols (row stride `stride`); beta == 0 overwrites, NaN included, as
// BLAS does when the inner dimension is 0.
void gemm_scale_rows(float* y, size_t rows, size_t cols, size_t stride, float beta);

// Row-major sgemm on the system BLAS.
void blas_sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
                const float* b, size_t ldb, float beta, float* c, size_t ldc);

// y[i] = alpha * dot(A row i, x) + beta * y[i] (beta == 0 overwrites) for i < m; A is m x n, row stride lda.
void gemv_f32(size_t m, size_t n, float alpha, const float* a, size_t lda, const float* x, float beta, float* y);

// Chooses the backend once, at load, from OPENCLAW_RL_GEMM (unset: oneDNN when built with it;
// "onednn"; "blas"). Returns NULL, or a message saying why the setting cannot be honoured.
const char* gemm_select_backend(void);

// Whether sgemm and gemmBf16 run on oneDNN (false: the system BLAS).
bool gemm_uses_onednn(void);

// The `info` export: { gemm, isa, int8Dot, bf16Instructions } (see KernelInfo in kernels.ts).
napi_value gemm_info(napi_env env);

// Sets the threads of the calling thread's OpenMP teams (oneDNN and the addon's own loops) and
// so of its decode pool (spin_pool.c).
void gemm_set_threads(int threads);

// Row-major sgemm on oneDNN. Returns NULL, or oneDNN's complaint.
const char* onednn_sgemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a,
                         size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc);

typedef enum { BF16_DONE, BF16_UNSUPPORTED, BF16_FAILED } Bf16Status;

// C = alpha * op(A) op(B) + beta * C with A and B in bf16, on a oneDNN matmul primitive (cached
// per thread by shape). BF16_UNSUPPORTED when oneDNN only has its slow reference code for it
// (or is not in use): the caller then computes it another way.
Bf16Status onednn_gemm_bf16(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha,
                            const uint16_t* a, size_t lda, const uint16_t* b, size_t ldb, float beta, float* c,
                            size_t ldc);

// Frozen weights in oneDNN's own layout, so that a matmul reads them as they are instead of copying
// them into it on every call (1.03-1.28x at the 0.6B model's 512-row shapes, the same values).
// B is k x n, stored transposed (n x k, the Hugging Face layout read as W^T) when trans_b.
// The bytes of a packed k x n B; 0 when oneDNN is not in use or would keep B plain.
size_t onednn_packed_bytes(size_t n, size_t k);
// Writes B into `out` (onednn_packed_bytes(n, k) bytes). False when it could not.
bool onednn_pack_bf16(bool trans_b, size_t n, size_t k, const uint16_t* b, size_t ldb, void* out);
// C = alpha * op(A) B + beta * C with B packed by onednn_pack_bf16 for this n and k. BF16_UNSUPPORTED
// when the primitive for these rows wants another layout: the caller then uses the plain weights.
Bf16Status onednn_gemm_bf16_packed(bool trans_a, size_t m, size_t n, size_t k, float alpha, const uint16_t* a,
                                   size_t lda, const void* b, float beta, float* c, size_t ldc);

#endif
