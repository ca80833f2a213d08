// Scratch buffers per thread for the kernels that run single-threaded matmuls on each member of an
// OpenMP team (train_attention.c, prefill_attention.c): kept between calls, since OpenMP's threads
// live as long as the process and reallocating them every layer cost page faults. Kernels that use
// them never nest, so they share the slots.
#ifndef OPENCLAW_THREAD_BUFFERS_H
#define OPENCLAW_THREAD_BUFFERS_H

#include <stddef.h>

#define THREAD_BUFFER_SLOTS 8

// At least `bytes` in slot `slot` (< THREAD_BUFFER_SLOTS) of the calling thread; NULL when out of
// memory. The contents are what the slot last held.
void* thread_buffer(int slot, size_t bytes);

// Frees the calling thread's buffers larger than `keep_bytes`.
void thread_buffers_trim(size_t keep_bytes);

#endif
