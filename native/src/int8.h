// int8 weights (int8.c) and the VNNI product over int8 activations (int8_vnni.c).
#ifndef OPENCLAW_INT8_H
#define OPENCLAW_INT8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Weights (and, for VNNI, activations) per scale.
#define INT8_BLOCK 32

// Rows [first, first + count) of w [., k] to int8: scale = max|w| / 127 per block of 32, q = w /
// scale rounded to nearest (ties to even), so the largest value of a block maps to +-127.
void int8_quantize_rows(size_t first, size_t count, size_t k, int8_t* q, float* scales, const float* w);

// The variant gemmInt8 runs now ("vnni", "avx512", "avx2" or "generic"), for kernels.info.
const char* int8_variant_name(void);

// x86-64 with GNU C: the AVX2, AVX-512 and VNNI variants, written with intrinsics.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define INT8_X86_INTRINSICS 1

// x [m, k] quantized for vnni_gemm_columns: per row, |q| as bytes (VNNI multiplies unsigned by
// signed bytes), the signs one bit per value in one mask per pair of blocks, and per pair of
// blocks the two scales, each repeated over the 8 int32 lanes that hold its block's sums.
typedef struct {
  uint8_t* abs;     // [m, k]
  uint64_t* neg;    // [m, pairs]
  float* scale16;   // [m, pairs * 16]
  int8_t* q;        // [m, k], quantization scratch
  float* scales;    // [m, k / 32], quantization scratch
  size_t m, k, pairs;
} VnniRows;

// Bytes VnniRows needs for x [m, k]; vnni_quantize lays the rows out in that memory.
size_t vnni_rows_bytes(size_t m, size_t k);
void vnni_quantize(VnniRows* rows, void* memory, size_t m, size_t k, const float* x);

// Whether this CPU has AVX512-VNNI and AVX512BW.
bool vnni_supported(void);

// y[i, j] for every row i of `rows` and the output columns [first, first + count) of n.
void vnni_gemm_columns(const VnniRows* rows, size_t first, size_t count, size_t n, const int8_t* q,
                       const float* scales, float* y);
#endif

#endif
