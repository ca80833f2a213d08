// toBf16 and gemmBf16 (see kernels.ts). gemmBf16 picks, per call:
// - one row against a bf16 matrix stored [N,K] (decode: a token times a weight matrix): the
//   hand-written kernel in bf16.c, which streams the weights once;
// - with oneDNN and a short inner dimension (K <= SMALL_K_MAX, a LoRA rank): the rank-update
//   kernel in small_k.c on float32 copies of the rounded operands;
// - with AVX512-BF16, B thin (up to SKINNY_MAX columns: a LoRA factor) and a long K: the kernel in
//   skinny.c, which reads A in place;
// - else, with oneDNN: a bf16 matmul primitive (onednn.c) on bf16 copies of float32 operands;
// - else (or where oneDNN has no fast kernel): float32 copies of the rounded operands, then
//   the BLAS sgemm. Every path rounds the same inputs and sums the products in fp32.
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bf16.h"
#include "gemm.h"
#include "ops.h"

// Up to this many rows the hand-written kernel beats the primitive. Measured on 2 threads
// (AVX512-BF16, K x N = 1024x3072, 3072x1024, 1024x2048): it takes 0.55-0.9x the primitive's
// time at M = 1, but 1.5-3x at M = 2..8, where the primitive's bf16 dot products win.
#define SMALL_M_MAX 1

// Up to this inner dimension the rank-update kernel (small_k.c) beats the primitive: measured on 2
// threads at the LoRA shapes of the 0.6B model (M 512, N 1024-3072, K 16 and 32, beta 0 and 1).
#define SMALL_K_MAX 32

// Buffers larger than this are freed after the call instead of kept for the next one.
#define SCRATCH_KEEP_BYTES ((size_t)64 << 20)

// Per thread, so that workers never share them; grown on demand, freed when the thread's JS
// environment goes.
static __thread void* scratch[2];
static __thread size_t scratch_bytes[2];

static __thread bool scratch_release_hooked;

static void scratch_release(void* unused) {
  (void)unused;
  for (int slot = 0; slot < 2; slot++) {
    free(scratch[slot]);
    scratch[slot] = NULL;
    scratch_bytes[slot] = 0;
  }
  scratch_release_hooked = false;
}

static void* scratch_get(OpCall* call, int slot, size_t bytes) {
  op_release_at_env_exit(call, &scratch_release_hooked, scratch_release);
  if (bytes > scratch_bytes[slot]) {
    void* grown = realloc(scratch[slot], bytes);
    if (!grown) {
      op_throw_size(call, "could not allocate %zu bytes of scratch memory", bytes);
      return NULL;
    }
    scratch[slot] = grown;
    scratch_bytes[slot] = bytes;
  }
  return scratch[slot];
}

static void scratch_trim(void) {
  for (int slot = 0; slot < 2; slot++)
    if (scratch_bytes[slot] > SCRATCH_KEEP_BYTES) {
      free(scratch[slot]);
      scratch[slot] = NULL;
      scratch_bytes[slot] = 0;
    }
}

// toBf16(out, x, n)
napi_value op_to_bf16(napi_env env, napi_callback_info info) {
  OpCall call;
  U16Array out;
  F32Array x;
  size_t n;
  if (!op_begin(env, info, "toBf16", 3, &call) || !op_u16_array(&call, 0, "out", &out) ||
      !op_f32_array(&call, 1, "x", &x) || !op_size(&call, 2, "n", 0, &n) ||
      !op_check_length(&call, "out", out.length, n, 1, 1, "n") || !op_check_length(&call, "x", x.length, n, 1, 1, "n"))
    return NULL;
  bf16_from_f32_parallel(out.data, x.data, n);
  return NULL;
}

typedef struct {
  bool trans_a, trans_b;
  size_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  Bf16Operand a, b;
  F32Array c;
} Bf16Gemm;

static bool small_m(OpCall* call, const Bf16Gemm* g) {
  float* a = scratch_get(call, 0, g->m * g->k * sizeof(float));
  if (!a) return false;
  pack_rounded_f32(a, g->a.data, g->a.is_bf16, g->m, g->k, g->lda, g->trans_a);
  gemm_bf16_rows(g->m, g->n, g->k, g->alpha, a, g->b.data, g->ldb, g->beta, g->c.data, g->ldc);
  return true;
}

