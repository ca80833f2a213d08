// The attention of a prompt chunk against a KV cache of bf16 rows (model/segment-attention.ts),
// flash-attention style: each item (a query head, or a short segment's query heads of one KV head
// stacked, over a block of up to 256 query rows) walks the visible keys in chunks of 512, keeping a
// running max and sum per row (online softmax), so that a score block of 256 x 512 floats stays in
// L2 instead of a block of 256 x (all keys) going through memory.
//
// Why: before, each block's scores over every cached key were written out (8 MB at 16k keys),
// normalized and rounded in separate passes, and the products reached about a third of the
// GEMM peak at 16k keys; attention was then most of a 16k-token prompt's prefill time.
//
// The products are single-threaded oneDNN bf16 matmuls (as in train_attention.c), the items
// spread over the caller's OpenMP team. Shapes stay few, so oneDNN's primitives are reused: query
// blocks are padded with zeros to 256 rows (a last one to 32, 64 or 128 where it is that short), and
// a last key chunk whose width is not a multiple of 64 is copied into a zero-padded buffer. P (the
// exponentials against the running max, in [0, 1]) is rounded to bf16 for the product with V;
// sums, maxima and the output stay in fp32.
#include <math.h>
#include <string.h>

#include "args.h"
#include "bf16.h"
#include "dispatch.h"
#include "gemm.h"
#include "ops.h"
#include "thread_buffers.h"
#include "train_attention.h"
#include "vec_math.h"

#ifndef OPENCLAW_ONEDNN

static AttentionStatus prefill_attention(const float* q, const uint16_t* k, const uint16_t* v, float* out, size_t tq,
                                         size_t start, size_t n_heads, size_t n_kv_heads, size_t hd) {
  (void)q, (void)k, (void)v, (void)out, (void)tq, (void)start, (void)n_heads, (void)n_kv_heads, (void)hd;
  return ATTENTION_UNSUPPORTED;
}

#else

#include <omp.h>

// Query rows per item: 256 while the segment has that many left, then the rest in one block
// rounded up to 32, 64, 128 or 256 rows. Blocks of 256 rather than 128 took 0.90-0.93x the time at
// 256 and 512 rows after 8-16k cached keys (the same process, 2 threads); 384 and 512 were slower.
#define ROWS 256
#define KEYS 512
#define KEY_STEP 64

typedef struct {
  const float* q;
  const uint16_t *k, *v;
  float* out;
  size_t tq, start, n_heads, n_kv_heads, hd;
  float scale;
} Prefill;

// One row's scores s[0..visible) -> p = bf16 of e^(s - new max), zeros to `width`; updates the
// row's running max and sum and returns the factor its output so far must be scaled by.
SIMD_CLONES
static float online_row(float* s, uint16_t* p, size_t visible, size_t width, float* max, float* sum) {
  if (visible == 0) {
    memset(p, 0, width * sizeof *p);
    return 1.f;
  }
  const float row_max = max_f32(s, visible);
  const float new_max = row_max > *max ? row_max : *max;
  const float rescale = *max == -INFINITY ? 0.f : exp_f32(*max - new_max);
  // Sixteen lanes: one AVX-512 register, where the exponentials of 128 x 512 scores a chunk are a
  // fifth of the item's time.
  const f32x16 max16 = (f32x16){0} + new_max;
  f32x16 acc0 = {0}, acc1 = {0};
  size_t j = 0;
  for (; j + 32 <= visible; j += 32) {
    f32x16 e0 = exp_in_range_f32x16(clamp_below16(load16_f32(s + j) - max16, -87.f));
    f32x16 e1 = exp_in_range_f32x16(clamp_below16(load16_f32(s + j + 16) - max16, -87.f));
    store16_f32(s + j, e0);
    store16_f32(s + j + 16, e1);
    acc0 += e0;
    acc1 += e1;
  }
  const f32x16 acc = acc0 + acc1;
  float total = 0.f;
  for (int lane = 0; lane < 16; lane++) total += acc[lane];
  for (; j < visible; j++) {
    s[j] = exp_f32(s[j] - new_max);
    total += s[j];
  }
  bf16_from_f32(p, s, visible);
  memset(p + visible, 0, (width - visible) * sizeof *p);
  *max = new_max;
  *sum = *sum * rescale + total;
  return rescale;
}

