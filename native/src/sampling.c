// The sampler's tempered weights (src/engine/local/sampling/sample.ts), the one pass over a whole
// vocabulary that every token drawn at a temperature above 0 makes: in JavaScript, 152k calls of
// Math.exp took about 1.6 ms a token at Qwen3's vocabulary.
#include <float.h>

#include "args.h"
#include "dispatch.h"
#include "kernels.h"
#include "ops.h"
#include "vec_math.h"

typedef double f64x8 __attribute__((vector_size(64)));

// Below this exponent a weight is stored as 0: e^-87 is under 2e-38 of the best token's weight,
// a draw no sampler could make, and exp_f32 is clamped there.
#define WEIGHT_EXPONENT_MIN (-87.f)

// Eight weights: e^y where y >= WEIGHT_EXPONENT_MIN, 0 below it (masked logits, -inf, included);
// NaN stays NaN, so a NaN logit still poisons the total as it would in JavaScript.
static inline f64x8 weights8(f32x8 y) {
  i32x8 below = y < WEIGHT_EXPONENT_MIN;
  f32x8 e = exp_in_range_f32x8(clamp_below8(y, WEIGHT_EXPONENT_MIN));
  return __builtin_convertvector((f32x8)(~below & (i32x8)e), f64x8);
}

SIMD_CLONES
double tempered_weights_f64(double* w, const float* z, size_t v, float inv_t) {
  const float max = max_f32(z, v);
  const f32x8 max8 = splat8(max), inv_t8 = splat8(inv_t);
  f64x8 sum0 = {0}, sum1 = {0};
  size_t j = 0;
  for (; j + 16 <= v; j += 16) {
    f64x8 w0 = weights8((load8(z + j) - max8) * inv_t8);
    f64x8 w1 = weights8((load8(z + j + 8) - max8) * inv_t8);
    memcpy(w + j, &w0, sizeof w0);
    memcpy(w + j + 8, &w1, sizeof w1);
    sum0 += w0;
    sum1 += w1;
  }
  f64x8 sum = sum0 + sum1;
  double total = ((sum[0] + sum[4]) + (sum[1] + sum[5])) + ((sum[2] + sum[6]) + (sum[3] + sum[7]));
  for (; j < v; j++) {
    const float y = (z[j] - max) * inv_t;
    w[j] = y < WEIGHT_EXPONENT_MIN ? 0.0 : (double)exp_f32(y);
    total += w[j];
  }
  return total;
}

// temperedWeights(weights, logits, V, invT) -> total
napi_value op_tempered_weights(napi_env env, napi_callback_info info) {
  OpCall call;
  F64Array w;
  F32Array z;
  size_t v;
  double inv_t;
  if (!op_begin(env, info, "temperedWeights", 4, &call) || !op_f64_array(&call, 0, "weights", &w) ||
      !op_f32_array(&call, 1, "logits", &z) || !op_size(&call, 2, "V", 1, &v) ||
      !op_double(&call, 3, "invT", &inv_t))
    return NULL;
  if (!op_check_length(&call, "weights", w.length, v, 1, 1, "V") ||
      !op_check_length(&call, "logits", z.length, v, 1, 1, "V"))
    return NULL;
  if (!(inv_t > 0)) {
    op_throw_value(&call, "invT must be a positive number, got %g", inv_t);
    return NULL;
  }
  // Past float's range every logit under the max is -inf away, the max itself 0: the limit, greedy.
  const float scale = inv_t > FLT_MAX ? FLT_MAX : (float)inv_t;
  napi_value total;
  if (napi_create_double(env, tempered_weights_f64(w.data, z.data, v, scale), &total) != napi_ok) return NULL;
  return total;
}
