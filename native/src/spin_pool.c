// Decode's matrix-vector products on a pool whose helpers spin for a short while after each call.
//
// Why not OpenMP: a decode step is about 200 products of a few hundred microseconds each, with
// the model's other (single-threaded) work between them. Serving keeps OpenMP's idle threads
// passive (openmp_env.c: a learner and a sampler share the cores), so every parallel region
// started with a futex wake of its sleeping thread: 30-75 us a region on the 2-vCPU VM,
// a third of int8 decode's time (docs/cpu-performance.md). libgomp's spin count is one setting
// for the whole process, and it cuts any spin to 100 rounds once a second OpenMP team (the
// learner's) exists. This pool's helpers spin for SPIN_NS after each call, whatever else runs,
// so the products of one step find them awake, and sleep once decoding pauses.
//
// One pool per calling thread (a worker's sampler, a test's main thread), created on first use
// and stopped when that thread's JS environment is torn down.
#include "spin_pool.h"

#include "parallel.h"

#ifndef _OPENMP

void pool_run(size_t items, size_t work, PoolTask task, void* ctx) {
  (void)work;
  task(ctx, 0, items);
}

void pool_release(void* unused) { (void)unused; }

#else

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

// How long an idle helper spins before it sleeps: longer than the gaps between the products of
// one decode step, short enough that a paused sampler gives its core back at once.
#define SPIN_NS 50000LL
// How long the caller spins for its helpers before it sleeps until the last one is done (a helper
// that was asleep, or one waiting for a core that a learner's threads hold).
#define CALLER_SPIN_NS 50000LL
#define MAX_HELPERS 63

typedef struct Pool Pool;

typedef struct {
  Pool* pool;
  size_t me;
  // The generation when it was created: it runs the calls after that one.
  uint64_t born;
  pthread_t thread;
} Helper;

struct Pool {
  // Bumped (seq_cst) to hand the helpers a call; they run it when they see it change.
  atomic_uint_fast64_t generation;
  // Helpers that have not finished the current call.
  atomic_size_t pending;
  // Helpers asleep, or about to sleep, on `wake` (seq_cst, with generation: see dispatch).
  atomic_int sleepers;
  // The caller asleep, or about to sleep, on `done` (seq_cst, with pending: see wait_for_helpers).
  atomic_bool caller_sleeps;
  atomic_bool stop;
  PoolTask task;
  void* ctx;
  size_t items, team;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_cond_t done;
  size_t n_helpers;
  Helper helpers[MAX_HELPERS];
};

// This thread's pool. Stopped by pool_release (an environment cleanup hook, addon.c) before the
// thread's JS environment goes, so that no helper is left in the addon's code when Node unloads it.
static __thread Pool* this_pool;

// Member `me` of the team runs its contiguous share of the call's items.
static void run_share(const Pool* p, size_t me) {
  const size_t first = p->items * me / p->team;
  p->task(p->ctx, first, p->items * (me + 1) / p->team - first);
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

// Waits for the generation to move past `seen`: spins for SPIN_NS, then sleeps on the condition.
static uint64_t wait_for_call(Pool* p, uint64_t seen) {
  const int64_t until = now_ns() + SPIN_NS;
  for (unsigned spins = 0;; spins++) {
    uint64_t g = atomic_load_explicit(&p->generation, memory_order_acquire);
    if (g != seen) return g;
    CPU_RELAX();
    if ((spins & 63) == 63 && now_ns() > until) break;
  }
  pthread_mutex_lock(&p->lock);
  atomic_fetch_add(&p->sleepers, 1);
  uint64_t g;
  while ((g = atomic_load(&p->generation)) == seen) pthread_cond_wait(&p->wake, &p->lock);
  atomic_fetch_sub(&p->sleepers, 1);
  pthread_mutex_unlock(&p->lock);
  return g;
}

static void* helper_main(void* arg) {
  Helper* h = arg;
  Pool* p = h->pool;
  uint64_t seen = h->born;
  for (;;) {
    seen = wait_for_call(p, seen);
    if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
    if (h->me < p->team) run_share(p, h->me);
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeps)) {
      pthread_mutex_lock(&p->lock);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->lock);
    }
  }
}

// Hands every helper the current task and returns once all of them are done with it.
static void dispatch(Pool* p) {
  atomic_store_explicit(&p->pending, p->n_helpers, memory_order_relaxed);
  atomic_fetch_add(&p->generation, 1);
  // A helper going to sleep counts itself in `sleepers` before it checks the generation again
  // under the lock; both sides are seq_cst, so either it sees the new generation or we see it.
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->lock);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
  }
}

static void wait_for_helpers(Pool* p) {
  const int64_t until = now_ns() + CALLER_SPIN_NS;
  for (unsigned spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
    CPU_RELAX();
    if ((spins & 63) == 63 && now_ns() > until) break;
  }
  if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
  // The last helper signals once it sees caller_sleeps; both sides are seq_cst, so either it sees
  // the flag or we see pending at 0.
  pthread_mutex_lock(&p->lock);
  atomic_store(&p->caller_sleeps, true);
  while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->lock);
  atomic_store(&p->caller_sleeps, false);
  pthread_mutex_unlock(&p->lock);
}

static void pool_destroy(void* arg) {
  Pool* p = arg;
  atomic_store_explicit(&p->stop, true, memory_order_release);
  dispatch(p);
  for (size_t i = 0; i < p->n_helpers; i++) pthread_join(p->helpers[i].thread, NULL);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  free(p);
}

void pool_release(void* unused) {
  (void)unused;
  if (!this_pool) return;
  pool_destroy(this_pool);
  this_pool = NULL;
}

// This thread's pool with at least `helpers` helpers, or NULL where threads cannot be had.
static Pool* pool_with(size_t helpers) {
  Pool* p = this_pool;
  if (!p) {
    p = calloc(1, sizeof(Pool));
    if (!p) return NULL;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    this_pool = p;
  }
  while (p->n_helpers < helpers) {
    Helper* h = &p->helpers[p->n_helpers];
    h->pool = p;
    h->me = p->n_helpers + 1;
    h->born = atomic_load(&p->generation);
    if (pthread_create(&h->thread, NULL, helper_main, h) != 0) break;
    p->n_helpers++;
  }
  return p->n_helpers >= helpers ? p : NULL;
}

void pool_run(size_t items, size_t work, PoolTask task, void* ctx) {
  size_t team = work >= PARALLEL_MIN_ELEMENTS && !omp_in_parallel() ? (size_t)omp_get_max_threads() : 1;
  if (team > MAX_HELPERS + 1) team = MAX_HELPERS + 1;
  Pool* p = team > 1 ? pool_with(team - 1) : NULL;
  if (!p) {
    task(ctx, 0, items);
    return;
  }
  p->task = task;
  p->ctx = ctx;
  p->items = items;
  p->team = team;
  dispatch(p);
  run_share(p, 0);
  wait_for_helpers(p);
}

#endif