// A block's query rows padded to one of the few sizes whose primitives are cached.
static size_t padded_rows(size_t rows) { return rows <= 32 ? 32 : rows <= 64 ? 64 : rows <= 128 ? 128 : ROWS; }

// Heads h0 .. h0 + heads - 1 (of one KV head), query rows r0 .. r0 + rows - 1 (positions start + r0 + i,
// each seeing keys 0 .. itself), padded to m: one stack of heads * m <= ROWS rows, head by head.
static AttentionStatus prefill_item(const Prefill* a, size_t h0, size_t heads, size_t r0, size_t m) {
  const size_t hd = a->hd, q_dim = a->n_heads * hd, kv_dim = a->n_kv_heads * hd;
  const size_t g = h0 / (a->n_heads / a->n_kv_heads), stacked = heads * m;
  const size_t rows = a->tq - r0 < m ? a->tq - r0 : m, cols = a->start + r0 + rows;
  uint16_t* qb = thread_buffer(0, ROWS * hd * sizeof(uint16_t));
  float* s = thread_buffer(1, ROWS * KEYS * sizeof(float));
  uint16_t* pb = thread_buffer(2, ROWS * KEYS * sizeof(uint16_t));
  float* o = thread_buffer(3, ROWS * hd * sizeof(float));
  float* stats = thread_buffer(4, 2 * ROWS * sizeof(float));
  uint16_t* kpad = thread_buffer(5, KEYS * hd * sizeof(uint16_t));
  uint16_t* vpad = thread_buffer(6, KEYS * hd * sizeof(uint16_t));
  if (!qb || !s || !pb || !o || !stats || !kpad || !vpad) return ATTENTION_NO_MEMORY;
  float *max = stats, *sum = stats + ROWS;
  for (size_t p = 0; p < heads; p++) {
    uint16_t* part = qb + p * m * hd;
    for (size_t i = 0; i < rows; i++) bf16_from_f32(part + i * hd, a->q + (r0 + i) * q_dim + (h0 + p) * hd, hd);
    memset(part + rows * hd, 0, (m - rows) * hd * sizeof(uint16_t));
  }
  for (size_t i = 0; i < stacked; i++) max[i] = -INFINITY, sum[i] = 0.f;
  const uint16_t* k = a->k + g * hd;
  const uint16_t* v = a->v + g * hd;
  for (size_t j0 = 0; j0 < cols; j0 += KEYS) {
    const size_t width = cols - j0 < KEYS ? cols - j0 : KEYS;
    const size_t padded = (width + KEY_STEP - 1) / KEY_STEP * KEY_STEP;
    const uint16_t *kc = k + j0 * kv_dim, *vc = v + j0 * kv_dim;
    size_t ld = kv_dim;
    if (padded != width) {
      for (size_t r = 0; r < width; r++) {
        memcpy(kpad + r * hd, kc + r * kv_dim, hd * sizeof(uint16_t));
        memcpy(vpad + r * hd, vc + r * kv_dim, hd * sizeof(uint16_t));
      }
      memset(kpad + width * hd, 0, (padded - width) * hd * sizeof(uint16_t));
      memset(vpad + width * hd, 0, (padded - width) * hd * sizeof(uint16_t));
      kc = kpad, vc = vpad, ld = hd;
    }
    AttentionStatus st = attention_tile(false, true, stacked, padded, hd, a->scale, qb, hd, kc, ld, 0.f, s, KEYS);
    if (st != ATTENTION_DONE) return st;
    for (size_t r = 0; r < stacked; r++) {
      const size_t i = r % m, sees = a->start + r0 + i + 1; // keys 0 .. sees - 1
      const size_t visible = i >= rows || sees <= j0 ? 0 : (sees - j0 < width ? sees - j0 : width);
      const float rescale = online_row(s + r * KEYS, pb + r * KEYS, visible, padded, &max[r], &sum[r]);
      if (j0 > 0 && rescale != 1.f)
        for (size_t d = 0; d < hd; d++) o[r * hd + d] *= rescale;
    }
    st = attention_tile(false, false, stacked, hd, padded, 1.f, pb, KEYS, vc, ld, j0 == 0 ? 0.f : 1.f, o, hd);
    if (st != ATTENTION_DONE) return st;
  }
  for (size_t p = 0; p < heads; p++)
    for (size_t i = 0; i < rows; i++) {
      const size_t r = p * m + i;
      float* row = a->out + (r0 + i) * q_dim + (h0 + p) * hd;
      const float inv = 1.f / sum[r];
      for (size_t d = 0; d < hd; d++) row[d] = o[r * hd + d] * inv;
    }
  return ATTENTION_DONE;
}

