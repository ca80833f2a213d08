// The row and elementwise kernels split over the calling thread's OpenMP team (parallel.h): on one
// thread they left the other core idle between the GEMMs of a training step. Every row, and every
// element (the split falls on whole vector blocks), is computed by the same code as alone, so the
// results do not depend on the number of threads.
#include <stdlib.h>

#include "kernels.h"
#include "parallel.h"

// Elements per block of an elementwise split: a multiple of every vector body's width.
#define ELEMENT_BLOCK ((size_t)1024)

// out is float32, or bf16 bits when bf16_out (the kernels' *_bf16_out variants).
void rmsnorm_parallel(void* out, bool bf16_out, const float* x, const float* weight, size_t rows, size_t dim,
                      float eps) {
#pragma omp parallel if (rows * dim >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share(rows, &first, &count);
    const float* xs = x + first * dim;
    if (bf16_out)
      rmsnorm_bf16_out((uint16_t*)out + first * dim, xs, weight, count, dim, eps);
    else
      rmsnorm_f32((float*)out + first * dim, xs, weight, count, dim, eps);
  }
}

void silu_mul_parallel(void* out, bool bf16_out, const float* gate, const float* up, size_t n) {
#pragma omp parallel if (n >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share_blocks(n, ELEMENT_BLOCK, &first, &count);
    if (bf16_out)
      silu_mul_bf16_out((uint16_t*)out + first, gate + first, up + first, count);
    else
      silu_mul_f32((float*)out + first, gate + first, up + first, count);
  }
}

void adamw_f32_parallel(float* p, float* g, float* m, float* v, uint16_t* p16, size_t n, const AdamWStep* step) {
#pragma omp parallel if (n >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share_blocks(n, ELEMENT_BLOCK, &first, &count);
    adamw_f32(p + first, g + first, m + first, v + first, p16 ? p16 + first : NULL, count, step);
  }
}

bool rmsnorm_backward_f32_parallel(float* dx, float* dw, const float* dy, const float* x, const float* w,
                                   size_t rows, size_t dim, float eps, bool accumulate) {
  // dw sums over the rows in their order: split, it would depend on the team size.
  if (dw != NULL) return rmsnorm_backward_f32(dx, dw, dy, x, w, rows, dim, eps, accumulate);
  bool ok = true;
#pragma omp parallel if (rows * dim >= PARALLEL_MIN_ELEMENTS) reduction(&& : ok)
  {
    size_t first, count;
    thread_share(rows, &first, &count);
    size_t o = first * dim;
    ok = count == 0 || rmsnorm_backward_f32(dx + o, NULL, dy + o, x + o, w, count, dim, eps, accumulate);
  }
  return ok;
}

// dg and du are float32, or bf16 bits when bf16_out.
void silu_mul_backward_parallel(void* dg, void* du, bool bf16_out, const float* da, const float* gate,
                                const float* up, size_t n) {
#pragma omp parallel if (n >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share_blocks(n, ELEMENT_BLOCK, &first, &count);
    const float *das = da + first, *gates = gate + first, *ups = up + first;
    if (bf16_out)
      silu_mul_backward_bf16_out((uint16_t*)dg + first, (uint16_t*)du + first, das, gates, ups, count);
    else
      silu_mul_backward_f32((float*)dg + first, (float*)du + first, das, gates, ups, count);
  }
}

void logits_stats_f32_parallel(float* lse, float* entropy, const float* logits, size_t rows, size_t v) {
#pragma omp parallel if (rows * v >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share(rows, &first, &count);
    logits_stats_f32(lse + first, entropy + first, logits + first * v, count, v);
  }
}

void logits_backward_f32_parallel(float* logits, size_t rows, size_t v, const float* lse, const float* entropy,
                                  const float* g_sum, const float* g_entropy) {
#pragma omp parallel if (rows * v >= PARALLEL_MIN_ELEMENTS)
  {
    size_t first, count;
    thread_share(rows, &first, &count);
    logits_backward_f32(logits + first * v, count, v, lse + first, entropy + first, g_sum + first, g_entropy + first);
  }
}

// Elements per partial sum of sum_squares_f32_parallel: the partials are added in block order, so
// the sum does not depend on which thread computed which block.
#define SUM_BLOCK ((size_t)1 << 16)

bool sum_squares_f32_parallel(const float* x, size_t n, double* sum) {
  size_t blocks = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  if (blocks <= 1) {
    *sum = sum_squares_f32(x, n);
    return true;
  }
  double* partial = malloc(blocks * sizeof *partial);
  if (!partial) return false;
#pragma omp parallel
  {
    size_t first, count;
    thread_share(blocks, &first, &count);
    for (size_t b = first; b < first + count; b++) {
      size_t start = b * SUM_BLOCK;
      partial[b] = sum_squares_f32(x + start, n - start < SUM_BLOCK ? n - start : SUM_BLOCK);
    }
  }
  double total = 0;
  for (size_t b = 0; b < blocks; b++) total += partial[b];
  free(partial);
  *sum = total;
  return true;
}

