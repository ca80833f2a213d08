// bfloat16 conversions and the small-M bf16 GEMM, in plain C. They trust their arguments: the
// N-API layer (bf16_ops.c) has checked every size. A bf16 value is the upper half of a float32.
#ifndef OPENCLAW_BF16_H
#define OPENCLAW_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// out[i] = the bf16 bits nearest to x[i] (ties to even; NaN stays a quiet NaN of the same sign).
void bf16_from_f32(uint16_t* out, const float* x, size_t n);
// The same on the calling thread's OpenMP team (large n only).
void bf16_from_f32_parallel(uint16_t* out, const float* x, size_t n);

// Copies op(X) (stored rows x cols with row stride ld, or cols x rows when transposed; float32
// when !is_bf16, else bf16 bits) into a contiguous rows x cols matrix: bf16 bits (pack_bf16) or
// the float32 values of the rounded elements (pack_rounded_f32).
void pack_bf16(uint16_t* out, const void* x, bool is_bf16, size_t rows, size_t cols, size_t ld, bool transposed);
void pack_rounded_f32(float* out, const void* x, bool is_bf16, size_t rows, size_t cols, size_t ld,
                      bool transposed);

// C[i,j] = alpha * sum_p a[i,p] * b[j,p] + beta * C[i,j] (beta == 0 overwrites) for i < m, j < n:
// a is m x k float32, contiguous; b is bf16 bits, n rows of k, row stride ldb.
void gemm_bf16_rows(size_t m, size_t n, size_t k, float alpha, const float* a, const uint16_t* b, size_t ldb,
                    float beta, float* c, size_t ldc);

// C[i,j] = alpha * sum_p a[i,p] * b[p,j] + beta * C[i,j] (beta == 0 overwrites) for i < m, j < n,
// for a short k (small_k.c): a is m x k, b is k x n, both float32 (values already rounded to
// bf16) and contiguous; work is scratch of small_k_work_bytes(m, n, k), 4-byte aligned.
void gemm_small_k(size_t m, size_t n, size_t k, float alpha, const float* a, const float* b, void* work, float beta,
                  float* c, size_t ldc);
size_t small_k_work_bytes(size_t m, size_t n, size_t k);

// C (m x n) = alpha * A B + beta * C for a thin B (n <= SKINNY_MAX) and a long K (skinny.c; AVX512-BF16
// only: callers check bf16_dot_supported): A m x k bf16 bits (row stride lda), B the k x n matrix
// held contiguous as bf16 bits (b_transposed: as B^T, n rows of k), work of skinny_work_bytes(n, k).
#define SKINNY_MAX 16
size_t skinny_work_bytes(size_t n, size_t k);
void gemm_skinny(size_t m, size_t n, size_t k, float alpha, const uint16_t* a, size_t lda, const uint16_t* b,
                   bool b_transposed, void* work, float beta, float* c, size_t ldc);

// Whether the CPU has AVX512-BF16 (vdpbf16ps, vcvtne2ps2bf16) and the kernels here use it;
// OPENCLAW_RL_BF16_DOT=fp32 says no (to test the other paths on such a CPU).
bool bf16_dot_supported(void);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BF16_X86 1
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#endif

#endif
