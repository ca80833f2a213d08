#include "thread_buffers.h"

#include <stdlib.h>

typedef struct {
  void* data;
  size_t bytes;
} Buffer;

static __thread Buffer buffers[THREAD_BUFFER_SLOTS];

void* thread_buffer(int slot, size_t bytes) {
  Buffer* b = &buffers[slot];
  if (bytes > b->bytes) {
    void* grown = realloc(b->data, bytes);
    if (!grown) return NULL;
    b->data = grown;
    b->bytes = bytes;
  }
  return b->data;
}

void thread_buffers_trim(size_t keep_bytes) {
  for (int slot = 0; slot < THREAD_BUFFER_SLOTS; slot++)
    if (buffers[slot].bytes > keep_bytes) {
      free(buffers[slot].data);
      buffers[slot].data = NULL;
      buffers[slot].bytes = 0;
    }
}
