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

// The same with the output rounded to bf16 bits: equal to rounding the float32 kernels' output.
void rmsnorm_bf16_out(uint16_t* out, const float* x, const float* weight, size_t rows, size_t dim, float eps);
void silu_mul_bf16_out(uint16_t* out, const float* gate, const float* up, size_t n);

// In place, Hugging Face rotate-half layout. Returns false when scratch memory is unavailable.
// Keeps the calling thread's cos/sin tables of its last two position lists until
// rope_tables_release() on that thread.
void rope_tables_release(void);
bool rope_f32(float* x, size_t rows, size_t heads, size_t head_dim, const int32_t* positions,
              const float* inv_freq);

typedef struct {
  size_t tq;        // query rows, at absolute positions start .. start + tq - 1
  size_t start;     // cache rows before the first query
  size_t n_heads;
  size_t n_kv_heads; // divides n_heads
  size_t head_dim;
  size_t kv_stride; // elements between consecutive k (and v) rows
  float scale;
} AttentionShape;

// Cache rows of K or V: float32, bf16 bits, or int8 with one float32 scale per block of 32
// values (KV_INT8: value = scales[i / 32] * data[i], quantizeInt8's format).
typedef enum { KV_F32, KV_BF16, KV_INT8 } KvKind;
typedef struct {
  KvKind kind;
  const void* data;
  const float* scales; // KV_INT8 only
} KvRowsRef;

// attention_f32 on AVX-512 (attention_avx512.c), for head_dim a multiple of 16 on a CPU that has it
// (of 32 for int8 rows).
bool attention_avx512_available(void);
bool attention_avx512(float* out, const float* q, const KvRowsRef* k, const KvRowsRef* v, const AttentionShape* shape);

// Causal grouped-query attention for one sequence; k and v of one kind. Returns false when
// scratch memory is unavailable.
bool attention_f32(float* out, const float* q, const KvRowsRef* k, const KvRowsRef* v, const AttentionShape* shape);

// ---- Training kernels (train_kernels.c) ----

// AdamW's scalars, combined in double before they are rounded to float (adamw_step).
typedef struct {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float step;    // lr / bc1
  float inv_bc2; // 1 / bc2
  float eps;
  float decay;   // lr * weightDecay
  double grad_scale; // g is read as (float)(g * grad_scale): the product in double, rounded once
  bool zero_grad;    // g is cleared once read
} AdamWStep;

AdamWStep adamw_step(double lr, double beta1, double beta2, double eps, double weight_decay, double bc1,
                     double bc2, double grad_scale, bool zero_grad);

// In place over n values; p, g, m, v (and p16) are distinct arrays. p16, when not NULL, receives
// the new p rounded to bf16 bits (the weights' bf16 copy, kept current in the same pass).
void adamw_f32(float* p, float* g, float* m, float* v, uint16_t* p16, size_t n, const AdamWStep* step);

// Sum of x[i]^2, accumulated in double.
double sum_squares_f32(const float* x, size_t n);
// w[i] = e^((z[i] - max z) * inv_t) (0 under e^-87), returning their sum: the sampler's weights.
double tempered_weights_f64(double* w, const float* z, size_t v, float inv_t);


// dx written (or added to, when accumulate) for rows x dim; dw (may be NULL) += the sum over rows.
// dx may alias dy or x. Returns false when scratch memory is unavailable.
bool rmsnorm_backward_f32(float* dx, float* dw, const float* dy, const float* x, const float* w, size_t rows,
                          size_t dim, float eps, bool accumulate);

// Elementwise; dg and du (distinct) may each alias any input.
void silu_mul_backward_f32(float* dg, float* du, const float* da, const float* gate, const float* up, size_t n);

// Per row of V >= 1 logits: lse and entropy.
void logits_stats_f32(float* lse, float* entropy, const float* logits, size_t rows, size_t v);

