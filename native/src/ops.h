// The functions the addon exports, one per kernel in src/engine/local/kernels/kernels.ts, with
// the same argument order. Each validates its arguments (args.h) before computing.
#ifndef OPENCLAW_OPS_H
#define OPENCLAW_OPS_H

#include <node_api.h>

napi_value op_sgemm(napi_env env, napi_callback_info info);
napi_value op_sgemv(napi_env env, napi_callback_info info);
napi_value op_set_threads(napi_env env, napi_callback_info info);
napi_value op_gemm_bf16(napi_env env, napi_callback_info info);
napi_value op_pack_bf16(napi_env env, napi_callback_info info);
napi_value op_gemm_bf16_packed(napi_env env, napi_callback_info info);
napi_value op_to_bf16(napi_env env, napi_callback_info info);
napi_value op_advise_huge_pages(napi_env env, napi_callback_info info);
napi_value op_quantize_int8(napi_env env, napi_callback_info info);
napi_value op_dequantize_int8_bf16(napi_env env, napi_callback_info info);
napi_value op_gemm_int8(napi_env env, napi_callback_info info);
napi_value op_rmsnorm(napi_env env, napi_callback_info info);
napi_value op_silu_mul(napi_env env, napi_callback_info info);
napi_value op_rope(napi_env env, napi_callback_info info);
napi_value op_attention(napi_env env, napi_callback_info info);
napi_value op_attention_int8(napi_env env, napi_callback_info info);
napi_value op_adamw(napi_env env, napi_callback_info info);
napi_value op_sum_squares(napi_env env, napi_callback_info info);
napi_value op_tempered_weights(napi_env env, napi_callback_info info);
napi_value op_prefill_attention_bf16(napi_env env, napi_callback_info info);
napi_value op_rmsnorm_backward(napi_env env, napi_callback_info info);
napi_value op_silu_mul_backward(napi_env env, napi_callback_info info);
napi_value op_logits_stats(napi_env env, napi_callback_info info);
napi_value op_logits_backward(napi_env env, napi_callback_info info);
napi_value op_causal_softmax_rows(napi_env env, napi_callback_info info);
napi_value op_causal_softmax_backward_rows(napi_env env, napi_callback_info info);
napi_value op_attention_forward_bf16(napi_env env, napi_callback_info info);
napi_value op_attention_backward_bf16(napi_env env, napi_callback_info info);

#endif
