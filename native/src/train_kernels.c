// The training kernels: AdamW with the sum of squares and the rescaling of gradient clipping,
// the backward of rmsnorm and of SwiGLU's silu(gate) * up, the statistics of logits rows and
// their backward, and the causal softmax of a block of attention score rows with its backward.
// Single-threaded like every C kernel here. Each is one streaming pass (or one pass per row
// held in L1), so the loops are written for the auto-vectoriser, one clone per instruction set
// (dispatch.h), with reductions on f32x8 (vec_math.h) and in double where a sum runs over more
// than a few thousand terms.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "dispatch.h"
#include "kernels.h"

#include "vec_math.h"

// exp_f32 clamps its input at -87, where e^x is ~1.6e-38. The logits kernels clamp x there
// themselves before they also multiply by it, so that a masked logit (-inf) contributes a
// term of ~1e-36 instead of 1.6e-38 * -inf = -inf.
#define EXP_INPUT_MIN (-87.f)

static inline float clamp_exp_input(float x) {
  return x < EXP_INPUT_MIN ? EXP_INPUT_MIN : x; // NaN stays NaN
}

// ---- AdamW --------------------------------------------------------------------------------

AdamWStep adamw_step(double lr, double beta1, double beta2, double eps, double weight_decay, double bc1,
                     double bc2, double grad_scale, bool zero_grad) {
  // Rounded to float only after they are combined: 1 - beta2 taken in float is 1.3e-5 off for
  // beta2 = 0.999, and 1 - lr * weightDecay would lose most of its digits, which is why the
  // decay is applied as p - decay * p rather than as p * (1 - decay).
  AdamWStep s = {
      .beta1 = (float)beta1,
      .one_minus_beta1 = (float)(1.0 - beta1),
      .beta2 = (float)beta2,
      .one_minus_beta2 = (float)(1.0 - beta2),
      .step = (float)(lr / bc1),
      .inv_bc2 = (float)(1.0 / bc2),
      .eps = (float)eps,
      .decay = (float)(lr * weight_decay),
      .grad_scale = grad_scale,
      .zero_grad = zero_grad,
  };
  return s;
}

SIMD_CLONES
// One pass instead of four over a full fine-tuning's gradients and weights: the clipping scale, the
// update, the bf16 copy's refresh and the gradients' clearing (which were a scale pass, this loop,
// a rounding pass and a fill), each value computed as those passes computed it. Runs of
// ADAMW_RUN values keep the new weights in L1 for their rounding.
#define ADAMW_RUN 256

SIMD_CLONES
void adamw_f32(float* p, float* g, float* m, float* v, uint16_t* p16, size_t n, const AdamWStep* step) {
  const float beta1 = step->beta1, one_minus_beta1 = step->one_minus_beta1;
  const float beta2 = step->beta2, one_minus_beta2 = step->one_minus_beta2;
  const float lr_bc1 = step->step, inv_bc2 = step->inv_bc2, eps = step->eps, decay = step->decay;
  const double grad_scale = step->grad_scale;
  const bool scaled = grad_scale != 1.0;
  float run[ADAMW_RUN];
  for (size_t i0 = 0; i0 < n; i0 += ADAMW_RUN) {
    const size_t len = n - i0 < ADAMW_RUN ? n - i0 : ADAMW_RUN;
    for (size_t j = 0; j < len; j++) {
      const size_t i = i0 + j;
      float gi = scaled ? (float)((double)g[i] * grad_scale) : g[i];
      float mi = beta1 * m[i] + one_minus_beta1 * gi;
      float vi = beta2 * v[i] + one_minus_beta2 * (gi * gi);
      float pi = p[i];
      m[i] = mi;
      v[i] = vi;
      // (lr / bc1) m / (sqrt(v / bc2) + eps) = lr (m / bc1) / (sqrt(v / bc2) + eps).
      run[j] = p[i] = pi - (lr_bc1 * mi / (sqrtf(vi * inv_bc2) + eps) + decay * pi);
    }
    if (step->zero_grad) memset(g + i0, 0, len * sizeof(float));
    if (p16) bf16_from_f32(p16 + i0, run, len);
  }
}

// ---- gradient clipping --------------------------------------------------------------------

typedef float f32x4 __attribute__((vector_size(16)));
typedef double f64x4 __attribute__((vector_size(32)));