static bool small_k(OpCall* call, const Bf16Gemm* g) {
  float* a = scratch_get(call, 0, g->m * g->k * sizeof(float));
  const size_t b_floats = g->k * g->n;
  float* b = a ? scratch_get(call, 1, b_floats * sizeof(float) + small_k_work_bytes(g->m, g->n, g->k)) : NULL;
  if (!b) return false;
  pack_rounded_f32(a, g->a.data, g->a.is_bf16, g->m, g->k, g->lda, g->trans_a);
  pack_rounded_f32(b, g->b.data, g->b.is_bf16, g->k, g->n, g->ldb, g->trans_b);
  gemm_small_k(g->m, g->n, g->k, g->alpha, a, b, b + b_floats, g->beta, g->c.data, g->ldc);
  return true;
}

// A bf16 view of an operand: the caller's Uint16Array as it is, or a packed copy (ld = cols).
static const uint16_t* bf16_view(OpCall* call, int slot, const Bf16Operand* x, size_t rows, size_t cols, size_t ld,
                                 bool transposed, size_t* view_ld) {
  *view_ld = ld;
  if (x->is_bf16) return x->data;
  size_t stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  uint16_t* out = scratch_get(call, slot, stored_rows * stored_cols * sizeof(uint16_t));
  if (!out) return NULL;
  pack_bf16(out, x->data, false, stored_rows, stored_cols, ld, false);
  *view_ld = stored_cols;
  return out;
}

#ifdef BF16_X86
// Whether the skinny kernel computes g: C's columns thin, A not transposed, K past the small-K kernel's.
static bool skinny_fits(const Bf16Gemm* g) {
  return !g->trans_a && g->n <= SKINNY_MAX && g->k > SMALL_K_MAX && bf16_dot_supported();
}

static bool skinny(OpCall* call, const Bf16Gemm* g) {
  // B as stored (k x n, or n x k when transposed) in bf16 bits, contiguous; A in bits, as it is or rounded.
  const size_t b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n, b_values = b_rows * b_cols;
  uint16_t* work = scratch_get(call, 1, b_values * sizeof(uint16_t) + skinny_work_bytes(g->n, g->k));
  uint16_t* a_copy = work && !g->a.is_bf16 ? scratch_get(call, 0, g->m * g->k * sizeof(uint16_t)) : NULL;
  if (!work || (!g->a.is_bf16 && !a_copy)) return false;
  const uint16_t* b = work;
  if (g->b.is_bf16 && g->ldb == b_cols)
    b = g->b.data;
  else if (g->ldb == b_cols)
    bf16_from_f32(work, g->b.data, b_values);
  else
    for (size_t r = 0; r < b_rows; r++) {
      if (g->b.is_bf16)
        memcpy(work + r * b_cols, (const uint16_t*)g->b.data + r * g->ldb, b_cols * sizeof(uint16_t));
      else
        bf16_from_f32(work + r * b_cols, (const float*)g->b.data + r * g->ldb, b_cols);
    }
  if (a_copy) pack_bf16(a_copy, g->a.data, false, g->m, g->k, g->lda, false);
  gemm_skinny(g->m, g->n, g->k, g->alpha, a_copy ? a_copy : g->a.data, a_copy ? g->k : g->lda, b, g->trans_b,
              work + b_values, g->beta, g->c.data, g->ldc);
  return true;
}
#endif

// Returns BF16_FAILED with a JS error pending, or whether the primitive ran.
static Bf16Status with_onednn(OpCall* call, const Bf16Gemm* g) {
  size_t lda, ldb;
  const uint16_t* a = bf16_view(call, 0, &g->a, g->m, g->k, g->lda, g->trans_a, &lda);
  const uint16_t* b = a ? bf16_view(call, 1, &g->b, g->k, g->n, g->ldb, g->trans_b, &ldb) : NULL;
  if (!b) return BF16_FAILED;
  Bf16Status status = onednn_gemm_bf16(g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, a, lda, b, ldb, g->beta,
                                       g->c.data, g->ldc);
  if (status == BF16_FAILED) op_throw_value(call, "oneDNN's bf16 matmul failed");
  return status;
}

