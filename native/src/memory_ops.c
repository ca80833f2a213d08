// adviseHugePages(x): asks Linux to back x's memory with transparent huge pages (madvise
// MADV_HUGEPAGE over the whole 2 MiB pages inside it) before it is first written. For the
// learner's step buffers, gigabytes allocated at a step's first use: a first write then faults a
// 2 MiB page in at a time instead of 4 KiB, and the TLB covers more of what the kernels stream.
// Where the system's setting is `madvise` (Debian's default) nothing else asks for them; under
// `never` the advice is accepted and changes nothing. Returns whether the advice was taken.
#include <stdint.h>
#include <sys/mman.h>

#include "args.h"
#include "ops.h"

#define HUGE_PAGE ((uintptr_t)2 << 20)

napi_value op_advise_huge_pages(napi_env env, napi_callback_info info) {
  OpCall call;
  F32Array x;
  if (!op_begin(env, info, "adviseHugePages", 1, &call) || !op_f32_array(&call, 0, "x", &x)) return NULL;
  bool advised = false;
#ifdef MADV_HUGEPAGE
  const uintptr_t start = ((uintptr_t)x.data + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  const uintptr_t end = (uintptr_t)(x.data + x.length) & ~(HUGE_PAGE - 1);
  advised = end > start && madvise((void*)start, end - start, MADV_HUGEPAGE) == 0;
#endif
  napi_value result;
  return napi_get_boolean(env, advised, &result) == napi_ok ? result : NULL;
}
