// The training attention in bf16, forward and backward, one call per layer: the same blockwise
// scheme as src/engine/local/train/attention.ts (blocks of query rows that see key columns 0 .. the
// block's end, softmax in fp32, the backward recomputing P from Q, K and the forward's lse), but
// parallel over (sequence, KV head) with OpenMP, each thread running single-threaded oneDNN matmuls
// on its own bf16 copies of K, V, Q and dO.
//
// Why: a layer's attention is hundreds of small GEMMs (tiles of 64 x 64 x head_dim). Called one by one
// from TypeScript, each forked both threads, rounded its operands to bf16 again and waited for
// both: attention ran at a fraction of the GEMM peak. Here each tensor is rounded once and the
// threads never meet inside a layer.
//
// Every GEMM covers a block of 64 query rows of each stacked head and a chunk of up to 512 key
// columns (sequences are padded to a multiple of 64 rows with zeros), with the score blocks' row
// stride fixed for the call, so a thread's cached primitives (8 chunk widths per product) cover all
// of them whatever the sequences' lengths. Padded rows get P = dS = 0, so they add nothing.
// - Chunks of 512 columns rather than single tiles: a tenth fewer GEMM seconds at 512 and 2048
//   tokens (fewer calls, longer inner loops), measured on one thread with every product of a head's
//   forward and backward.
// - The query heads of a KV head share its K and V, so up to 4 of them stack into one block of rows
//   (stacked_heads): K and V are read once for all, and every product gets longer. 1.04x the
//   forward and backward at the 0.6B shape (512 tokens; 2 heads), against one head per block;
//   1.03x with 4 heads stacked rather than 2 (32 heads over 8).
// - Rows longer than one chunk (sequences over 512 tokens) take the softmax chunk by chunk: the
//   forward FlashAttention-2's online softmax (forward_block_online), the backward each chunk's
//   P and dS from the forward's lse (exact), so a chunk's scores stay in cache between passes.
// - Blocks of 64 rows rather than 128: the block on the diagonal computes its masked half too, 1.25x
//   the causal area of 512 tokens at 128 rows, 1.125x at 64. With 2 heads stacked (128-row
//   products) 1.02-1.05x at 256-2048 tokens, against 128-row blocks; blocks of 32 gained less.
#include <math.h>
#include <string.h>

#include "bf16.h"
#include "gemm.h"
#include "kernels.h"
#include "thread_buffers.h"
#include "train_attention.h"

#ifndef OPENCLAW_ONEDNN

AttentionStatus train_attention_forward_bf16(const TrainAttention* a) {
  (void)a;
  return ATTENTION_UNSUPPORTED;
}

AttentionStatus train_attention_backward_bf16(const TrainAttention* a) {
  (void)a;
  return ATTENTION_UNSUPPORTED;
}

#else

#include <omp.h>

#define TILE 64
#define CHUNK 512
#define STACK_HEADS 4

// Buffers above this size are freed after the call rather than kept.
#define KEEP_BYTES ((size_t)64 << 20)

static size_t padded(size_t n) { return (n + TILE - 1) / TILE * TILE; }

// The width of the key chunk at column j0 of a block row that sees `cols` columns.
static size_t chunk(size_t j0, size_t cols) { return cols - j0 < CHUNK ? cols - j0 : CHUNK; }

// out (n_pad x hd, contiguous) = bf16 of n rows of hd floats `stride` apart, then zero rows.
static void rows_to_bf16(uint16_t* out, const float* x, size_t n, size_t n_pad, size_t hd, size_t stride) {
  for (size_t i = 0; i < n; i++) bf16_from_f32(out + i * hd, x + i * stride, hd);
  memset(out + n * hd, 0, (n_pad - n) * hd * sizeof(uint16_t));
}

typedef struct {
  const TrainAttention* a;
  size_t ld;     // row stride of the score blocks: score_stride
  float scale;
} Call;

// The score blocks' row stride: the longest sequence of the call padded to whole chunks. The stride
// is part of every cached primitive that reads or writes scores, so padding it to chunks rather
// than tiles lets steps of different lengths share them (all up to 512 tokens one stride): a new
// stride means up to 64 new primitives on each thread.
static size_t score_stride(const TrainAttention* a) {
  size_t longest = 0;
  for (size_t s = 0; s < a->n_seqs; s++)
    if ((size_t)a->seqs[2 * s + 1] > longest) longest = (size_t)a->seqs[2 * s + 1];
  return (longest + CHUNK - 1) / CHUNK * CHUNK;
}

