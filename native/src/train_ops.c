// The training kernels' entry points (adamw, sumSquares, scale, rmsnormBackward,
// siluMulBackward, logitsStats, logitsBackward, causalSoftmaxRows, causalSoftmaxBackwardRows):
// argument checks, then the plain-C kernels in train_kernels.c.
#include <math.h>
#include <stdio.h>

#include "args.h"
#include "kernels.h"
#include "ops.h"

// value must be finite and in [min, max] (or [min, max) when max_open); checked in double,
// before any rounding to float.
static bool check_range(OpCall* call, const char* name, double value, double min, double max, bool max_open) {
  bool ok = isfinite(value) && value >= min && (max_open ? value < max : value <= max);
  if (!ok) op_throw_value(call, "%s = %g must be in [%g, %g%s", name, value, min, max, max_open ? ")" : "]");
  return ok;
}

static bool check_positive(OpCall* call, const char* name, double value, double max, const char* what) {
  bool ok = isfinite(value) && value > 0 && value <= max;
  if (!ok) op_throw_value(call, "%s = %g must be in (0, %g] (%s)", name, value, max, what);
  return ok;
}

static void throw_out_of_memory(OpCall* call) {
  char message[128];
  snprintf(message, sizeof message, "openclaw_native.%s: could not allocate its scratch memory", call->op);
  napi_throw_error(call->env, NULL, message);
}

// adamw(p, g, m, v, n, lr, beta1, beta2, eps, weightDecay, bc1, bc2)
napi_value op_adamw(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array p, g, m, v;
  U16Array p16;
  size_t n;
  double lr, beta1, beta2, eps, weight_decay, bc1, bc2, grad_scale;
  bool zero_grad;
  if (!op_begin(env, info, "adamw", 15, &call) || !op_f32_array(&call, 0, "p", &p) ||
      !op_f32_array(&call, 1, "g", &g) || !op_f32_array(&call, 2, "m", &m) || !op_f32_array(&call, 3, "v", &v) ||
      !op_size(&call, 4, "n", 0, &n) || !op_double(&call, 5, "lr", &lr) || !op_double(&call, 6, "beta1", &beta1) ||
      !op_double(&call, 7, "beta2", &beta2) || !op_double(&call, 8, "eps", &eps) ||
      !op_double(&call, 9, "weightDecay", &weight_decay) || !op_double(&call, 10, "bc1", &bc1) ||
      !op_double(&call, 11, "bc2", &bc2) || !op_double(&call, 12, "gradScale", &grad_scale) ||
      !op_u16_array_or_null(&call, 13, "pBf16", &p16) || !op_bool(&call, 14, "zeroGrad", &zero_grad))
    return NULL;
  // The ranges PyTorch's AdamW accepts, plus the bias corrections 1 - beta^t, which divide: a
  // NaN or infinite step would silently overwrite every parameter.
  if (!op_check_length(&call, "p", p.length, n, 1, 1, "n") || !op_check_length(&call, "g", g.length, n, 1, 1, "n") ||
      !op_check_length(&call, "m", m.length, n, 1, 1, "n") || !op_check_length(&call, "v", v.length, n, 1, 1, "n") ||
      !check_range(&call, "lr", lr, 0, HUGE_VAL, false) || !check_range(&call, "beta1", beta1, 0, 1, true) ||
      !check_range(&call, "beta2", beta2, 0, 1, true) || !check_range(&call, "eps", eps, 0, HUGE_VAL, false) ||
      !check_range(&call, "weightDecay", weight_decay, 0, HUGE_VAL, false) ||
      !check_positive(&call, "bc1", bc1, 1, "1 - beta1^t") || !check_positive(&call, "bc2", bc2, 1, "1 - beta2^t") ||
      !check_range(&call, "gradScale", grad_scale, -HUGE_VAL, HUGE_VAL, false) ||
      (p16.data && !op_check_length(&call, "pBf16", p16.length, n, 1, 1, "n")))
    return NULL;
  AdamWStep step = adamw_step(lr, beta1, beta2, eps, weight_decay, bc1, bc2, grad_scale, zero_grad);
  adamw_f32_parallel(p.data, g.data, m.data, v.data, p16.data, n, &step);
  return NULL;
}

