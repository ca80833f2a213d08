// The fused bf16 training attention's entry points (attentionForwardBf16, attentionBackwardBf16):
// argument checks, then train_attention.c. Each returns true when it computed the result, false
// when this build or machine has no fast path for it (the caller then runs its own blockwise
// code, which overwrites every output).
#include <math.h>

#include "args.h"
#include "ops.h"
#include "train_attention.h"

// The sequences: (start, length) pairs, in order and not overlapping (items run in parallel and
// write their rows of dk and dv). Sets *rows to the rows they span (the last one's end).
static bool check_seqs(OpCall* call, const I32Array* seqs, size_t* rows) {
  if (seqs->length % 2 != 0) {
    op_throw_size(call, "seqs holds (start, length) pairs, got %zu numbers", seqs->length);
    return false;
  }
  size_t end = 0;
  for (size_t s = 0; s < seqs->length / 2; s++) {
    int32_t start = seqs->data[2 * s], length = seqs->data[2 * s + 1];
    if (start < 0 || length < 0 || (size_t)start < end) {
      op_throw_size(call, "sequence %zu (start %d, length %d) must start at or after %zu, the previous one's end", s,
                    start, length, end);
      return false;
    }
    end = (size_t)start + (size_t)length;
  }
  *rows = end;
  return true;
}

static bool check_shape(OpCall* call, size_t first, TrainAttention* a) {
  if (!op_size(call, first, "nHeads", 1, &a->n_heads) || !op_size(call, first + 1, "nKvHeads", 1, &a->n_kv_heads) ||
      !op_size(call, first + 2, "headDim", 1, &a->head_dim))
    return false;
  if (a->n_heads % a->n_kv_heads != 0) {
    op_throw_size(call, "nHeads = %zu is not a multiple of nKvHeads = %zu", a->n_heads, a->n_kv_heads);
    return false;
  }
  a->scale = (float)(1.0 / sqrt((double)a->head_dim));
  return true;
}

// Each array must hold `rows` rows of its width.
static bool check_rows(OpCall* call, const char* name, size_t length, size_t rows, size_t width, const char* what) {
  return op_check_length(call, name, length, rows, width, 1, what);
}

static napi_value finish(OpCall* call, AttentionStatus status) {
  if (status == ATTENTION_FAILED) op_throw_value(call, "oneDNN's bf16 matmul failed");
  if (status == ATTENTION_NO_MEMORY) op_throw_size(call, "could not allocate its scratch memory");
  if (status == ATTENTION_FAILED || status == ATTENTION_NO_MEMORY) return NULL;
  napi_value result;
  if (napi_get_boolean(call->env, status == ATTENTION_DONE, &result) != napi_ok) return NULL;
  return result;
}

// The output as the attention takes it: a Float32Array, or a Uint16Array of its bf16 bits.
static void set_out(TrainAttention* a, const Bf16Operand* out) {
  if (out->is_bf16)
    a->out_bf16 = out->data;
  else
    a->out = out->data;
}

// attentionForwardBf16(out, lse, q, k, v, seqs, nHeads, nKvHeads, headDim)
napi_value op_attention_forward_bf16(napi_env env, napi_callback_info info) {
  OpCall call;
  Bf16Operand out;
  F32Array lse, q, k, v;
  I32Array seqs;
  TrainAttention a = {0};
  size_t rows;
  if (!op_begin(env, info, "attentionForwardBf16", 9, &call) || !op_bf16_operand(&call, 0, "out", &out) ||
      !op_f32_array(&call, 1, "lse", &lse) || !op_f32_array(&call, 2, "q", &q) || !op_f32_array(&call, 3, "k", &k) ||
      !op_f32_array(&call, 4, "v", &v) || !op_i32_array(&call, 5, "seqs", &seqs) || !check_shape(&call, 6, &a) ||
      !check_seqs(&call, &seqs, &rows))
    return NULL;
  const size_t q_dim = a.n_heads * a.head_dim, kv_dim = a.n_kv_heads * a.head_dim;
  if (!check_rows(&call, "out", out.length, rows, q_dim, "rows*nHeads*headDim") ||
      !check_rows(&call, "q", q.length, rows, q_dim, "rows*nHeads*headDim") ||
      !check_rows(&call, "k", k.length, rows, kv_dim, "rows*nKvHeads*headDim") ||
      !check_rows(&call, "v", v.length, rows, kv_dim, "rows*nKvHeads*headDim") ||
      !check_rows(&call, "lse", lse.length, rows, a.n_heads, "rows*nHeads"))
    return NULL;
  set_out(&a, &out);
  a.lse = lse.data, a.q = q.data, a.k = k.data, a.v = v.data;
  a.seqs = seqs.data, a.n_seqs = seqs.length / 2;
  return finish(&call, train_attention_forward_bf16(&a));
}

// attentionBackwardBf16(dq, dk, dv, dOut, out, lse, q, k, v, seqs, nHeads, nKvHeads, headDim)
napi_value op_attention_backward_bf16(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array dq, dk, dv, d_out, lse, q, k, v;
  Bf16Operand out;
  I32Array seqs;
  TrainAttention a = {0};
  size_t rows;
  if (!op_begin(env, info, "attentionBackwardBf16", 13, &call) || !op_f32_array(&call, 0, "dq", &dq) ||
      !op_f32_array(&call, 1, "dk", &dk) || !op_f32_array(&call, 2, "dv", &dv) ||
      !op_f32_array(&call, 3, "dOut", &d_out) || !op_bf16_operand(&call, 4, "out", &out) ||
      !op_f32_array(&call, 5, "lse", &lse) || !op_f32_array(&call, 6, "q", &q) || !op_f32_array(&call, 7, "k", &k) ||
      !op_f32_array(&call, 8, "v", &v) || !op_i32_array(&call, 9, "seqs", &seqs) || !check_shape(&call, 10, &a) ||
      !check_seqs(&call, &seqs, &rows))
    return NULL;
  const size_t q_dim = a.n_heads * a.head_dim, kv_dim = a.n_kv_heads * a.head_dim;
  if (!check_rows(&call, "dq", dq.length, rows, q_dim, "rows*nHeads*headDim") ||
      !check_rows(&call, "dOut", d_out.length, rows, q_dim, "rows*nHeads*headDim") ||
      !check_rows(&call, "out", out.length, rows, q_dim, "rows*nHeads*headDim") ||
      !check_rows(&call, "q", q.length, rows, q_dim, "rows*nHeads*headDim") ||
      !check_rows(&call, "dk", dk.length, rows, kv_dim, "rows*nKvHeads*headDim") ||
      !check_rows(&call, "dv", dv.length, rows, kv_dim, "rows*nKvHeads*headDim") ||
      !check_rows(&call, "k", k.length, rows, kv_dim, "rows*nKvHeads*headDim") ||
      !check_rows(&call, "v", v.length, rows, kv_dim, "rows*nKvHeads*headDim") ||
      !check_rows(&call, "lse", lse.length, rows, a.n_heads, "rows*nHeads"))
    return NULL;
  set_out(&a, &out);
  a.dq = dq.data, a.dk = dk.data, a.dv = dv.data, a.d_out = d_out.data, a.lse = lse.data;
  a.q = q.data, a.k = k.data, a.v = v.data, a.seqs = seqs.data, a.n_seqs = seqs.length / 2;
  return finish(&call, train_attention_backward_bf16(&a));
}