AttentionStatus attention_tile(bool ta, bool tb, size_t m, size_t n, size_t k, float alpha, const uint16_t* x,
                               size_t ldx, const uint16_t* y, size_t ldy, float beta, float* c, size_t ldc) {
  switch (onednn_gemm_bf16(ta, tb, m, n, k, alpha, x, ldx, y, ldy, beta, c, ldc)) {
  case BF16_DONE:
    return ATTENTION_DONE;
  case BF16_UNSUPPORTED:
    return ATTENTION_UNSUPPORTED;
  default:
    return ATTENTION_FAILED;
  }
}

// One (sequence, KV head): its sizes, and its K and V rounded to bf16 (buffers 0 and 1).
typedef struct {
  size_t hd, q_dim, kv_dim, group, start, n, n_pad, ld;
  uint16_t *kb, *vb;
} Item;

// Fills *it; ATTENTION_DONE with it->n == 0 for an empty sequence (nothing to do).
static AttentionStatus item_begin(const Call* c, size_t seq, size_t g, Item* it) {
  const TrainAttention* a = c->a;
  it->hd = a->head_dim, it->q_dim = a->n_heads * it->hd, it->kv_dim = a->n_kv_heads * it->hd;
  it->group = a->n_heads / a->n_kv_heads, it->start = (size_t)a->seqs[2 * seq];
  it->n = (size_t)a->seqs[2 * seq + 1], it->n_pad = padded(it->n), it->ld = c->ld;
  if (it->n == 0) return ATTENTION_DONE;
  it->kb = thread_buffer(0, it->n_pad * it->hd * sizeof(uint16_t));
  it->vb = thread_buffer(1, it->n_pad * it->hd * sizeof(uint16_t));
  if (!it->kb || !it->vb) return ATTENTION_NO_MEMORY;
  const size_t at = it->start * it->kv_dim + g * it->hd;
  rows_to_bf16(it->kb, a->k + at, it->n, it->n_pad, it->hd, it->kv_dim);
  rows_to_bf16(it->vb, a->v + at, it->n, it->n_pad, it->hd, it->kv_dim);
  return ATTENTION_DONE;
}

// Query heads of one KV head that a pass stacks into one block of rows: the largest divisor of the
// group up to STACK_HEADS (at the 0.6B shape 2 heads: products of 128 rows, and dK, dV sum over 128
// rows at a time; up to 256).
static size_t stacked_heads(size_t group) {
  for (size_t s = STACK_HEADS; s > 1; s--)
    if (group % s == 0) return s;
  return 1;
}

// out = `stack` heads' n rows (of hd floats, `stride` apart; head i at x + i * hd) in bf16, laid out
// block after block of TILE rows, each block holding its rows of every head in turn; padded rows 0.
static void stacked_rows_to_bf16(uint16_t* out, const float* x, size_t stack, size_t n, size_t n_pad, size_t hd,
                                 size_t stride) {
  for (size_t r0 = 0; r0 < n_pad; r0 += TILE) {
    const size_t rows = n - r0 < TILE ? n - r0 : TILE;
    for (size_t i = 0; i < stack; i++, out += TILE * hd)
      rows_to_bf16(out, x + r0 * stride + i * hd, rows, TILE, hd, stride);
  }
}

