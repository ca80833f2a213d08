// rmsnorm, SwiGLU's silu(gate) * up, and rotary embedding. Single-threaded, like all the C
// kernels here: only BLAS runs threads of its own.
#include "kernels.h"

#include <math.h>
#include <stdlib.h>

#include "dispatch.h"
#include "vec_math.h"

SIMD_CLONES
void rmsnorm_f32(float* out, const float* x, const float* weight, size_t rows, size_t dim, float eps) {
  for (size_t r = 0; r < rows; r++) {
    const float* xr = x + r * dim;
    float* outr = out + r * dim;
    float inv_rms = 1.f / sqrtf(dot_f32(xr, xr, dim) / (float)dim + eps);
    for (size_t i = 0; i < dim; i++) outr[i] = xr[i] * inv_rms * weight[i];
  }
}

SIMD_CLONES
void silu_mul_f32(float* out, const float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float g = gate[i];
    out[i] = g / (1.f + exp_f32(-g)) * up[i];
  }
}

static inline void rotate_half(float* head, const float* cos_t, const float* sin_t, size_t half) {
  float* lo = head;
  float* hi = head + half;
  for (size_t i = 0; i < half; i++) {
    float a = lo[i], b = hi[i];
    lo[i] = a * cos_t[i] - b * sin_t[i];
    hi[i] = b * cos_t[i] + a * sin_t[i];
  }
}

SIMD_CLONES
bool rope_f32(float* x, size_t rows, size_t heads, size_t head_dim, const int32_t* positions,
              const float* inv_freq) {
  size_t half = head_dim / 2;
  float* table = malloc(2 * half * sizeof(float)); // head_dim >= 2 was checked
  if (table == NULL) return false;
  float* cos_t = table;
  float* sin_t = table + half;
  for (size_t r = 0; r < rows; r++) {
    // The angle is rounded to float32, as the Hugging Face implementation computes it; its
    // cosine and sine are then taken in double so that large positions lose nothing more.
    for (size_t i = 0; i < half; i++) {
      float angle = (float)((double)positions[r] * (double)inv_freq[i]);
      cos_t[i] = (float)cos((double)angle);
      sin_t[i] = (float)sin((double)angle);
    }
    for (size_t h = 0; h < heads; h++) rotate_half(x + (r * heads + h) * head_dim, cos_t, sin_t, half);
  }
  free(table);
  return true;
}
