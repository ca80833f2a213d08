// Small float32 helpers for the hand-written kernels, without -ffast-math (which would also
// let the compiler assume there are no NaN or Inf values; softmax and the tests rely on them
// behaving normally).
//
// Reductions use GCC/clang vector extensions: a float sum only vectorises when the compiler
// may reorder it, and the auto-vectoriser then keeps its partial sums in memory. Eight-float
// vectors become one AVX register, or two SSE/NEON registers, whichever the clone targets
// (dispatch.h); four of them in flight hide the FMA latency.
#ifndef OPENCLAW_VEC_MATH_H
#define OPENCLAW_VEC_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
typedef uint32_t u32x8 __attribute__((vector_size(32)));

static inline f32x8 load8(const float* p) {
  f32x8 v;
  memcpy(&v, p, sizeof v); // unaligned load
  return v;
}

static inline void store8(float* p, f32x8 v) {
  memcpy(p, &v, sizeof v); // unaligned store
}

// Eight bf16 values (the upper halves of float32s) widened to float32: exact.
typedef uint16_t u16x8 __attribute__((vector_size(16)));

static inline f32x8 load8_bf16(const uint16_t* p) {
  u16x8 h;
  memcpy(&h, p, sizeof h);
  u32x8 w = __builtin_convertvector(h, u32x8) << 16;
  f32x8 v;
  memcpy(&v, &w, sizeof v);
  return v;
}

static inline float bf16_to_f32(uint16_t b) {
  uint32_t w = (uint32_t)b << 16;
  float f;
  memcpy(&f, &w, sizeof f);
  return f;
}

static inline f32x8 splat8(float x) {
  f32x8 v = {x, x, x, x, x, x, x, x};
  return v;
}

static inline float add_lanes(f32x8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

static inline float dot_f32(const float* a, const float* b, size_t n) {
  f32x8 acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 += load8(a + i) * load8(b + i);
    acc1 += load8(a + i + 8) * load8(b + i + 8);
    acc2 += load8(a + i + 16) * load8(b + i + 16);
    acc3 += load8(a + i + 24) * load8(b + i + 24);
  }
  for (; i + 8 <= n; i += 8) acc0 += load8(a + i) * load8(b + i);
  float tail = 0.f;
  for (; i < n; i++) tail += a[i] * b[i];
  return add_lanes((acc0 + acc1) + (acc2 + acc3)) + tail;
}

// a . b with b's values as bf16 bits, widened exactly.
static inline float dot_f32_bf16(const float* a, const uint16_t* b, size_t n) {
  f32x8 acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 += load8(a + i) * load8_bf16(b + i);
    acc1 += load8(a + i + 8) * load8_bf16(b + i + 8);
    acc2 += load8(a + i + 16) * load8_bf16(b + i + 16);
    acc3 += load8(a + i + 24) * load8_bf16(b + i + 24);
  }
  for (; i + 8 <= n; i += 8) acc0 += load8(a + i) * load8_bf16(b + i);
  float tail = 0.f;
  for (; i < n; i++) tail += a[i] * bf16_to_f32(b[i]);
  return add_lanes((acc0 + acc1) + (acc2 + acc3)) + tail;
}

// sum of a[i] * b[i] * c[i], the products taken left to right.
static inline float dot3_f32(const float* a, const float* b, const float* c, size_t n) {
  f32x8 acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 += load8(a + i) * load8(b + i) * load8(c + i);
    acc1 += load8(a + i + 8) * load8(b + i + 8) * load8(c + i + 8);
    acc2 += load8(a + i + 16) * load8(b + i + 16) * load8(c + i + 16);
    acc3 += load8(a + i + 24) * load8(b + i + 24) * load8(c + i + 24);
  }
  for (; i + 8 <= n; i += 8) acc0 += load8(a + i) * load8(b + i) * load8(c + i);
  float tail = 0.f;
  for (; i < n; i++) tail += a[i] * b[i] * c[i];
  return add_lanes((acc0 + acc1) + (acc2 + acc3)) + tail;
}

