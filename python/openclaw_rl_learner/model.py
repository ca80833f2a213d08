"""The decoder (Qwen3, Qwen2/2.5, Llama 3) as plain tensors keyed by Hugging Face names, with
optional LoRA adapters in the PEFT layout. The math follows the reference in test/reference/
(RMSNorm with eps inside the root, rotate-half RoPE with llama3 scaling, GQA, causal softmax)."""

import json
import math
import os

import torch
import torch.nn.functional as F

from . import st_io

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
MODULES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
           "gate": "mlp.gate_proj", "up": "mlp.up_proj", "down": "mlp.down_proj"}


class Config:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
        self.raw = c
        mt = c.get("model_type")
        if mt not in ("qwen3", "qwen2", "llama"):
            raise ValueError(f"{folder}: model_type {mt!r} is not one of qwen3, qwen2, llama")
        self.hidden, self.inter = int(c["hidden_size"]), int(c["intermediate_size"])
        self.layers, self.heads = int(c["num_hidden_layers"]), int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads") or self.heads)
        self.head_dim = int(c.get("head_dim") or self.hidden // self.heads)
        self.vocab, self.eps = int(c["vocab_size"]), float(c.get("rms_norm_eps", 1e-6))
        rp = c.get("rope_parameters") or {}
        self.theta = float(c.get("rope_theta", rp.get("rope_theta", 10000.0)))
        scaling = c.get("rope_scaling") or rp or {}
        self.llama3 = scaling if scaling.get("rope_type", scaling.get("type")) == "llama3" else None
        self.tie = bool(c.get("tie_word_embeddings", False))
        self.qk_norm = mt == "qwen3"

    def dims(self, target):
        """(in, out) of one projection."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {"q": (self.hidden, q), "k": (self.hidden, kv), "v": (self.hidden, kv), "o": (q, self.hidden),
                "gate": (self.hidden, self.inter), "up": (self.hidden, self.inter),
                "down": (self.inter, self.hidden)}[target]


def peft_name(layer, target, part):
    return f"base_model.model.model.layers.{layer}.{MODULES[target]}.lora_{part}.weight"


def rope_tables(cfg, n, device, dtype):
    d = cfg.head_dim
    inv = 1.0 / (cfg.theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    s = cfg.llama3
    if s is not None:
        factor, lo, hi = float(s["factor"]), float(s["low_freq_factor"]), float(s["high_freq_factor"])
        old = float(s["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        mid = (1 - smooth) * inv / factor + smooth * inv
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        inv = torch.where((wavelen >= old / hi) & (wavelen <= old / lo), mid, scaled)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().to(device, dtype), ang.sin().to(device, dtype)


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rotate(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Decoder:
    """weights: {HF name: tensor}; lora: {(layer, target): (A, B)} with scale alpha / rank."""

    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.weights = {k: v for k, v in weights.items() if not k.endswith("rotary_emb.inv_freq")}
        if cfg.tie:
            self.weights.pop("lm_head.weight", None)
        elif "lm_head.weight" not in self.weights:
            raise ValueError("the config unties the LM head but the weights have no lm_head.weight")
        self.lora, self.lora_scale = {}, 0.0

    def head(self):
        return self.weights.get("lm_head.weight", self.weights["model.embed_tokens.weight"])

    def _proj(self, layer, target, x, use_lora):
        name = f"model.layers.{layer}.{MODULES[target]}"
        y = F.linear(x, self.weights[name + ".weight"], self.weights.get(name + ".bias"))
        ab = self.lora.get((layer, target)) if use_lora else None
        if ab is not None:
            y = y + self.lora_scale * F.linear(F.linear(x, ab[0]), ab[1])
        return y

    def hidden(self, ids, use_lora=True):
        """ids [T] (long, on the device) -> final-normed hidden states [T, hidden]."""
        c, w = self.cfg, self.weights
        T = ids.shape[0]
        x = w["model.embed_tokens.weight"][ids]
        cos, sin = rope_tables(c, T, x.device, x.dtype)
        H, KV, D = c.heads, c.kv_heads, c.head_dim
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        for i in range(c.layers):
            pre = f"model.layers.{i}."
            h = _rms(x, w[pre + "input_layernorm.weight"], c.eps)
            q = self._proj(i, "q", h, use_lora).view(T, H, D)
            k = self._proj(i, "k", h, use_lora).view(T, KV, D)
            v = self._proj(i, "v", h, use_lora).view(T, KV, D)
            if c.qk_norm:
                q = _rms(q, w[pre + "self_attn.q_norm.weight"], c.eps)
                k = _rms(k, w[pre + "self_attn.k_norm.weight"], c.eps)
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
            q = q * cos + _rotate(q) * sin
            k = k * cos + _rotate(k) * sin
            k = k.repeat_interleave(H // KV, dim=0)
            v = v.repeat_interleave(H // KV, dim=0)
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D)
            a = torch.matmul(torch.softmax(s.masked_fill(future, float("-inf")), dim=-1), v)
            x = x + self._proj(i, "o", a.transpose(0, 1).reshape(T, H * D), use_lora)
            h = _rms(x, w[pre + "post_attention_layernorm.weight"], c.eps)
            x = x + self._proj(i, "down", F.silu(self._proj(i, "gate", h, use_lora)) * self._proj(i, "up", h, use_lora),
                               use_lora)
        return _rms(x, w["model.norm.weight"], c.eps)

    def completion_logp(self, tokens, prompt_len, use_lora=True):
        """Log-softmax [C, V] (float32) at the positions that predict the completion tokens."""
        h = self.hidden(tokens, use_lora)[prompt_len - 1:tokens.shape[0] - 1]
        return torch.log_softmax(torch.matmul(h, self.head().t()).float(), dim=-1)


def load(folder, device):
    cfg = Config(folder)
    return Decoder(cfg, {k: v.to(device) for k, v in st_io.load_folder(folder).items()})


def lora_tensors(cfg, spec, init_path, seed, device):
    """{PEFT name: tensor} for the adapter: from init_path (a PEFT adapter file) or a fresh PEFT-style
    init (A ~ U(+-1/sqrt(in)), B = 0) from `seed`."""
    names = [(l, t, p) for l in range(cfg.layers) for t in TARGETS if t in spec["targets"] for p in "AB"]
    if init_path and os.path.isdir(init_path):
        init_path = os.path.join(init_path, "adapter_model.safetensors")
    loaded = st_io.read(init_path) if init_path else None
    gen = torch.Generator().manual_seed(int(seed))
    out = {}
    for layer, target, part in names:
        i, o = cfg.dims(target)
        shape = (spec["rank"], i) if part == "A" else (o, spec["rank"])
        name = peft_name(layer, target, part)
        if loaded is not None:
            if name not in loaded or tuple(loaded[name].shape) != shape:
                raise ValueError(f"{init_path}: needs {name} of shape {list(shape)}")
            t = loaded[name].clone()
        elif part == "A":
            t = (torch.rand(shape, generator=gen) * 2 - 1) / math.sqrt(i)
        else:
            t = torch.zeros(shape)
        out[name] = t.to(device)
    return out


def attach_lora(model, tensors, spec):
    model.lora_scale = float(spec["alpha"]) / float(spec["rank"])
    model.lora = {}
    for layer in range(model.cfg.layers):
        for t in TARGETS:
            if t in spec["targets"]:
                model.lora[(layer, t)] = (tensors[peft_name(layer, t, "A")], tensors[peft_name(layer, t, "B")])
