// The training attention's fused bf16 forward and backward (train_attention.c). They trust their
// arguments: the N-API layer (train_ops.c) has checked every size.
#ifndef OPENCLAW_TRAIN_ATTENTION_H
#define OPENCLAW_TRAIN_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { ATTENTION_DONE, ATTENTION_UNSUPPORTED, ATTENTION_FAILED, ATTENTION_NO_MEMORY } AttentionStatus;

// Shapes as in src/engine/local/train/attention.ts: q, out, d_out, dq [T, n_heads * head_dim];
// k, v, dk, dv [T, n_kv_heads * head_dim]; seqs holds (start, length) pairs; lse [T * n_heads]
// holds sequence s's values at n_heads * start + h * length + i.
typedef struct {
  const float *q, *k, *v;
  // The attention's output, written by the forward and read by the backward: float32 values, or
  // their bf16 bits (out_bf16); one of the two is set.
  float* out;
  uint16_t* out_bf16;
  float* lse; // likewise
  const float* d_out;
  float *dq, *dk, *dv;
  const int32_t* seqs;
  size_t n_seqs, n_heads, n_kv_heads, head_dim;
  float scale;
} TrainAttention;

// out and lse from q, k, v. ATTENTION_UNSUPPORTED (nothing written that the caller's fallback
// does not overwrite) when oneDNN is not in use or has no fast bf16 matmul here.
AttentionStatus train_attention_forward_bf16(const TrainAttention* a);

// dq, dk, dv (overwritten) from d_out and the forward's q, k, v, out and lse.
AttentionStatus train_attention_backward_bf16(const TrainAttention* a);

// One bf16 product on the calling thread alone (a oneDNN build; train_attention.c, prefill_attention.c):
// C[m,n] = alpha * op(A) op(B) + beta * C, oneDNN's answer as an AttentionStatus.
AttentionStatus attention_tile(bool ta, bool tb, size_t m, size_t n, size_t k, float alpha, const uint16_t* x,
                               size_t ldx, const uint16_t* y, size_t ldy, float beta, float* c, size_t ldc);

#endif