SIMD_CLONES
double sum_squares_f32(const float* x, size_t n) {
  // The square of a float is exact in double, so only the additions round, and those in
  // double: a full model's gradient is hundreds of millions of terms.
  f64x4 acc0 = {0}, acc1 = {0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f32x4 a, b;
    memcpy(&a, x + i, sizeof a);
    memcpy(&b, x + i + 4, sizeof b);
    f64x4 da = __builtin_convertvector(a, f64x4), db = __builtin_convertvector(b, f64x4);
    acc0 += da * da;
    acc1 += db * db;
  }
  f64x4 acc = acc0 + acc1;
  double sum = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  for (; i < n; i++) sum += (double)x[i] * (double)x[i];
  return sum;
}

// ---- rmsnorm backward ---------------------------------------------------------------------

SIMD_CLONES
bool rmsnorm_backward_f32(float* dx, float* dw, const float* dy, const float* x, const float* w, size_t rows,
                          size_t dim, float eps, bool accumulate) {
  // dw sums one term per row, often thousands of rows (q and k norms have one per head), so it
  // is summed in double here and added to dw once.
  double* dw_sum = NULL;
  if (dw != NULL) {
    dw_sum = calloc(dim > 0 ? dim : 1, sizeof(double));
    if (dw_sum == NULL) return false;
  }
  const float inv_dim = 1.f / (float)dim;
  for (size_t r = 0; r < rows; r++) {
    const float* xr = x + r * dim;
    const float* dyr = dy + r * dim;
    float* dxr = dx + r * dim;
    // rstd exactly as rmsnorm_f32 computes it.
    const float rstd = 1.f / sqrtf(dot_f32(xr, xr, dim) / (float)dim + eps);
    const float c = rstd * rstd * rstd * dot3_f32(w, dyr, xr, dim) * inv_dim;
    // dw before dx, so that dx may alias dy or x.
    if (dw_sum != NULL)
      for (size_t i = 0; i < dim; i++) dw_sum[i] += (double)(dyr[i] * xr[i] * rstd);
    if (accumulate)
      for (size_t i = 0; i < dim; i++) dxr[i] += rstd * w[i] * dyr[i] - xr[i] * c;
    else
      for (size_t i = 0; i < dim; i++) dxr[i] = rstd * w[i] * dyr[i] - xr[i] * c;
  }
  if (dw_sum != NULL) {
    for (size_t i = 0; i < dim; i++) dw[i] = (float)((double)dw[i] + dw_sum[i]);
    free(dw_sum);
  }
  return true;
}

// ---- siluMul backward ---------------------------------------------------------------------

SIMD_CLONES
void silu_mul_backward_f32(float* dg, float* du, const float* da, const float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float z = gate[i], u = up[i], d = da[i];
    float s = 1.f / (1.f + exp_f32(-z));
    dg[i] = d * u * s * (1.f + z * (1.f - s));
    du[i] = d * z * s;
  }
}

// The same with dg and du rounded to bf16 bits (run by run in L1, as layer_kernels.c's bf16 outputs).
#define ROUND_RUN 256

SIMD_CLONES
void silu_mul_backward_bf16_out(uint16_t* dg, uint16_t* du, const float* da, const float* gate, const float* up,
                                size_t n) {
  float run_g[ROUND_RUN], run_u[ROUND_RUN];
  for (size_t i0 = 0; i0 < n; i0 += ROUND_RUN) {
    const size_t m = n - i0 < ROUND_RUN ? n - i0 : ROUND_RUN;
    for (size_t i = 0; i < m; i++) {
      float z = gate[i0 + i], u = up[i0 + i], d = da[i0 + i];
      float s = 1.f / (1.f + exp_f32(-z));
      run_g[i] = d * u * s * (1.f + z * (1.f - s));
      run_u[i] = d * z * s;
    }
    bf16_from_f32(dg + i0, run_g, m);
    bf16_from_f32(du + i0, run_u, m);
  }
}

// ---- logits rows --------------------------------------------------------------------------

// logits_stats_f32 reads each row once, in blocks that stay in L1: a block's max, then its
// exponentials against the running max, summed in float within the block and in double
// across blocks. When a block raises the max, the sums so far are rescaled (online softmax),
// so a row of 151936 logits is not read twice from memory.
#define LOGITS_BLOCK 1024

