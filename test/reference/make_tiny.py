"""Write a tiny random Hugging Face model folder (config.json + safetensors).

Usage:
  python3 make_tiny.py OUT_DIR [--family qwen3|qwen2|llama] [--dtype F32|F16|BF16]
      [--shards 1|2] [--seed N] [--tie] [--layers N] [--hidden N] [--heads N]
      [--kv-heads N] [--head-dim N] [--intermediate N] [--vocab N]
      [--attention-bias] [--no-rope-scaling]

Defaults give a ~2-layer model with GQA; llama gets llama3 rope_scaling with a
small original_max_position_embeddings so every scaling branch is exercised at
tiny head_dim. Weights are drawn large enough that logits are far from uniform.
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_model import write_safetensors  # noqa: E402

ARCH = {"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}


def tiny_config(family="qwen3", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=None,
                intermediate=128, vocab=97, tie=False, attention_bias=False, rope_scaling=True):
    c = {
        "architectures": [ARCH[family]],
        "model_type": family,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "vocab_size": vocab,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6 if family != "llama" else 1e-5,
        "rope_theta": 1000000.0 if family == "qwen3" else (500000.0 if family == "llama" else 10000.0),
        "tie_word_embeddings": tie,
        "hidden_act": "silu",
        "torch_dtype": "float32",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    if family == "qwen3":
        # Qwen3 states head_dim explicitly and it need not equal hidden/heads.
        c["head_dim"] = head_dim or 2 * hidden // heads
        c["attention_bias"] = attention_bias
    elif family == "llama":
        c["head_dim"] = head_dim or hidden // heads
        c["attention_bias"] = attention_bias
        c["mlp_bias"] = False
        c["rope_scaling"] = ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
                             if rope_scaling else None)
    else:
        c["use_sliding_window"] = False
        if head_dim:
            c["head_dim"] = head_dim
    return c


def tiny_weights(c, seed=0):
    """Random weights named as HF does, scaled ~1/sqrt(fan_in) so activations stay O(1)."""
    g = torch.Generator().manual_seed(seed)
    H, KV, hid, inter, V = (c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"],
                            c["intermediate_size"], c["vocab_size"])
    D = c.get("head_dim") or hid // H
    fam = c["model_type"]

    def rnd(*shape, scale=1.0):
        return torch.randn(*shape, generator=g) * scale

    def lin(o, i):
        return rnd(o, i, scale=1.5 / i ** 0.5)

    def norm(n):
        return 1.0 + rnd(n, scale=0.2)

    w = {"model.embed_tokens.weight": rnd(V, hid), "model.norm.weight": norm(hid)}
    qkv_bias = fam == "qwen2" or c.get("attention_bias", False)
    o_bias = fam != "qwen2" and c.get("attention_bias", False)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(hid)
        w[p + "post_attention_layernorm.weight"] = norm(hid)
        w[p + "self_attn.q_proj.weight"] = lin(H * D, hid)
        w[p + "self_attn.k_proj.weight"] = lin(KV * D, hid)
        w[p + "self_attn.v_proj.weight"] = lin(KV * D, hid)
        w[p + "self_attn.o_proj.weight"] = lin(hid, H * D)
        if qkv_bias:
            w[p + "self_attn.q_proj.bias"] = rnd(H * D, scale=0.5)
            w[p + "self_attn.k_proj.bias"] = rnd(KV * D, scale=0.5)
            w[p + "self_attn.v_proj.bias"] = rnd(KV * D, scale=0.5)
        if o_bias:
            w[p + "self_attn.o_proj.bias"] = rnd(hid, scale=0.5)
        if fam == "qwen3":
            w[p + "self_attn.q_norm.weight"] = norm(D)
            w[p + "self_attn.k_norm.weight"] = norm(D)
        w[p + "mlp.gate_proj.weight"] = lin(inter, hid)
        w[p + "mlp.up_proj.weight"] = lin(inter, hid)
        w[p + "mlp.down_proj.weight"] = lin(hid, inter)
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = lin(V, hid)
    return w


def write_folder(out, config, weights, dtype="F32", shards=1):
    """config.json + model.safetensors, or two shards + model.safetensors.index.json."""
    os.makedirs(out, exist_ok=True)
    config = dict(config, torch_dtype={"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    names = sorted(weights)
    if shards == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), weights, dtype)
        return
    if shards != 2:
        raise ValueError("shards must be 1 or 2")
    half = (len(names) + 1) // 2
    parts = [names[:half], names[half:]]
    weight_map, total = {}, 0
    for k, part in enumerate(parts):
        fname = f"model-{k + 1:05d}-of-00002.safetensors"
        write_safetensors(os.path.join(out, fname), {n: weights[n] for n in part}, dtype)
        for n in part:
            weight_map[n] = fname
            total += weights[n].numel() * (4 if dtype == "F32" else 2)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def make_tiny(out, family="qwen3", dtype="F32", shards=1, seed=0, **cfg_kw):
    c = tiny_config(family, **cfg_kw)
    w = tiny_weights(c, seed)
    write_folder(out, c, w, dtype, shards)
    return c, w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--family", default="qwen3", choices=sorted(ARCH))
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--shards", type=int, default=1, choices=[1, 2])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tie", action="store_true")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=None)
    ap.add_argument("--intermediate", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=97)
    ap.add_argument("--attention-bias", action="store_true")
    ap.add_argument("--no-rope-scaling", action="store_true")
    a = ap.parse_args()
    make_tiny(a.out, a.family, a.dtype, a.shards, a.seed, layers=a.layers, hidden=a.hidden,
              heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim, intermediate=a.intermediate,
              vocab=a.vocab, tie=a.tie, attention_bias=a.attention_bias,
              rope_scaling=not a.no_rope_scaling)
    print(a.out)


if __name__ == "__main__":
    main()
