// The kernels that BLAS does not provide, in plain C. They trust their arguments: the N-API
// layer (layer_ops.c) has checked every size. Semantics match src/engine/local/kernels/kernels.ts.
#ifndef OPENCLAW_KERNELS_H
#define OPENCLAW_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// out may alias x.
void rmsnorm_f32(float* out, const float* x, const float* weight, size_t rows, size_t dim, float eps);

// out may alias gate or up.
void silu_mul_f32(float* out, const float* gate, const float* up, size_t n);

// In place, Hugging Face rotate-half layout. Returns false when scratch memory is unavailable.
bool rope_f32(float* x, size_t rows, size_t heads, size_t head_dim, const int32_t* positions,
              const float* inv_freq);

typedef struct {
  size_t tq;        // query rows, at absolute positions start .. start + tq - 1
  size_t start;     // cache rows before the first query
  size_t n_heads;
  size_t n_kv_heads; // divides n_heads
  size_t head_dim;
  size_t kv_stride; // floats between consecutive k (and v) rows
  float scale;
} AttentionShape;

// Causal grouped-query attention for one sequence. Returns false when scratch memory is
// unavailable.
bool attention_f32(float* out, const float* q, const float* k, const float* v,
                   const AttentionShape* shape);

#endif
