// rmsnorm, siluMul, rope and attention (float32, bf16 or int8 cache rows): argument checks, then the plain-C kernels.
#include <stdio.h>

#include "args.h"
#include "kernels.h"
#include "ops.h"

static void throw_out_of_memory(OpCall* call) {
  char message[128];
  snprintf(message, sizeof message, "openclaw_native.%s: could not allocate its scratch memory", call->op);
  napi_throw_error(call->env, NULL, message);
}

// rmsnorm(out, x, weight, rows, dim, eps); out a Float32Array, or a Uint16Array for bf16 bits.
napi_value op_rmsnorm(napi_env env, napi_callback_info info) {
  OpCall call;
  Bf16Operand out;
  F32Array x, weight;
  size_t rows, dim;
  float eps;
  if (!op_begin(env, info, "rmsnorm", 6, &call) || !op_bf16_operand(&call, 0, "out", &out) ||
      !op_f32_array(&call, 1, "x", &x) || !op_f32_array(&call, 2, "weight", &weight) ||
      !op_size(&call, 3, "rows", 0, &rows) || !op_size(&call, 4, "dim", 0, &dim) ||
      !op_float(&call, 5, "eps", &eps))
    return NULL;
  if (!op_check_length(&call, "out", out.length, rows, dim, 1, "rows*dim") ||
      !op_check_length(&call, "x", x.length, rows, dim, 1, "rows*dim") ||
      !op_check_length(&call, "weight", weight.length, dim, 1, 1, "dim"))
    return NULL;
  rmsnorm_parallel(out.data, out.is_bf16, x.data, weight.data, rows, dim, eps);
  return NULL;
}

// siluMul(out, gate, up, n); out a Float32Array, or a Uint16Array for bf16 bits.
napi_value op_silu_mul(napi_env env, napi_callback_info info) {
  OpCall call;
  Bf16Operand out;
  F32Array gate, up;
  size_t n;
  if (!op_begin(env, info, "siluMul", 4, &call) || !op_bf16_operand(&call, 0, "out", &out) ||
      !op_f32_array(&call, 1, "gate", &gate) || !op_f32_array(&call, 2, "up", &up) ||
      !op_size(&call, 3, "n", 0, &n))
    return NULL;
  if (!op_check_length(&call, "out", out.length, n, 1, 1, "n") ||
      !op_check_length(&call, "gate", gate.length, n, 1, 1, "n") ||
      !op_check_length(&call, "up", up.length, n, 1, 1, "n"))
    return NULL;
  silu_mul_parallel(out.data, out.is_bf16, gate.data, up.data, n);
  return NULL;
}

static __thread bool rope_release_hooked;

static void release_rope_tables(void* unused) {
  (void)unused;
  rope_tables_release();
  rope_release_hooked = false;
}

// rope(x, rows, heads, headDim, positions, invFreq)
napi_value op_rope(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array x, inv_freq;
  I32Array positions;
  size_t rows, heads, head_dim;
  if (!op_begin(env, info, "rope", 6, &call) || !op_f32_array(&call, 0, "x", &x) ||
      !op_size(&call, 1, "rows", 0, &rows) || !op_size(&call, 2, "heads", 0, &heads) ||
      !op_size(&call, 3, "headDim", 2, &head_dim) || !op_i32_array(&call, 4, "positions", &positions) ||
      !op_f32_array(&call, 5, "invFreq", &inv_freq))
    return NULL;
  if (head_dim % 2 != 0) {
    op_throw_size(&call, "headDim = %zu must be even (pairs i, i + headDim/2 rotate together)", head_dim);
    return NULL;
  }
  if (!op_check_length(&call, "x", x.length, rows, heads, head_dim, "rows*heads*headDim") ||
      !op_check_length(&call, "positions", positions.length, rows, 1, 1, "rows") ||
      !op_check_length(&call, "invFreq", inv_freq.length, head_dim / 2, 1, 1, "headDim/2"))
    return NULL;
  op_release_at_env_exit(&call, &rope_release_hooked, release_rope_tables);
  if (!rope_f32(x.data, rows, heads, head_dim, positions.data, inv_freq.data)) throw_out_of_memory(&call);
  return NULL;
}