SIMD_CLONES
void logits_stats_f32(float* lse, float* entropy, const float* logits, size_t rows, size_t v) {
  const size_t total = rows * v;
  for (size_t r = 0; r < rows; r++) {
    const float* z = logits + r * v;
    // With y = z - max: sum = sum e^y and weighted = sum e^y y, so that lse = max + log(sum)
    // and entropy = lse - sum p z = log(sum) - weighted / sum, without the cancellation of
    // max against sum p z. The max starts at -FLT_MAX rather than -inf so that a block of
    // masked (-inf) logits gives finite y; NaN logits are skipped by max_f32 but reach sum.
    double max = -FLT_MAX, sum = 0.0, weighted = 0.0;
    for (size_t j0 = 0; j0 < v; j0 += LOGITS_BLOCK) {
      const size_t len = v - j0 < LOGITS_BLOCK ? v - j0 : LOGITS_BLOCK;
      const float* zb = z + j0;
      // The next block (of this row or the next) comes in while this one is computed: the
      // loop below is bound by its exponentials, not by memory.
      const size_t next = r * v + j0 + len;
      const size_t ahead = total - next < LOGITS_BLOCK ? total - next : LOGITS_BLOCK;
      for (size_t q = 0; q < ahead; q += 16) __builtin_prefetch(logits + next + q);

      const float block_max = max_f32(zb, len);
      if (block_max > max) {
        // e^y shrinks by e^-shift and y by shift: weighted' = e^-shift (weighted - shift sum).
        const double shift = (double)block_max - max;
        const double scale = exp(-shift);
        weighted = scale * (weighted - shift * sum);
        sum *= scale;
        max = block_max;
      }
      const float max_f = (float)max; // a float already: a block max, or -FLT_MAX
      // y <= 0, so only the clamp below is needed before exp.
      const f32x8 max8 = splat8(max_f);
      f32x8 sum0 = {0}, sum1 = {0}, weighted0 = {0}, weighted1 = {0};
      size_t j = 0;
      for (; j + 16 <= len; j += 16) {
        f32x8 y0 = clamp_below8(load8(zb + j) - max8, EXP_INPUT_MIN);
        f32x8 y1 = clamp_below8(load8(zb + j + 8) - max8, EXP_INPUT_MIN);
        f32x8 e0 = exp_in_range_f32x8(y0);
        f32x8 e1 = exp_in_range_f32x8(y1);
        sum0 += e0;
        sum1 += e1;
        weighted0 += e0 * y0;
        weighted1 += e1 * y1;
      }
      float block_sum = add_lanes(sum0 + sum1);
      float block_weighted = add_lanes(weighted0 + weighted1);
      for (; j < len; j++) {
        float y = clamp_exp_input(zb[j] - max_f);
        float e = exp_f32(y);
        block_sum += e;
        block_weighted += e * y;
      }
      sum += block_sum;
      weighted += block_weighted;
    }
    const double log_sum = log(sum);
    lse[r] = (float)(max + log_sum);
    entropy[r] = (float)(log_sum - weighted / sum);
  }
}

SIMD_CLONES
void logits_backward_f32(float* logits, size_t rows, size_t v, const float* lse, const float* entropy,
                         const float* g_sum, const float* g_entropy) {
  for (size_t r = 0; r < rows; r++) {
    float* z = logits + r * v;
    const float lse_r = lse[r], entropy_r = entropy[r], g_sum_r = g_sum[r], g_entropy_r = g_entropy[r];
    for (size_t i = 0; i < v; i++) {
      float lp = clamp_exp_input(z[i] - lse_r); // log p
      float p = exp_f32(lp);
      z[i] = -p * (g_sum_r + g_entropy_r * (lp + entropy_r));
    }
  }
}

// ---- causal softmax of a block of attention score rows --------------------------------------

SIMD_CLONES
void causal_softmax_rows_f32(float* s, float* lse, size_t rows, size_t cols, size_t first_row) {
  for (size_t i = 0; i < rows; i++) {
    float* row = s + i * cols;
    const size_t visible = first_row + i + 1;
    lse[i] = softmax_f32(row, visible);
    memset(row + visible, 0, (cols - visible) * sizeof(float));
  }
}