static inline float sum_f32(const float* a, size_t n) {
  f32x8 acc0 = {0}, acc1 = {0};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 += load8(a + i);
    acc1 += load8(a + i + 8);
  }
  for (; i + 8 <= n; i += 8) acc0 += load8(a + i);
  float tail = 0.f;
  for (; i < n; i++) tail += a[i];
  return add_lanes(acc0 + acc1) + tail;
}

// Lanes where x is greater take x; a NaN in x is never greater, so it is ignored.
static inline f32x8 max_lanes(f32x8 lanes, f32x8 x) {
  i32x8 greater = x > lanes; // all-ones where true (C has no vector ?: operator)
  return (f32x8)((greater & (i32x8)x) | (~greater & (i32x8)lanes));
}

// x, or low where x < low; NaN stays NaN.
static inline f32x8 clamp_below8(f32x8 x, float low) {
  return max_lanes(x, splat8(low));
}

// Ignores NaN entries (a NaN score still poisons a softmax through exp and the sum). Four
// accumulators, because each step waits for the compare before it.
static inline float max_f32(const float* a, size_t n) {
  float max = -INFINITY;
  f32x8 lanes0 = splat8(max), lanes1 = lanes0, lanes2 = lanes0, lanes3 = lanes0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    lanes0 = max_lanes(lanes0, load8(a + i));
    lanes1 = max_lanes(lanes1, load8(a + i + 8));
    lanes2 = max_lanes(lanes2, load8(a + i + 16));
    lanes3 = max_lanes(lanes3, load8(a + i + 24));
  }
  for (; i + 8 <= n; i += 8) lanes0 = max_lanes(lanes0, load8(a + i));
  f32x8 lanes = max_lanes(max_lanes(lanes0, lanes1), max_lanes(lanes2, lanes3));
  for (; i < n; i++) max = a[i] > max ? a[i] : max;
  for (int l = 0; l < 8; l++) max = lanes[l] > max ? lanes[l] : max;
  return max;
}

// exp(x) in float32 to about 2 ulp, branch-free so it vectorises (libm's expf does not
// without -ffast-math). Cephes-style: x = n*ln2 + r with |r| <= ln2/2, a degree-6
// polynomial for e^r, and 2^n built in the exponent bits. Inputs are clamped to [-87, 88]
// so 2^n stays a normal float: results below e^-87 (~1.6e-38) come out as ~1.6e-38 instead
// of smaller, which no caller here can tell from 0; NaN propagates.
static inline float exp_f32(float x) {
  x = x < -87.f ? -87.f : x;
  x = x > 88.f ? 88.f : x;
  /* Adding 1.5 * 2^23 rounds to an integer, which then sits in the low mantissa bits: reading
     it from there avoids a float-to-int conversion, undefined for NaN. */
  const float round_magic = 12582912.f;
  float shifted = x * 1.44269504088896341f + round_magic;
  float n = shifted - round_magic;
  float r = x - n * 0.693359375f;     /* ln2 split in two for an exact product */
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e_r = p * r * r + r + 1.f;
  uint32_t shifted_bits;
  memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  uint32_t exponent_bits = (shifted_bits - 0x4B400000u + 127u) << 23;
  float two_n;
  memcpy(&two_n, &exponent_bits, sizeof two_n);
  return e_r * two_n;
}

// exp_f32 on a vector of lanes, for x already clamped to [-87, 88] (or NaN) by the caller: the
// same steps. For loops that also sum the results, which the auto-vectoriser does not do
// without -ffast-math (it may not reorder a float sum). Eight lanes, and sixteen (one AVX-512
// register) for loops that want the full width where the clone has it. Always inlined, as the
// sixteen-lane helpers below: an out-of-line copy is compiled for the baseline instruction set,
// which passes 64-byte vectors another way than a clone's caller does (wrong results, not slow).
#define DEFINE_EXP_IN_RANGE(name, vf, vu)                        \
  __attribute__((always_inline)) static inline vf name(vf x) {   \
    const vf round_magic = (vf){0} + 12582912.f;                 \
    vf shifted = x * 1.44269504088896341f + round_magic;         \
    vf n = shifted - round_magic;                                \
    vf r = x - n * 0.693359375f;                                 \
    r = r - n * -2.12194440e-4f;                                 \
    vf p = (vf){0} + 1.9875691500e-4f;                           \
    p = p * r + 1.3981999507e-3f;                                \
    p = p * r + 8.3334519073e-3f;                                \
    p = p * r + 4.1665795894e-2f;                                \
    p = p * r + 1.6666665459e-1f;                                \
    p = p * r + 5.0000001201e-1f;                                \
    vf e_r = p * r * r + r + 1.f;                                \
    vu exponent_bits = ((vu)shifted - 0x4B400000u + 127u) << 23; \
    return e_r * (vf)exponent_bits;                              \
  }

typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));

DEFINE_EXP_IN_RANGE(exp_in_range_f32x8, f32x8, u32x8)
DEFINE_EXP_IN_RANGE(exp_in_range_f32x16, f32x16, u32x16)

__attribute__((always_inline)) static inline f32x16 load16_f32(const float* p) {
  f32x16 v;
  memcpy(&v, p, sizeof v);
  return v;
}

__attribute__((always_inline)) static inline void store16_f32(float* p, f32x16 v) { memcpy(p, &v, sizeof v); }

// x, or low where x < low; NaN stays NaN (as clamp_below8).
__attribute__((always_inline)) static inline f32x16 clamp_below16(f32x16 x, float low) {
  i32x16 below = x < low;
  return (f32x16)((below & (i32x16)((f32x16){0} + low)) | (~below & (i32x16)x));
}

// x, or high where x > high; NaN stays NaN.
__attribute__((always_inline)) static inline f32x16 clamp_above16(f32x16 x, float high) {
  i32x16 above = x > high;
  return (f32x16)((above & (i32x16)((f32x16){0} + high)) | (~above & (i32x16)x));
}

// e^-z on 16 lanes by exp_f32's steps (clamps included): each lane equals exp_f32(-z). For siluMul,
// written with the vector type because the auto-vectoriser, given g / (1 + exp_f32(-g)), split the
// division by the clamps' masks into two masked ones, and ran 2.8-3.6x slower (Zen 5). siluMul's
// backward, 1 / (1 + exp_f32(-z)), vectorises well as it is.
__attribute__((always_inline)) static inline f32x16 exp_neg_f32x16(f32x16 z) {
  return exp_in_range_f32x16(clamp_above16(clamp_below16(-z, -87.f), 88.f));
}

// scores[j] = e^(scores[j] - max) in place, summed 16 at a time as they are stored; returns the
// sum. Always inlined, as softmax_f32 below.
__attribute__((always_inline)) static inline float exp_shifted_f32(float* scores, size_t n, float max_score) {
  const f32x8 max8 = splat8(max_score);
  f32x8 sum0 = {0}, sum1 = {0};
  size_t j = 0;
  for (; j + 16 <= n; j += 16) {
    // x - max <= 0, so only the clamp below is needed.
    f32x8 e0 = exp_in_range_f32x8(clamp_below8(load8(scores + j) - max8, -87.f));
    f32x8 e1 = exp_in_range_f32x8(clamp_below8(load8(scores + j + 8) - max8, -87.f));
    store8(scores + j, e0);
    store8(scores + j + 8, e1);
    sum0 += e0;
    sum1 += e1;
  }
  float sum = add_lanes(sum0 + sum1);
  for (; j < n; j++) {
    scores[j] = exp_f32(scores[j] - max_score);
    sum += scores[j];
  }
  return sum;
}

// In place, scores[0..n-1] -> softmax(scores) in float32, max subtracted; n >= 1. The
// exponentials are summed as they are stored, 16 at a time. Returns log sum exp(scores).
// Always inlined: a separate copy would be compiled for the baseline instruction set only,
// not for the caller's clone (dispatch.h), and run several times slower.
__attribute__((always_inline)) static inline float softmax_f32(float* scores, size_t n) {
  const float max_score = max_f32(scores, n);
  const float sum = exp_shifted_f32(scores, n, max_score);
  float inv_sum = 1.f / sum;
  for (size_t j = 0; j < n; j++) scores[j] *= inv_sum;
  return max_score + logf(sum);
}

#endif