// sumSquares(x, n) -> number
napi_value op_sum_squares(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array x;
  size_t n;
  if (!op_begin(env, info, "sumSquares", 2, &call) || !op_f32_array(&call, 0, "x", &x) ||
      !op_size(&call, 1, "n", 0, &n))
    return NULL;
  if (!op_check_length(&call, "x", x.length, n, 1, 1, "n")) return NULL;
  double sum;
  if (!sum_squares_f32_parallel(x.data, n, &sum)) {
    throw_out_of_memory(&call);
    return NULL;
  }
  napi_value result;
  if (napi_create_double(env, sum, &result) != napi_ok) return NULL;
  return result;
}

// rmsnormBackward(dx, dw, dy, x, w, rows, dim, eps, accumulate)
napi_value op_rmsnorm_backward(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array dx, dw, dy, x, w;
  size_t rows, dim;
  float eps;
  bool accumulate;
  if (!op_begin(env, info, "rmsnormBackward", 9, &call) || !op_f32_array(&call, 0, "dx", &dx) ||
      !op_f32_array_or_null(&call, 1, "dw", &dw) || !op_f32_array(&call, 2, "dy", &dy) ||
      !op_f32_array(&call, 3, "x", &x) || !op_f32_array(&call, 4, "w", &w) || !op_size(&call, 5, "rows", 0, &rows) ||
      !op_size(&call, 6, "dim", 0, &dim) || !op_float(&call, 7, "eps", &eps) ||
      !op_bool(&call, 8, "accumulate", &accumulate))
    return NULL;
  if (!op_check_length(&call, "dx", dx.length, rows, dim, 1, "rows*dim") ||
      !op_check_length(&call, "dy", dy.length, rows, dim, 1, "rows*dim") ||
      !op_check_length(&call, "x", x.length, rows, dim, 1, "rows*dim") ||
      !op_check_length(&call, "w", w.length, dim, 1, 1, "dim") ||
      (dw.data != NULL && !op_check_length(&call, "dw", dw.length, dim, 1, 1, "dim")))
    return NULL;
  if (rows == 0) return NULL;
  if (!rmsnorm_backward_f32_parallel(dx.data, dw.data, dy.data, x.data, w.data, rows, dim, eps, accumulate))
    throw_out_of_memory(&call);
  return NULL;
}

// siluMulBackward(dg, du, da, gate, up, n); dg and du both Float32Arrays, or both Uint16Arrays for bf16 bits.
napi_value op_silu_mul_backward(napi_env env, napi_callback_info info) {
  OpCall call;
  Bf16Operand dg, du;
  F32Array da, gate, up;
  size_t n;
  if (!op_begin(env, info, "siluMulBackward", 6, &call) || !op_bf16_operand(&call, 0, "dg", &dg) ||
      !op_bf16_operand(&call, 1, "du", &du) || !op_f32_array(&call, 2, "da", &da) ||
      !op_f32_array(&call, 3, "gate", &gate) || !op_f32_array(&call, 4, "up", &up) || !op_size(&call, 5, "n", 0, &n))
    return NULL;
  if (!op_check_length(&call, "dg", dg.length, n, 1, 1, "n") ||
      !op_check_length(&call, "du", du.length, n, 1, 1, "n") ||
      !op_check_length(&call, "da", da.length, n, 1, 1, "n") ||
      !op_check_length(&call, "gate", gate.length, n, 1, 1, "n") ||
      !op_check_length(&call, "up", up.length, n, 1, 1, "n"))
    return NULL;
  if (dg.is_bf16 != du.is_bf16) {
    op_throw_value(&call, "dg and du must be both Float32Arrays or both Uint16Arrays of bf16 bits");
    return NULL;
  }
  silu_mul_backward_parallel(dg.data, du.data, dg.is_bf16, da.data, gate.data, up.data, n);
  return NULL;
}

// logitsStats(lse, entropy, logits, rows, V)
napi_value op_logits_stats(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array lse, entropy, logits;
  size_t rows, v;
  // V >= 1: an empty row has no distribution.
  if (!op_begin(env, info, "logitsStats", 5, &call) || !op_f32_array(&call, 0, "lse", &lse) ||
      !op_f32_array(&call, 1, "entropy", &entropy) || !op_f32_array(&call, 2, "logits", &logits) ||
      !op_size(&call, 3, "rows", 0, &rows) || !op_size(&call, 4, "V", 1, &v))
    return NULL;
  if (!op_check_length(&call, "lse", lse.length, rows, 1, 1, "rows") ||
      !op_check_length(&call, "entropy", entropy.length, rows, 1, 1, "rows") ||
      !op_check_length(&call, "logits", logits.length, rows, v, 1, "rows*V"))
    return NULL;
  logits_stats_f32_parallel(lse.data, entropy.data, logits.data, rows, v);
  return NULL;
}