// attention(out, q, k, v, Tq, start, nHeads, nKvHeads, headDim, kvStride, scale)
napi_value op_attention(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array out, q;
  Bf16Operand k, v;
  AttentionShape shape;
  if (!op_begin(env, info, "attention", 11, &call) || !op_f32_array(&call, 0, "out", &out) ||
      !op_f32_array(&call, 1, "q", &q) || !op_bf16_operand(&call, 2, "k", &k) ||
      !op_bf16_operand(&call, 3, "v", &v) ||
      !op_size(&call, 4, "Tq", 0, &shape.tq) || !op_size(&call, 5, "start", 0, &shape.start) ||
      !op_size(&call, 6, "nHeads", 1, &shape.n_heads) || !op_size(&call, 7, "nKvHeads", 1, &shape.n_kv_heads) ||
      !op_size(&call, 8, "headDim", 1, &shape.head_dim) || !op_size(&call, 9, "kvStride", 0, &shape.kv_stride) ||
      !op_float(&call, 10, "scale", &shape.scale))
    return NULL;
  if (shape.n_heads % shape.n_kv_heads != 0) {
    op_throw_size(&call, "nHeads = %zu must be a multiple of nKvHeads = %zu", shape.n_heads, shape.n_kv_heads);
    return NULL;
  }
  size_t kv_rows = shape.start + shape.tq;
  size_t kv_cols = shape.n_kv_heads * shape.head_dim;
  if (!op_check_length(&call, "q", q.length, shape.tq, shape.n_heads, shape.head_dim, "Tq*nHeads*headDim") ||
      !op_check_length(&call, "out", out.length, shape.tq, shape.n_heads, shape.head_dim, "Tq*nHeads*headDim") ||
      !op_check_matrix(&call, "k", k.length, kv_rows, kv_cols, "(start+Tq) x (nKvHeads*headDim)", shape.kv_stride,
                       "kvStride") ||
      !op_check_matrix(&call, "v", v.length, kv_rows, kv_cols, "(start+Tq) x (nKvHeads*headDim)", shape.kv_stride,
                       "kvStride"))
    return NULL;
  if (k.is_bf16 != v.is_bf16) {
    op_throw_type(&call, "k and v must both be Float32Arrays or both Uint16Arrays of bf16 bits");
    return NULL;
  }
  if (shape.tq == 0) return NULL;
  const KvKind kind = k.is_bf16 ? KV_BF16 : KV_F32;
  const KvRowsRef k_rows = {.kind = kind, .data = k.data}, v_rows = {.kind = kind, .data = v.data};
  if (!attention_f32(out.data, q.data, &k_rows, &v_rows, &shape)) throw_out_of_memory(&call);
  return NULL;
}

// The int8 rows' scales must cover every value the call reads: (rows - 1) * stride + cols of them.
static bool check_int8_rows(OpCall* call, const char* name, const I8Array* values, const F32Array* scales,
                            const AttentionShape* shape) {
  const size_t rows = shape->start + shape->tq, cols = shape->n_kv_heads * shape->head_dim;
  if (!op_check_matrix(call, name, values->length, rows, cols, "(start+Tq) x (nKvHeads*headDim)", shape->kv_stride,
                       "kvStride"))
    return false;
  const size_t read = rows == 0 ? 0 : (rows - 1) * shape->kv_stride + cols;
  if (scales->length >= (read + 31) / 32) return true;
  op_throw_size(call, "%s's scales hold %zu blocks of 32 values; the call reads %zu values", name, scales->length,
                read);
  return false;
}

// attentionInt8(out, q, k, kScales, v, vScales, Tq, start, nHeads, nKvHeads, headDim, kvStride, scale):
// attention over int8 cache rows (quantizeInt8's format, blocks of 32 along each row).
napi_value op_attention_int8(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array out, q, k_scales, v_scales;
  I8Array k, v;
  AttentionShape shape;
  if (!op_begin(env, info, "attentionInt8", 13, &call) || !op_f32_array(&call, 0, "out", &out) ||
      !op_f32_array(&call, 1, "q", &q) || !op_i8_array(&call, 2, "k", &k) ||
      !op_f32_array(&call, 3, "kScales", &k_scales) || !op_i8_array(&call, 4, "v", &v) ||
      !op_f32_array(&call, 5, "vScales", &v_scales) || !op_size(&call, 6, "Tq", 0, &shape.tq) ||
      !op_size(&call, 7, "start", 0, &shape.start) || !op_size(&call, 8, "nHeads", 1, &shape.n_heads) ||
      !op_size(&call, 9, "nKvHeads", 1, &shape.n_kv_heads) || !op_size(&call, 10, "headDim", 1, &shape.head_dim) ||
      !op_size(&call, 11, "kvStride", 0, &shape.kv_stride) || !op_float(&call, 12, "scale", &shape.scale))
    return NULL;
  if (shape.n_heads % shape.n_kv_heads != 0) {
    op_throw_size(&call, "nHeads = %zu must be a multiple of nKvHeads = %zu", shape.n_heads, shape.n_kv_heads);
    return NULL;
  }
  if (shape.head_dim % 32 != 0 || shape.kv_stride % 32 != 0) {
    op_throw_size(&call, "headDim = %zu and kvStride = %zu must be multiples of 32, the quantization block",
                  shape.head_dim, shape.kv_stride);
    return NULL;
  }
  if (!op_check_length(&call, "q", q.length, shape.tq, shape.n_heads, shape.head_dim, "Tq*nHeads*headDim") ||
      !op_check_length(&call, "out", out.length, shape.tq, shape.n_heads, shape.head_dim, "Tq*nHeads*headDim") ||
      !check_int8_rows(&call, "k", &k, &k_scales, &shape) || !check_int8_rows(&call, "v", &v, &v_scales, &shape))
    return NULL;
  if (shape.tq == 0) return NULL;
  const KvRowsRef k_rows = {.kind = KV_INT8, .data = k.data, .scales = k_scales.data};
  const KvRowsRef v_rows = {.kind = KV_INT8, .data = v.data, .scales = v_scales.data};
  if (!attention_f32(out.data, q.data, &k_rows, &v_rows, &shape)) throw_out_of_memory(&call);
  return NULL;
}
