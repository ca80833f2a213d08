// rmsnorm, SwiGLU's silu(gate) * up, and rotary embedding. Single-threaded (kernels_parallel.c
// splits them over OpenMP threads), except rope's rows, split here after its table is made.
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "dispatch.h"
#include "parallel.h"
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

// silu(gate) * up, 16 lanes at a time (exp_neg_f32x16), then the scalar expression: the same bits.
__attribute__((always_inline)) static inline void silu_mul_run(float* out, const float* gate, const float* up,
                                                               size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const f32x16 g = load16_f32(gate + i);
    store16_f32(out + i, g / (1.f + exp_neg_f32x16(g)) * load16_f32(up + i));
  }
  for (; i < n; i++) out[i] = gate[i] / (1.f + exp_f32(-gate[i])) * up[i];
}

SIMD_CLONES
void silu_mul_f32(float* out, const float* gate, const float* up, size_t n) { silu_mul_run(out, gate, up, n); }

// The bf16 outputs: each value computed by the same expression as the float32 kernels', in runs
// that stay in L1, then rounded (bf16_from_f32), so the bits equal rounding their output.
#define ROUND_RUN 256

SIMD_CLONES
void rmsnorm_bf16_out(uint16_t* out, const float* x, const float* weight, size_t rows, size_t dim, float eps) {
  float run[ROUND_RUN];
  for (size_t r = 0; r < rows; r++) {
    const float* xr = x + r * dim;
    float inv_rms = 1.f / sqrtf(dot_f32(xr, xr, dim) / (float)dim + eps);
    for (size_t i0 = 0; i0 < dim; i0 += ROUND_RUN) {
      const size_t n = dim - i0 < ROUND_RUN ? dim - i0 : ROUND_RUN;
      for (size_t i = 0; i < n; i++) run[i] = xr[i0 + i] * inv_rms * weight[i0 + i];
      bf16_from_f32(out + r * dim + i0, run, n);
    }
  }
}

SIMD_CLONES
void silu_mul_bf16_out(uint16_t* out, const float* gate, const float* up, size_t n) {
  float run[ROUND_RUN];
  for (size_t i0 = 0; i0 < n; i0 += ROUND_RUN) {
    const size_t m = n - i0 < ROUND_RUN ? n - i0 : ROUND_RUN;
    silu_mul_run(run, gate + i0, up + i0, m);
    bf16_from_f32(out + i0, run, m);
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

// The angle is rounded to float32, as the Hugging Face implementation computes it; its cosine and
// sine are then taken in double so that large positions lose nothing more.
static void rope_angles(float* cos_t, float* sin_t, int32_t position, const float* inv_freq, size_t half) {
  for (size_t i = 0; i < half; i++) {
    float angle = (float)((double)position * (double)inv_freq[i]);
    cos_t[i] = (float)cos((double)angle);
    sin_t[i] = (float)sin((double)angle);
  }
}

// A training step applies the same positions to q and k in every layer (their negatives in the
// backward), and a decode step to q and k of every layer: each thread keeps the cos and sin tables
// of the last two position lists it rotated by, so that their sines and cosines (a third of rope's
// time, 1% of a bf16 training step at the 0.6B shape) are computed once, not twice per layer.
// Tables above ROPE_CACHE_MAX_BYTES are computed row by row and not kept.
#define ROPE_CACHE_MAX_BYTES ((size_t)64 << 20)

typedef struct {
  int32_t* positions;
  float* inv_freq;
  float* table; // rows x half cosines, then rows x half sines
  size_t rows, half;
} RopeTable;

typedef struct {
  RopeTable entries[2];
  int next;
} RopeCache;

// Per JS thread (the OpenMP threads only read a table made before their region); the op layer
// frees it in the thread's env cleanup hook (args.h, op_release_at_env_exit).
static __thread RopeCache rope_cache;

static void rope_entry_clear(RopeTable* e) {
  free(e->positions);
  free(e->inv_freq);
  free(e->table);
  *e = (RopeTable){0};
}

void rope_tables_release(void) {
  for (int i = 0; i < 2; i++) rope_entry_clear(&rope_cache.entries[i]);
}

// This thread's table for these positions and frequencies, computed now if it has none; NULL when it
// is too large to keep or memory is short (the caller then computes row by row).
static const float* rope_table(const int32_t* positions, size_t rows, const float* inv_freq, size_t half) {
  if (rows * half * 2 * sizeof(float) > ROPE_CACHE_MAX_BYTES) return NULL;
  RopeCache* cache = &rope_cache;
  for (int i = 0; i < 2; i++) {
    RopeTable* e = &cache->entries[i];
    if (e->table && e->rows == rows && e->half == half &&
        memcmp(e->positions, positions, rows * sizeof *positions) == 0 &&
        memcmp(e->inv_freq, inv_freq, half * sizeof *inv_freq) == 0)
      return e->table;
  }
  RopeTable* e = &cache->entries[cache->next];
  cache->next ^= 1;
  rope_entry_clear(e);
  e->positions = malloc(rows * sizeof *positions);
  e->inv_freq = malloc(half * sizeof *inv_freq);
  e->table = malloc(rows * half * 2 * sizeof(float));
  if (!e->positions || !e->inv_freq || !e->table) {
    rope_entry_clear(e);
    return NULL;
  }
  memcpy(e->positions, positions, rows * sizeof *positions);
  memcpy(e->inv_freq, inv_freq, half * sizeof *inv_freq);
  e->rows = rows;
  e->half = half;
  for (size_t r = 0; r < rows; r++)
    rope_angles(e->table + r * half, e->table + (rows + r) * half, positions[r], inv_freq, half);
  return e->table;
}

// Rows first .. first + count - 1 of x, rotated by a table of table_rows rows (cosines, then sines).
SIMD_CLONES
static void rope_share(float* x, size_t first, size_t count, size_t table_rows, size_t heads, size_t head_dim,
                       const float* table) {
  size_t half = head_dim / 2;
  for (size_t r = first; r < first + count; r++)
    for (size_t h = 0; h < heads; h++)
      rotate_half(x + (r * heads + h) * head_dim, table + r * half, table + (table_rows + r) * half, half);
}

bool rope_f32(float* x, size_t rows, size_t heads, size_t head_dim, const int32_t* positions,
              const float* inv_freq) {
  size_t half = head_dim / 2;
  const float* cached = rope_table(positions, rows, inv_freq, half);
  if (cached) {
#pragma omp parallel if (rows * heads * head_dim >= PARALLEL_MIN_ELEMENTS)
    {
      size_t first, count;
      thread_share(rows, &first, &count);
      // The table's sines start rows x half after its cosines: the rows' shares keep that stride.
      rope_share(x, first, count, rows, heads, head_dim, cached);
    }
    return true;
  }
  float* table = malloc(2 * half * sizeof(float)); // head_dim >= 2 was checked
  if (table == NULL) return false;
  for (size_t r = 0; r < rows; r++) {
    rope_angles(table, table + half, positions[r], inv_freq, half);
    rope_share(x + r * heads * head_dim, 0, 1, 1, heads, head_dim, table);
  }
  free(table);
  return true;
}