// float32 copies of the rounded operands, in their stored layout (ld = stored columns).
static bool with_blas(OpCall* call, const Bf16Gemm* g) {
  size_t a_rows = g->trans_a ? g->k : g->m, a_cols = g->trans_a ? g->m : g->k;
  size_t b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n;
  float* a = scratch_get(call, 0, a_rows * a_cols * sizeof(float));
  float* b = a ? scratch_get(call, 1, b_rows * b_cols * sizeof(float)) : NULL;
  if (!b) return false;
  pack_rounded_f32(a, g->a.data, g->a.is_bf16, a_rows, a_cols, g->lda, false);
  pack_rounded_f32(b, g->b.data, g->b.is_bf16, b_rows, b_cols, g->ldb, false);
  blas_sgemm(g->trans_a, g->trans_b, g->m, g->n, g->k, g->alpha, a, a_cols, b, b_cols, g->beta, g->c.data, g->ldc);
  return true;
}

// gemmBf16(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
napi_value op_gemm_bf16(napi_env env, napi_callback_info info) {
  OpCall call;
  Bf16Gemm g;
  if (!op_begin(env, info, "gemmBf16", 13, &call) || !op_bool(&call, 0, "transA", &g.trans_a) ||
      !op_bool(&call, 1, "transB", &g.trans_b) || !op_size(&call, 2, "M", 0, &g.m) ||
      !op_size(&call, 3, "N", 0, &g.n) || !op_size(&call, 4, "K", 0, &g.k) ||
      !op_float(&call, 5, "alpha", &g.alpha) || !op_bf16_operand(&call, 6, "A", &g.a) ||
      !op_size(&call, 7, "lda", 0, &g.lda) || !op_bf16_operand(&call, 8, "B", &g.b) ||
      !op_size(&call, 9, "ldb", 0, &g.ldb) || !op_float(&call, 10, "beta", &g.beta) ||
      !op_f32_array(&call, 11, "C", &g.c) || !op_size(&call, 12, "ldc", 0, &g.ldc))
    return NULL;
  size_t m = g.m, n = g.n, k = g.k;
  if (!op_check_matrix(&call, "A", g.a.length, g.trans_a ? k : m, g.trans_a ? m : k, g.trans_a ? "K x M" : "M x K",
                       g.lda, "lda") ||
      !op_check_matrix(&call, "B", g.b.length, g.trans_b ? n : k, g.trans_b ? k : n, g.trans_b ? "N x K" : "K x N",
                       g.ldb, "ldb") ||
      !op_check_matrix(&call, "C", g.c.length, m, n, "M x N", g.ldc, "ldc"))
    return NULL;
  if (m == 0 || n == 0) return NULL;
  if (k == 0) {
    gemm_scale_rows(g.c.data, m, n, g.ldc, g.beta);
    return NULL;
  }
  if (m <= SMALL_M_MAX && g.trans_b && g.b.is_bf16) {
    small_m(&call, &g);
  } else if (k <= SMALL_K_MAX && gemm_uses_onednn()) {
    small_k(&call, &g);
#ifdef BF16_X86
  } else if (skinny_fits(&g)) {
    skinny(&call, &g);
#endif
  } else {
    Bf16Status status = gemm_uses_onednn() ? with_onednn(&call, &g) : BF16_UNSUPPORTED;
    if (status == BF16_UNSUPPORTED) with_blas(&call, &g);
  }
  scratch_trim();
  return NULL;
}

// A packed array starts with this header, so that a product can check it was packed for its shape;
// the packed values follow, 64 bytes in (the array itself starts 64-byte aligned, as oneDNN reads
// it fastest).
#define PACKED_MAGIC 0x4b504c4fu // "OLPK"
#define PACKED_HEADER_BYTES 64

typedef struct {
  uint32_t magic;
  uint32_t reserved;
  uint64_t n, k;
} PackedHeader;

