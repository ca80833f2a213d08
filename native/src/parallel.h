// Splitting a loop over the threads of an OpenMP parallel region. The pragmas only take effect in
// a oneDNN build (-fopenmp, binding.gyp), where they share oneDNN's threads; elsewhere the region
// is one thread doing everything.
#ifndef OPENCLAW_PARALLEL_H
#define OPENCLAW_PARALLEL_H

#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
#endif

// Below this many elements, one thread streams the data faster than a parallel region starts.
#define PARALLEL_MIN_ELEMENTS ((size_t)1 << 16)

// This thread's contiguous share [*first, *first + *count) of `total` items, inside a region.
static inline void thread_share(size_t total, size_t* first, size_t* count) {
  *first = 0;
  *count = total;
#ifdef _OPENMP
  size_t teams = (size_t)omp_get_num_threads(), me = (size_t)omp_get_thread_num();
  *first = total * me / teams;
  *count = total * (me + 1) / teams - *first;
#endif
}

// The same in whole blocks of `block` items (the last share ends at total), so that an elementwise
// loop's vector body covers the same elements, and computes the same values, whatever the team size.
static inline void thread_share_blocks(size_t total, size_t block, size_t* first, size_t* count) {
  size_t blocks = (total + block - 1) / block, first_block, block_count;
  thread_share(blocks, &first_block, &block_count);
  size_t end = (first_block + block_count) * block;
  *first = first_block * block < total ? first_block * block : total;
  *count = (end < total ? end : total) - *first;
}

#endif
