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

#endif
