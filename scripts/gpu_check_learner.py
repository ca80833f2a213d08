"""The PyTorch learner on one CUDA GPU (run by scripts/gpu-check-learner.sh): at the Qwen3-0.6B and
1.7B shapes (random weights), LoRA r16 and full fine-tuning, it reports train tokens/s (bf16
autocast where the GPU has it) and peak GPU memory, and checks one fp32 step's parameter update
against the same step on the CPU. Prints one JSON line per case and exits 1 if any check fails."""

import argparse
import json
import math
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from openclaw_rl_learner import st_io  # noqa: E402
from openclaw_rl_learner.learner import Learner  # noqa: E402
from openclaw_rl_learner.model import TARGETS  # noqa: E402

SHAPES = {
    "tiny": dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=512),
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=151936),
    "qwen3-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, vocab_size=151936),
}


def make_model(shape, out):
    c = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_act": "silu", "rms_norm_eps": 1e-6,
         "rope_theta": 1000000.0, "tie_word_embeddings": True, "max_position_embeddings": 40960, **SHAPES[shape]}
    g = torch.Generator().manual_seed(0)
    D, F, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    w = {"model.embed_tokens.weight": (c["vocab_size"], D), "model.norm.weight": (D,)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": (D,), p + "post_attention_layernorm.weight": (D,),
                  p + "self_attn.q_proj.weight": (q, D), p + "self_attn.k_proj.weight": (kv, D),
                  p + "self_attn.v_proj.weight": (kv, D), p + "self_attn.o_proj.weight": (D, q),
                  p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,),
                  p + "mlp.gate_proj.weight": (F, D), p + "mlp.up_proj.weight": (F, D),
                  p + "mlp.down_proj.weight": (D, F)})
    tensors = {k: torch.ones(s) if len(s) == 1 else torch.randn(s, generator=g) * 0.02 for k, s in w.items()}
    os.makedirs(out, exist_ok=True)
    st_io.write(os.path.join(out, "model.safetensors"), tensors)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f)
    return out


def config(model_dir, lora, precision):
    return {"modelDir": model_dir, "precision": precision, "seed": 0, "initAdapter": None,
            "mode": {"kind": "lora", "spec": {"rank": 16, "alpha": 32, "targets": list(TARGETS)}}
            if lora else {"kind": "full"},
            # eps 1e-3 keeps the first Adam step proportional to the gradient, so it can be compared.
            "optimizer": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.98, "eps": 1e-3, "weightDecay": 0.1, "warmupSteps": 0,
                          "maxGradNorm": 1.0},
            "loss": {"kind": "policy", "eps": 0.2, "epsHigh": 0.28, "tisCap": 2.0, "klCoef": 0.0, "entropyCoef": 0.0},
            "miniBatchSize": 64, "epochs": 1, "microBatchTokens": 8192}


def batch(vocab, n, prompt, completion, seed):
    g = torch.Generator().manual_seed(seed)
    ids = lambda k: torch.randint(0, vocab, (k,), generator=g).tolist()  # noqa: E731
    return [{"promptIds": ids(prompt), "completionIds": ids(completion),
             "advantages": [1.0 if i % 2 else -1.0] * completion,
             "rolloutLogprobs": [-math.log(vocab)] * completion} for i in range(n)]


def one_step_update(model_dir, lora, device, samples):
    cfg = config(model_dir, lora, "fp32")
    learner = Learner(cfg, torch.device(device), 0, 1)
    before = {k: v.detach().float().cpu().clone() for k, v in learner.trainable.items()}
    learner.train_batch([dict(s) for s in samples])
    after = {k: v.detach().float().cpu() for k, v in learner.trainable.items()}
    del learner
    return {k: after[k] - before[k] for k in before}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--shapes", default="qwen3-0.6b,qwen3-1.7b")
    ap.add_argument("--modes", default="lora,full")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="gpu-check-learner-")
    cuda = args.device == "cuda"
    bf16 = cuda and torch.cuda.is_bf16_supported()
    failed = False
    for shape in args.shapes.split(","):
        model_dir = make_model(shape, os.path.join(work, shape))
        vocab = SHAPES[shape]["vocab_size"]
        for mode in args.modes.split(","):
            lora = mode == "lora"
            # Throughput: 8 sequences of 512 + 512 tokens, one optimizer step (anchor pass included).
            cfg = config(model_dir, lora, "auto")
            cfg["bf16"] = bf16
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            learner = Learner(cfg, torch.device(args.device), 0, 1)
            big = batch(vocab, 8, 512, 512, 1)
            learner.train_batch([dict(s) for s in big])  # warm-up
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            learner.train_batch([dict(s) for s in big])
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
            peak = torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else None
            del learner
            if cuda:
                torch.cuda.empty_cache()
            # Agreement: one fp32 step on the device and on the CPU, same small batch.
            small = batch(vocab, 2, 64, 64, 2)
            dev = one_step_update(model_dir, lora, args.device, small)
            cpu = one_step_update(model_dir, lora, "cpu", small)
            scale = max(float(u.abs().max()) for u in cpu.values())
            diff = max(float((dev[k] - cpu[k]).abs().max()) for k in cpu)
            ok = scale > 0 and diff <= 1e-2 * scale
            failed |= not ok
            print(json.dumps({"shape": shape, "mode": mode, "device": args.device, "bf16": bf16,
                              "trainTokensPerSecond": round(8 * 1024 / seconds, 1), "batchSeconds": round(seconds, 3),
                              "peakGpuMemoryGiB": None if peak is None else round(peak, 2),
                              "updateMaxAbs": scale, "updateMaxDiffVsCpu": diff, "ok": ok}), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