// A block of rows longer than one chunk, into o (m x hd) and the rows' lse: FlashAttention-2's online
// softmax, chunk by chunk, so that a chunk's scores stay in cache between their passes (at 16k
// tokens a block's whole rows are 8 MB of scores, read three times). P is rounded to bf16 at the
// running maximum and O divided by the sum at the end, where whole rows round P already divided.
static AttentionStatus forward_block_online(const Call* c, const Item* it, size_t h0, size_t r0, size_t rows,
                                            const uint16_t* qblock, float* s, uint16_t* pb, float* o, float* stats) {
  const TrainAttention* a = c->a;
  const size_t hd = it->hd, ld = it->ld, m = stacked_heads(it->group) * TILE, cols = r0 + TILE;
  float *max_score = stats, *sum = stats + m, *factor = stats + 2 * m;
  for (size_t i = 0; i < m; i++) max_score[i] = -INFINITY, sum[i] = 0.f;
  for (size_t j0 = 0; j0 < cols; j0 += CHUNK) {
    const size_t w = chunk(j0, cols);
    AttentionStatus st = attention_tile(false, true, m, w, hd, c->scale, qblock, hd, it->kb + j0 * hd, hd, 0.f, s, ld);
    if (st != ATTENTION_DONE) return st;
    for (size_t i = 0; i < m; i++) {
      // Every real row sees at least its own column in every chunk up to it (j0 <= r0); padded rows
      // see none.
      const size_t row = r0 + i % TILE;
      if (i % TILE < rows) {
        const size_t seen = row + 1 - j0 < w ? row + 1 - j0 : w;
        factor[i] = online_softmax_part_bf16(pb + i * ld, s + i * ld, seen, w, max_score + i, sum + i);
      } else {
        memset(pb + i * ld, 0, w * sizeof(uint16_t));
        factor[i] = 1.f;
      }
    }
    if (j0 > 0)
      for (size_t i = 0; i < m; i++)
        for (size_t d = 0; d < hd; d++) o[i * hd + d] *= factor[i];
    st = attention_tile(false, false, m, hd, w, 1.f, pb, ld, it->vb + j0 * hd, hd, j0 == 0 ? 0.f : 1.f, o, hd);
    if (st != ATTENTION_DONE) return st;
  }
  for (size_t i = 0; i < m; i++) {
    if (i % TILE >= rows) continue;
    const float inv_sum = 1.f / sum[i];
    for (size_t d = 0; d < hd; d++) o[i * hd + d] *= inv_sum;
    a->lse[a->n_heads * it->start + (h0 + i / TILE) * it->n + r0 + i % TILE] = max_score[i] + logf(sum[i]);
  }
  return ATTENTION_DONE;
}

// The block's output rows (o: `stack` heads' TILE rows of hd) to the output's rows from `at` (head i
// at + i * hd, rows q_dim apart), as floats or rounded to bf16 bits.
static void copy_out(const TrainAttention* a, size_t at, const float* o, size_t stack, size_t rows, size_t hd,
                     size_t q_dim) {
  for (size_t i = 0; i < stack; i++)
    for (size_t r = 0; r < rows; r++) {
      const size_t to = at + r * q_dim + i * hd;
      const float* from = o + (i * TILE + r) * hd;
      if (a->out_bf16)
        bf16_from_f32(a->out_bf16 + to, from, hd);
      else
        memcpy(a->out + to, from, hd * sizeof(float));
    }
}

// Forward of one (sequence, KV head): its query heads, `stack` of them per pass.
static AttentionStatus forward_item(const Call* c, size_t seq, size_t g) {
  const TrainAttention* a = c->a;
  Item it;
  AttentionStatus begun = item_begin(c, seq, g, &it);
  if (begun != ATTENTION_DONE || it.n == 0) return begun;
  const size_t hd = it.hd, q_dim = it.q_dim, group = it.group, start = it.start, n = it.n, n_pad = it.n_pad;
  const size_t ld = it.ld, stack = stacked_heads(group), m = stack * TILE;
  const uint16_t *kb = it.kb, *vb = it.vb;
  uint16_t* qb = thread_buffer(2, stack * n_pad * hd * sizeof(uint16_t));
  float* s = thread_buffer(3, m * ld * sizeof(float));
  uint16_t* pb = thread_buffer(4, m * ld * sizeof(uint16_t));
  float* o = thread_buffer(5, m * hd * sizeof(float));
  float* stats = thread_buffer(6, 3 * m * sizeof(float)); // the online softmax's per row
  if (!qb || !s || !pb || !o || !stats) return ATTENTION_NO_MEMORY;
  for (size_t h0 = g * group; h0 < (g + 1) * group; h0 += stack) {
    stacked_rows_to_bf16(qb, a->q + start * q_dim + h0 * hd, stack, n, n_pad, hd, q_dim);
    for (size_t r0 = 0; r0 < n; r0 += TILE) {
      const size_t rows = n - r0 < TILE ? n - r0 : TILE, cols = r0 + TILE;
      const uint16_t* qblock = qb + stack * r0 * hd;
      if (cols > CHUNK) {
        AttentionStatus st = forward_block_online(c, &it, h0, r0, rows, qblock, s, pb, o, stats);
        if (st != ATTENTION_DONE) return st;
        copy_out(a, (start + r0) * q_dim + h0 * hd, o, stack, rows, hd, q_dim);
        continue;
      }
      // One chunk: the softmax over whole rows.
      {
        AttentionStatus st = attention_tile(false, true, m, cols, hd, c->scale, qblock, hd, kb, hd, 0.f, s, ld);
        if (st != ATTENTION_DONE) return st;
      }
      for (size_t i = 0; i < m; i++) {
        // Row i is head h0 + i / TILE's row r0 + i % TILE. A row's probabilities go straight to
        // bf16; the columns it does not see, and padded rows, are 0.
        const size_t row = r0 + i % TILE;
        if (i % TILE < rows)
          a->lse[a->n_heads * start + (h0 + i / TILE) * n + row] =
              causal_softmax_row_bf16(pb + i * ld, s + i * ld, row + 1, cols);
        else
          memset(pb + i * ld, 0, cols * sizeof(uint16_t));
      }
      AttentionStatus st = attention_tile(false, false, m, hd, cols, 1.f, pb, ld, vb, hd, 0.f, o, hd);
      if (st != ATTENTION_DONE) return st;
      copy_out(a, (start + r0) * q_dim + h0 * hd, o, stack, rows, hd, q_dim);
    }
  }
  return ATTENTION_DONE;
}