// In place, logits -> d loss / d logits without the one-hot part.
void logits_backward_f32(float* logits, size_t rows, size_t v, const float* lse, const float* entropy,
                         const float* g_sum, const float* g_entropy);

// A block of attention score rows [rows, cols]: row i sees columns 0 .. first_row + i, which
// the caller guarantees are < cols; the columns after those become 0. In place.
void causal_softmax_rows_f32(float* s, float* lse, size_t rows, size_t cols, size_t first_row);
// s -> p = exp(s - lse[i]) and dp -> dS = p * (dp - dO_i . O_i); d_o and o hold rows of
// head_dim floats, stride apart; dp and s do not overlap.
void causal_softmax_backward_rows_f32(float* dp, float* s, const float* lse, const float* d_o, const float* o,
                                      size_t rows, size_t cols, size_t first_row, size_t head_dim, size_t stride);

// One row of such a block (visible columns of cols) for the fused bf16 attention: p = the
// softmax's probabilities as bf16 bits, zeros after them; returns the row's lse; s is left scratch.
float causal_softmax_row_bf16(uint16_t* p, float* s, size_t visible, size_t cols);
// Its backward for one row: p and ds (bf16 bits, zeros after the visible columns) from the scores s,
// dp = dO_i V^T, the row's lse and dot = dO_i . O_i; equal to rounding the float32 kernel's.
void causal_softmax_backward_row_bf16(uint16_t* p, uint16_t* ds, const float* s, const float* dp, float lse,
                                      float dot, size_t visible, size_t cols);
// One part of a row (cols columns, the first `seen` >= 1 visible) in an online softmax: p = e^(s -
// max) as bf16 bits, zeros after, with *max_score and *sum (from -inf and 0) updated to cover the
// part; returns the factor that rescales what was summed before it (0 for the first part).
float online_softmax_part_bf16(uint16_t* p, float* s, size_t seen, size_t cols, float* max_score, float* sum);
// out[i] = a_i . b_i over n rows of len floats, stride apart.
void rows_dot_f32(float* out, const float* a, const float* b, size_t n, size_t len, size_t stride);
// The same with b's rows as bf16 bits, widened exactly.
void rows_dot_f32_bf16(float* out, const float* a, const uint16_t* b, size_t n, size_t len, size_t stride);

// siluMul's backward with dg and du rounded to bf16 bits: equal to rounding the float32 kernel's.
void silu_mul_backward_bf16_out(uint16_t* dg, uint16_t* du, const float* da, const float* gate, const float* up,
                                size_t n);

// ---- The same, split over the calling thread's OpenMP team (kernels_parallel.c) ----
// Results equal the single-threaded kernels' whatever the team size.

// out (dg, du) float32, or bf16 bits when bf16_out.
void rmsnorm_parallel(void* out, bool bf16_out, const float* x, const float* weight, size_t rows, size_t dim,
                      float eps);
void silu_mul_parallel(void* out, bool bf16_out, const float* gate, const float* up, size_t n);
void adamw_f32_parallel(float* p, float* g, float* m, float* v, uint16_t* p16, size_t n, const AdamWStep* step);
// Split over rows only without dw (its sum over the rows stays on one thread).
bool rmsnorm_backward_f32_parallel(float* dx, float* dw, const float* dy, const float* x, const float* w,
                                   size_t rows, size_t dim, float eps, bool accumulate);
void silu_mul_backward_parallel(void* dg, void* du, bool bf16_out, const float* da, const float* gate,
                                const float* up, size_t n);
void logits_stats_f32_parallel(float* lse, float* entropy, const float* logits, size_t rows, size_t v);
// Sums blocks of 2^16 values and adds the partial sums in order; false when memory is short.
bool sum_squares_f32_parallel(const float* x, size_t n, double* sum);
void logits_backward_f32_parallel(float* logits, size_t rows, size_t v, const float* lse, const float* entropy,
                                  const float* g_sum, const float* g_entropy);

#endif