static AttentionStatus prefill_attention(const float* q, const uint16_t* k, const uint16_t* v, float* out, size_t tq,
                                         size_t start, size_t n_heads, size_t n_kv_heads, size_t hd) {
  if (!gemm_uses_onednn()) return ATTENTION_UNSUPPORTED;
  const Prefill a = {.q = q, .k = k, .v = v, .out = out, .tq = tq, .start = start, .n_heads = n_heads,
                     .n_kv_heads = n_kv_heads, .hd = hd,
                     .scale = (float)(1.0 / sqrt((double)hd))};
  const size_t blocks = (tq + ROWS - 1) / ROWS;
  // A segment short enough stacks the query heads of each KV head into one block (2 x 128 rows
  // rather than 128 twice: longer products, and K and V read once for both).
  const size_t group = n_heads / n_kv_heads, stack = padded_rows(tq) * group <= ROWS ? group : 1;
  const size_t sets = n_heads / stack;
  const long items = (long)(sets * blocks);
  int status = ATTENTION_DONE;
#pragma omp parallel
  {
    omp_set_num_threads(1); // each member's matmuls run on it alone
    // Latest blocks first: they see the most keys, so the long items start before the short ones.
#pragma omp for schedule(dynamic, 1)
    for (long it = 0; it < items; it++) {
      int seen;
#pragma omp atomic read
      seen = status;
      if (seen != ATTENTION_DONE) continue;
      const size_t block = blocks - 1 - (size_t)it / sets, h0 = (size_t)it % sets * stack;
      const size_t rows = tq - block * ROWS < ROWS ? tq - block * ROWS : ROWS;
      AttentionStatus st = prefill_item(&a, h0, stack, block * ROWS, padded_rows(rows));
      if (st != ATTENTION_DONE) {
#pragma omp critical(prefill_attention_status)
        if (status == ATTENTION_DONE) status = st;
      }
    }
  }
  return (AttentionStatus)status;
}

#endif

// prefillAttentionBf16(out, q, k, v, Tq, start, nHeads, nKvHeads, headDim) -> whether it computed out
napi_value op_prefill_attention_bf16(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array out, q;
  U16Array k, v;
  size_t tq, start, n_heads, n_kv_heads, hd;
  if (!op_begin(env, info, "prefillAttentionBf16", 9, &call) || !op_f32_array(&call, 0, "out", &out) ||
      !op_f32_array(&call, 1, "q", &q) || !op_u16_array(&call, 2, "k", &k) || !op_u16_array(&call, 3, "v", &v) ||
      !op_size(&call, 4, "Tq", 1, &tq) || !op_size(&call, 5, "start", 0, &start) ||
      !op_size(&call, 6, "nHeads", 1, &n_heads) || !op_size(&call, 7, "nKvHeads", 1, &n_kv_heads) ||
      !op_size(&call, 8, "headDim", 1, &hd))
    return NULL;
  if (n_heads % n_kv_heads != 0) {
    op_throw_size(&call, "nHeads = %zu is not a multiple of nKvHeads = %zu", n_heads, n_kv_heads);
    return NULL;
  }
  if (!op_check_length(&call, "q", q.length, tq, n_heads, hd, "Tq*nHeads*headDim") ||
      !op_check_length(&call, "out", out.length, tq, n_heads, hd, "Tq*nHeads*headDim") ||
      !op_check_length(&call, "k", k.length, start + tq, n_kv_heads, hd, "(start+Tq)*nKvHeads*headDim") ||
      !op_check_length(&call, "v", v.length, start + tq, n_kv_heads, hd, "(start+Tq)*nKvHeads*headDim"))
    return NULL;
  AttentionStatus status = prefill_attention(q.data, k.data, v.data, out.data, tq, start, n_heads, n_kv_heads, hd);
  if (status == ATTENTION_FAILED) op_throw_value(&call, "oneDNN's bf16 matmul failed");
  if (status == ATTENTION_NO_MEMORY) op_throw_size(&call, "could not allocate its scratch memory");
  if (status == ATTENTION_FAILED || status == ATTENTION_NO_MEMORY) return NULL;
  napi_value result;
  if (napi_get_boolean(env, status == ATTENTION_DONE, &result) != napi_ok) return NULL;
  return result;
}