SIMD_CLONES
void causal_softmax_backward_rows_f32(float* dp, float* s, const float* lse, const float* d_o, const float* o,
                                      size_t rows, size_t cols, size_t first_row, size_t head_dim, size_t stride) {
  for (size_t i = 0; i < rows; i++) {
    float* s_row = s + i * cols;
    float* d_row = dp + i * cols;
    const size_t visible = first_row + i + 1;
    const float lse_i = lse[i];
    // sum_j P_ij dP_ij = dO_i . (P V)_i: head_dim terms instead of up to cols.
    const float dot = dot_f32(d_o + i * stride, o + i * stride, head_dim);
    // One pass for both: the recomputed probabilities are written and used while in registers.
    for (size_t j = 0; j < visible; j++) {
      float p = exp_f32(s_row[j] - lse_i);
      s_row[j] = p;
      d_row[j] = p * (d_row[j] - dot);
    }
    memset(s_row + visible, 0, (cols - visible) * sizeof(float));
    memset(d_row + visible, 0, (cols - visible) * sizeof(float));
  }
}

// The fused bf16 attention's rows (train_attention.c): the same values as the float32 kernels
// above rounded to bf16, computed a run at a time in L1 and rounded from there, so that a block
// of scores is read once more instead of written as float32 and read back for rounding.

SIMD_CLONES
float causal_softmax_row_bf16(uint16_t* p, float* s, size_t visible, size_t cols) {
  const float max_score = max_f32(s, visible);
  const float sum = exp_shifted_f32(s, visible, max_score);
  const float inv_sum = 1.f / sum;
  float run[ROUND_RUN];
  for (size_t j0 = 0; j0 < visible; j0 += ROUND_RUN) {
    const size_t m = visible - j0 < ROUND_RUN ? visible - j0 : ROUND_RUN;
    for (size_t j = 0; j < m; j++) run[j] = s[j0 + j] * inv_sum;
    bf16_from_f32(p + j0, run, m);
  }
  memset(p + visible, 0, (cols - visible) * sizeof(uint16_t));
  return max_score + logf(sum);
}

SIMD_CLONES
void causal_softmax_backward_row_bf16(uint16_t* p, uint16_t* ds, const float* s, const float* dp, float lse,
                                      float dot, size_t visible, size_t cols) {
  float run_p[ROUND_RUN], run_ds[ROUND_RUN];
  for (size_t j0 = 0; j0 < visible; j0 += ROUND_RUN) {
    const size_t m = visible - j0 < ROUND_RUN ? visible - j0 : ROUND_RUN;
    for (size_t j = 0; j < m; j++) {
      float pj = exp_f32(s[j0 + j] - lse);
      run_p[j] = pj;
      run_ds[j] = pj * (dp[j0 + j] - dot);
    }
    bf16_from_f32(p + j0, run_p, m);
    bf16_from_f32(ds + j0, run_ds, m);
  }
  memset(p + visible, 0, (cols - visible) * sizeof(uint16_t));
  memset(ds + visible, 0, (cols - visible) * sizeof(uint16_t));
}

SIMD_CLONES
float online_softmax_part_bf16(uint16_t* p, float* s, size_t seen, size_t cols, float* max_score, float* sum) {
  const float part_max = max_f32(s, seen);
  const float new_max = part_max > *max_score ? part_max : *max_score;
  const float rescale = *max_score == -INFINITY ? 0.f : exp_f32(*max_score - new_max);
  *sum = *sum * rescale + exp_shifted_f32(s, seen, new_max);
  *max_score = new_max;
  bf16_from_f32(p, s, seen);
  memset(p + seen, 0, (cols - seen) * sizeof(uint16_t));
  return rescale;
}

SIMD_CLONES
void rows_dot_f32(float* out, const float* a, const float* b, size_t n, size_t len, size_t stride) {
  for (size_t i = 0; i < n; i++) out[i] = dot_f32(a + i * stride, b + i * stride, len);
}

SIMD_CLONES
void rows_dot_f32_bf16(float* out, const float* a, const uint16_t* b, size_t n, size_t len, size_t stride) {
  for (size_t i = 0; i < n; i++) out[i] = dot_f32_bf16(a + i * stride, b + i * stride, len);
}