// Backward of one (sequence, KV head): dK and dV of the KV head sum over its query heads, `stack`
// of them per pass.
static AttentionStatus backward_item(const Call* c, size_t seq, size_t g) {
  const TrainAttention* a = c->a;
  Item it;
  AttentionStatus begun = item_begin(c, seq, g, &it);
  if (begun != ATTENTION_DONE || it.n == 0) return begun;
  const size_t hd = it.hd, q_dim = it.q_dim, kv_dim = it.kv_dim, group = it.group, start = it.start, n = it.n;
  const size_t n_pad = it.n_pad, ld = it.ld, stack = stacked_heads(group), m = stack * TILE;
  const uint16_t *kb = it.kb, *vb = it.vb;
  uint16_t* qb = thread_buffer(2, 2 * stack * n_pad * hd * sizeof(uint16_t)); // Q, then dO
  float* s = thread_buffer(3, 2 * m * ld * sizeof(float));                    // S (P), then dP (dS)
  uint16_t* pb = thread_buffer(4, 2 * m * ld * sizeof(uint16_t));             // P, then dS
  float* dq = thread_buffer(5, m * hd * sizeof(float));
  float* dkv = thread_buffer(6, 2 * n_pad * hd * sizeof(float)); // dK, then dV
  float* dots = thread_buffer(7, stack * n * sizeof(float));      // dO_i . O_i of the stacked rows
  if (!qb || !s || !pb || !dq || !dkv || !dots) return ATTENTION_NO_MEMORY;
  uint16_t *dob = qb + stack * n_pad * hd, *dsb = pb + m * ld;
  float *dp = s + m * ld, *dk = dkv, *dv = dkv + n_pad * hd;
  memset(dkv, 0, 2 * n_pad * hd * sizeof(float));
  for (size_t h0 = g * group; h0 < (g + 1) * group; h0 += stack) {
    const size_t q_off = start * q_dim + h0 * hd;
    stacked_rows_to_bf16(qb, a->q + q_off, stack, n, n_pad, hd, q_dim);
    stacked_rows_to_bf16(dob, a->d_out + q_off, stack, n, n_pad, hd, q_dim);
    for (size_t i = 0; i < stack; i++) {
      const size_t at = q_off + i * hd;
      if (a->out_bf16)
        rows_dot_f32_bf16(dots + i * n, a->d_out + at, a->out_bf16 + at, n, hd, q_dim);
      else
        rows_dot_f32(dots + i * n, a->d_out + at, a->out + at, n, hd, q_dim);
    }
    for (size_t r0 = 0; r0 < n; r0 += TILE) {
      const size_t rows = n - r0 < TILE ? n - r0 : TILE, cols = r0 + TILE;
      const uint16_t *qblock = qb + stack * r0 * hd, *doblock = dob + stack * r0 * hd;
      // Chunk by chunk, so that a chunk's S, dP, P and dS stay in cache between the passes (at 16k
      // tokens a block's whole rows are 16 MB of S and dP): scores and dP = dO V^T, one pass turning them into
      // P and dS, then dV_j += P_j^T dO, dQ += scale dS_j K_j, dK_j += scale dS_j^T Q over the
      // stacked heads' rows. Each chunk's values are the same as over whole rows.
      for (size_t j0 = 0; j0 < cols; j0 += CHUNK) {
        const size_t w = chunk(j0, cols);
        AttentionStatus st = attention_tile(false, true, m, w, hd, c->scale, qblock, hd, kb + j0 * hd, hd, 0.f, s, ld);
        if (st == ATTENTION_DONE)
          st = attention_tile(false, true, m, w, hd, 1.f, doblock, hd, vb + j0 * hd, hd, 0.f, dp, ld);
        if (st != ATTENTION_DONE) return st;
        for (size_t i = 0; i < m; i++) {
          const size_t h = h0 + i / TILE, row = r0 + i % TILE;
          const bool padded_row = i % TILE >= rows;
          // The row's columns in this chunk that it sees (its own included); none for a padded row.
          const size_t seen = padded_row || row + 1 <= j0 ? 0 : row + 1 - j0 < w ? row + 1 - j0 : w;
          const float lse = padded_row ? 0.f : a->lse[a->n_heads * start + h * n + row];
          const float dot = padded_row ? 0.f : dots[i / TILE * n + row];
          causal_softmax_backward_row_bf16(pb + i * ld, dsb + i * ld, s + i * ld, dp + i * ld, lse, dot, seen, w);
        }
        const float dq_beta = j0 == 0 ? 0.f : 1.f;
        st = attention_tile(true, false, w, hd, m, 1.f, pb, ld, doblock, hd, 1.f, dv + j0 * hd, hd);
        if (st == ATTENTION_DONE)
          st = attention_tile(false, false, m, hd, w, c->scale, dsb, ld, kb + j0 * hd, hd, dq_beta, dq, hd);
        if (st == ATTENTION_DONE)
          st = attention_tile(true, false, w, hd, m, c->scale, dsb, ld, qblock, hd, 1.f, dk + j0 * hd, hd);
        if (st != ATTENTION_DONE) return st;
      }
      for (size_t i = 0; i < stack; i++) {
        float* dq_out = a->dq + q_off + r0 * q_dim + i * hd;
        for (size_t r = 0; r < rows; r++) memcpy(dq_out + r * q_dim, dq + (i * TILE + r) * hd, hd * sizeof(float));
      }
    }
  }
  for (size_t i = 0; i < n; i++) {
    memcpy(a->dk + (start + i) * kv_dim + g * hd, dk + i * hd, hd * sizeof(float));
    memcpy(a->dv + (start + i) * kv_dim + g * hd, dv + i * hd, hd * sizeof(float));
  }
  return ATTENTION_DONE;
}

