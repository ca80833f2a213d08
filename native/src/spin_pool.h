// A small thread pool for decode's matrix-vector products, whose helpers spin briefly between
// calls before they sleep (spin_pool.c).
#ifndef OPENCLAW_SPIN_POOL_H
#define OPENCLAW_SPIN_POOL_H

#include <stddef.h>

// One member's part of a call: member `me` of `team` (0 is the calling thread).
typedef void (*PoolTask)(void* ctx, size_t me, size_t team);

// Runs task(ctx, me, team) for every me in [0, team) and returns when all have returned. The team
// is the calling thread's OpenMP thread count (setThreads), or 1 where `work` is below
// PARALLEL_MIN_ELEMENTS, inside a parallel region, or in a build without OpenMP.
void pool_run(size_t work, PoolTask task, void* ctx);

// Stops the calling thread's helpers, if it has any: registered as an environment cleanup hook.
void pool_release(void* unused);

// Member `me` of `team`'s contiguous share [*first, *first + *count) of `total` items.
static inline void member_share(size_t total, size_t me, size_t team, size_t* first, size_t* count) {
  *first = total * me / team;
  *count = total * (me + 1) / team - *first;
}

#endif