// packBf16(transB, N, K, B, ldb) -> the K x N matrix op(B) (B bf16 bits, stored N x K when transB)
// in oneDNN's layout for gemmBf16Packed, after a header naming N and K; or null where there is none
// (no oneDNN, or a shape it keeps plain).
napi_value op_pack_bf16(napi_env env, napi_callback_info info) {
  OpCall call;
  bool trans_b;
  size_t n, k, ldb;
  U16Array b;
  if (!op_begin(env, info, "packBf16", 5, &call) || !op_bool(&call, 0, "transB", &trans_b) ||
      !op_size(&call, 1, "N", 1, &n) || !op_size(&call, 2, "K", 1, &k) || !op_u16_array(&call, 3, "B", &b) ||
      !op_size(&call, 4, "ldb", 0, &ldb) ||
      !op_check_matrix(&call, "B", b.length, trans_b ? n : k, trans_b ? k : n, trans_b ? "N x K" : "K x N", ldb, "ldb"))
    return NULL;
  napi_value result;
  const size_t bytes = gemm_uses_onednn() ? onednn_packed_bytes(n, k) : 0;
  if (bytes == 0) return napi_get_null(env, &result) == napi_ok ? result : NULL;
  void* data;
  napi_value buffer;
  if (napi_create_arraybuffer(env, 64 + PACKED_HEADER_BYTES + bytes, &data, &buffer) != napi_ok) {
    op_throw_size(&call, "could not allocate %zu bytes for the packed weights", bytes);
    return NULL;
  }
  const size_t offset = (64 - (uintptr_t)data % 64) % 64;
  char* start = (char*)data + offset;
  const PackedHeader header = {.magic = PACKED_MAGIC, .n = n, .k = k};
  memcpy(start, &header, sizeof header);
  if (!onednn_pack_bf16(trans_b, n, k, b.data, ldb, start + PACKED_HEADER_BYTES)) {
    op_throw_value(&call, "oneDNN could not pack the weights");
    return NULL;
  }
  const size_t values = (PACKED_HEADER_BYTES + bytes) / 2;
  if (napi_create_typedarray(env, napi_uint16_array, values, buffer, offset, &result) != napi_ok) return NULL;
  return result;
}

// gemmBf16Packed(transA, M, N, K, alpha, A, lda, P, beta, C, ldc) -> whether it computed C:
// C = alpha * op(A) B + beta * C with B packed by packBf16 for this N and K. False (C untouched)
// where the primitive for these rows wants another layout; the caller then uses the plain weights.
napi_value op_gemm_bf16_packed(napi_env env, napi_callback_info info) {
  OpCall call;
  Bf16Gemm g = {.trans_b = false, .ldb = 0};
  U16Array p;
  if (!op_begin(env, info, "gemmBf16Packed", 11, &call) || !op_bool(&call, 0, "transA", &g.trans_a) ||
      !op_size(&call, 1, "M", 1, &g.m) || !op_size(&call, 2, "N", 1, &g.n) || !op_size(&call, 3, "K", 1, &g.k) ||
      !op_float(&call, 4, "alpha", &g.alpha) || !op_bf16_operand(&call, 5, "A", &g.a) ||
      !op_size(&call, 6, "lda", 0, &g.lda) || !op_u16_array(&call, 7, "P", &p) ||
      !op_float(&call, 8, "beta", &g.beta) || !op_f32_array(&call, 9, "C", &g.c) ||
      !op_size(&call, 10, "ldc", 0, &g.ldc))
    return NULL;
  if (!op_check_matrix(&call, "A", g.a.length, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k,
                       g.trans_a ? "K x M" : "M x K", g.lda, "lda") ||
      !op_check_matrix(&call, "C", g.c.length, g.m, g.n, "M x N", g.ldc, "ldc"))
    return NULL;
  PackedHeader header = {0};
  if (p.length * 2 >= sizeof header) memcpy(&header, p.data, sizeof header);
  if (header.magic != PACKED_MAGIC) {
    op_throw_value(&call, "P is not an array from packBf16");
    return NULL;
  }
  if (header.n != g.n || header.k != g.k) {
    op_throw_size(&call, "P was packed for N = %llu, K = %llu, not N = %zu, K = %zu", (unsigned long long)header.n,
                  (unsigned long long)header.k, g.n, g.k);
    return NULL;
  }
  const size_t bytes = onednn_packed_bytes(g.n, g.k);
  if (bytes == 0 || p.length * 2 != PACKED_HEADER_BYTES + bytes) {
    op_throw_size(&call, "P holds %zu values; packBf16 makes %zu for N = %zu, K = %zu", p.length,
                  (PACKED_HEADER_BYTES + bytes) / 2, g.n, g.k);
    return NULL;
  }
  size_t lda;
  const uint16_t* a = bf16_view(&call, 0, &g.a, g.m, g.k, g.lda, g.trans_a, &lda);
  if (!a) return NULL;
  Bf16Status status = onednn_gemm_bf16_packed(g.trans_a, g.m, g.n, g.k, g.alpha, a, lda,
                                              (const char*)p.data + PACKED_HEADER_BYTES, g.beta, g.c.data, g.ldc);
  scratch_trim();
  if (status == BF16_FAILED) {
    op_throw_value(&call, "oneDNN's bf16 matmul failed");
    return NULL;
  }
  napi_value result;
  if (napi_get_boolean(env, status == BF16_DONE, &result) != napi_ok) return NULL;
  return result;
}
