// Entry point of the openclaw_native addon: the kernel table the TypeScript wrapper
// (src/engine/local/kernels/native.ts) binds to. The addon's only state is per thread (scratch
// buffers, cached oneDNN primitives) or fixed at load (the GEMM backend), so it can be loaded in
// any number of worker threads.
#include <node_api.h>

#include "gemm.h"
#include "ops.h"
#include "spin_pool.h"

// Bumped whenever an export changes meaning, so that a stale build is refused with a
// "rebuild" message instead of being called with the wrong arguments.
#define ADDON_API_VERSION 12

NAPI_MODULE_INIT() {
  napi_value version, gemm;
  const char* refusal = gemm_select_backend();
  if (refusal) {
    napi_throw_error(env, NULL, refusal);
    return NULL;
  }
  if (napi_create_uint32(env, ADDON_API_VERSION, &version) != napi_ok || !(gemm = gemm_info(env)) ||
      napi_add_env_cleanup_hook(env, pool_release, NULL) != napi_ok)
    return NULL;
  const napi_property_descriptor properties[] = {
      {"apiVersion", NULL, NULL, NULL, NULL, version, napi_enumerable, NULL},
      {"info", NULL, NULL, NULL, NULL, gemm, napi_enumerable, NULL},
      {"sgemm", NULL, op_sgemm, NULL, NULL, NULL, napi_enumerable, NULL},
      {"gemmBf16", NULL, op_gemm_bf16, NULL, NULL, NULL, napi_enumerable, NULL},
      {"packBf16", NULL, op_pack_bf16, NULL, NULL, NULL, napi_enumerable, NULL},
      {"gemmBf16Packed", NULL, op_gemm_bf16_packed, NULL, NULL, NULL, napi_enumerable, NULL},
      {"toBf16", NULL, op_to_bf16, NULL, NULL, NULL, napi_enumerable, NULL},
      {"adviseHugePages", NULL, op_advise_huge_pages, NULL, NULL, NULL, napi_enumerable, NULL},
      {"quantizeInt8", NULL, op_quantize_int8, NULL, NULL, NULL, napi_enumerable, NULL},
      {"dequantizeInt8Bf16", NULL, op_dequantize_int8_bf16, NULL, NULL, NULL, napi_enumerable, NULL},
      {"gemmInt8", NULL, op_gemm_int8, NULL, NULL, NULL, napi_enumerable, NULL},
      {"sgemv", NULL, op_sgemv, NULL, NULL, NULL, napi_enumerable, NULL},
      {"rmsnorm", NULL, op_rmsnorm, NULL, NULL, NULL, napi_enumerable, NULL},
      {"siluMul", NULL, op_silu_mul, NULL, NULL, NULL, napi_enumerable, NULL},
      {"rope", NULL, op_rope, NULL, NULL, NULL, napi_enumerable, NULL},
      {"attention", NULL, op_attention, NULL, NULL, NULL, napi_enumerable, NULL},
      {"attentionInt8", NULL, op_attention_int8, NULL, NULL, NULL, napi_enumerable, NULL},
      {"adamw", NULL, op_adamw, NULL, NULL, NULL, napi_enumerable, NULL},
      {"sumSquares", NULL, op_sum_squares, NULL, NULL, NULL, napi_enumerable, NULL},
      {"rmsnormBackward", NULL, op_rmsnorm_backward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"siluMulBackward", NULL, op_silu_mul_backward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"temperedWeights", NULL, op_tempered_weights, NULL, NULL, NULL, napi_enumerable, NULL},
      {"logitsStats", NULL, op_logits_stats, NULL, NULL, NULL, napi_enumerable, NULL},
      {"logitsBackward", NULL, op_logits_backward, NULL, NULL, NULL, napi_enumerable, NULL},
      {"causalSoftmaxRows", NULL, op_causal_softmax_rows, NULL, NULL, NULL, napi_enumerable, NULL},
      {"causalSoftmaxBackwardRows", NULL, op_causal_softmax_backward_rows, NULL, NULL, NULL, napi_enumerable, NULL},
      {"prefillAttentionBf16", NULL, op_prefill_attention_bf16, NULL, NULL, NULL, napi_enumerable, NULL},
      {"attentionForwardBf16", NULL, op_attention_forward_bf16, NULL, NULL, NULL, napi_enumerable, NULL},
      {"attentionBackwardBf16", NULL, op_attention_backward_bf16, NULL, NULL, NULL, napi_enumerable, NULL},
      {"setThreads", NULL, op_set_threads, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties) != napi_ok)
    return NULL;
  return exports;
}