// logitsBackward(logits, rows, V, lse, entropy, gSum, gEntropy)
napi_value op_logits_backward(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array logits, lse, entropy, g_sum, g_entropy;
  size_t rows, v;
  if (!op_begin(env, info, "logitsBackward", 7, &call) || !op_f32_array(&call, 0, "logits", &logits) ||
      !op_size(&call, 1, "rows", 0, &rows) || !op_size(&call, 2, "V", 1, &v) ||
      !op_f32_array(&call, 3, "lse", &lse) || !op_f32_array(&call, 4, "entropy", &entropy) ||
      !op_f32_array(&call, 5, "gSum", &g_sum) || !op_f32_array(&call, 6, "gEntropy", &g_entropy))
    return NULL;
  if (!op_check_length(&call, "logits", logits.length, rows, v, 1, "rows*V") ||
      !op_check_length(&call, "lse", lse.length, rows, 1, 1, "rows") ||
      !op_check_length(&call, "entropy", entropy.length, rows, 1, 1, "rows") ||
      !op_check_length(&call, "gSum", g_sum.length, rows, 1, 1, "rows") ||
      !op_check_length(&call, "gEntropy", g_entropy.length, rows, 1, 1, "rows"))
    return NULL;
  logits_backward_f32_parallel(logits.data, rows, v, lse.data, entropy.data, g_sum.data, g_entropy.data);
  return NULL;
}

// The score block S (or P, dP) must hold rows x cols and every row's visible columns,
// 0 .. first_row + i, must lie inside it.
static bool check_score_block(OpCall* call, const char* name, size_t length, size_t rows, size_t cols,
                              size_t first_row) {
  if (!op_check_length(call, name, length, rows, cols, 1, "rows*cols")) return false;
  if (rows > 0 && first_row + rows > cols) {
    op_throw_size(call, "firstRow + rows = %zu + %zu exceeds cols = %zu (the last row's visible columns)", first_row,
                  rows, cols);
    return false;
  }
  return true;
}

// causalSoftmaxRows(S, lse, rows, cols, firstRow)
napi_value op_causal_softmax_rows(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array s, lse;
  size_t rows, cols, first_row;
  if (!op_begin(env, info, "causalSoftmaxRows", 5, &call) || !op_f32_array(&call, 0, "S", &s) ||
      !op_f32_array(&call, 1, "lse", &lse) || !op_size(&call, 2, "rows", 0, &rows) ||
      !op_size(&call, 3, "cols", 0, &cols) || !op_size(&call, 4, "firstRow", 0, &first_row))
    return NULL;
  if (!check_score_block(&call, "S", s.length, rows, cols, first_row) ||
      !op_check_length(&call, "lse", lse.length, rows, 1, 1, "rows"))
    return NULL;
  causal_softmax_rows_f32(s.data, lse.data, rows, cols, first_row);
  return NULL;
}

// causalSoftmaxBackwardRows(dP, S, lse, dO, O, rows, cols, firstRow, headDim, stride)
napi_value op_causal_softmax_backward_rows(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array dp, s, lse, d_o, o;
  size_t rows, cols, first_row, head_dim, stride;
  if (!op_begin(env, info, "causalSoftmaxBackwardRows", 10, &call) || !op_f32_array(&call, 0, "dP", &dp) ||
      !op_f32_array(&call, 1, "S", &s) || !op_f32_array(&call, 2, "lse", &lse) ||
      !op_f32_array(&call, 3, "dO", &d_o) || !op_f32_array(&call, 4, "O", &o) ||
      !op_size(&call, 5, "rows", 0, &rows) || !op_size(&call, 6, "cols", 0, &cols) ||
      !op_size(&call, 7, "firstRow", 0, &first_row) || !op_size(&call, 8, "headDim", 0, &head_dim) ||
      !op_size(&call, 9, "stride", 0, &stride))
    return NULL;
  if (!check_score_block(&call, "dP", dp.length, rows, cols, first_row) ||
      !check_score_block(&call, "S", s.length, rows, cols, first_row) ||
      !op_check_length(&call, "lse", lse.length, rows, 1, 1, "rows") ||
      !op_check_matrix(&call, "dO", d_o.length, rows, head_dim, "rows x headDim", stride, "stride") ||
      !op_check_matrix(&call, "O", o.length, rows, head_dim, "rows x headDim", stride, "stride"))
    return NULL;
  causal_softmax_backward_rows_f32(dp.data, s.data, lse.data, d_o.data, o.data, rows, cols, first_row, head_dim,
                                   stride);
  return NULL;
}
