// A small thread pool for decode's matrix-vector products, whose helpers spin briefly between
// calls before they sleep (spin_pool.c).
#ifndef OPENCLAW_SPIN_POOL_H
#define OPENCLAW_SPIN_POOL_H

#include <stddef.h>

// One member's part of a call: the items [first, first + count).
typedef void (*PoolTask)(void* ctx, size_t first, size_t count);

// Splits `items` into contiguous shares, one per member of the team (the calling thread does the
// first), runs task on each and returns when all have returned. The team is the calling thread's
// OpenMP thread count (setThreads), or 1 where `work` is below PARALLEL_MIN_ELEMENTS, inside a
// parallel region, or in a build without OpenMP.
void pool_run(size_t items, size_t work, PoolTask task, void* ctx);

// Stops the calling thread's helpers, if it has any: registered as an environment cleanup hook.
void pool_release(void* unused);

#endif