// Runs item(seq, kv head) over every pair on the calling thread's OpenMP team. Each member runs
// its matmuls on one thread (oneDNN's primitives then plan for one: see onednn_gemm_bf16). The
// first status that is not ATTENTION_DONE wins and the rest of the items are skipped.
static AttentionStatus run_items(const TrainAttention* a, AttentionStatus (*item)(const Call*, size_t, size_t)) {
  const Call c = {.a = a, .ld = score_stride(a), .scale = a->scale};
  const long items = (long)(a->n_seqs * a->n_kv_heads);
  int status = ATTENTION_DONE;
#pragma omp parallel
  {
    omp_set_num_threads(1);
#pragma omp for schedule(dynamic, 1)
    for (long it = 0; it < items; it++) {
      int seen;
#pragma omp atomic read
      seen = status;
      if (seen != ATTENTION_DONE) continue;
      AttentionStatus st = item(&c, (size_t)it / a->n_kv_heads, (size_t)it % a->n_kv_heads);
      if (st != ATTENTION_DONE) {
#pragma omp critical(train_attention_status)
        if (status == ATTENTION_DONE) status = st;
      }
    }
    thread_buffers_trim(KEEP_BYTES);
  }
  return (AttentionStatus)status;
}

AttentionStatus train_attention_forward_bf16(const TrainAttention* a) {
  if (!gemm_uses_onednn()) return ATTENTION_UNSUPPORTED;
  return run_items(a, forward_item);
}

AttentionStatus train_attention_backward_bf16(const TrainAttention* a) {
  if (!gemm_uses_onednn()) return ATTENTION_UNSUPPORTED;
  return run_items(a, backward_item);
}

#endif
