"""Independent plain-PyTorch reference for Hugging Face decoder folders.

Families: Qwen3, Qwen2/Qwen2.5 and Llama 3 (model_type qwen3, qwen2, llama).
Written from the architecture descriptions, not from the TypeScript engine, so
it can be used to check that engine's numerics. Computes in float64 by default.

Library surface:
  read_safetensors(path, dtype)            -> {name: tensor}
  write_safetensors(path, tensors, dtype)  -> writes one .safetensors file
  load_weights(folder, dtype)              -> {name: tensor} (single or sharded)
  Config.from_folder(folder) / Config(dict)
  Model(config, weights, dtype, requires_grad) with .forward(ids) -> logits
  load_model(folder, dtype=torch.float64, requires_grad=False)
  Model.hidden_states(ids) -> final-normed hidden states (forward = those @ lm_head^T)
  LoRA (PEFT layout): LORA_MODULES, peft_lora_name, lora_shapes, load_lora,
                      Model.set_lora(tensors, rank, alpha, targets)
"""

import json
import math
import os
import struct

import numpy as np
import torch

# ---------------------------------------------------------------- safetensors

# safetensors dtype tag -> (numpy storage dtype, bytes per element)
_ST_DTYPES = {
    "F64": (np.dtype("<f8"), 8),
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),  # no numpy bf16: read raw bits, widen below
}


def _as_tag(dtype):
    """Accept "F32"/"F16"/"BF16"/"F64" or the matching torch dtype."""
    if isinstance(dtype, str):
        tag = dtype.upper()
    else:
        tag = {torch.float32: "F32", torch.float16: "F16",
               torch.bfloat16: "BF16", torch.float64: "F64"}.get(dtype)
    if tag not in _ST_DTYPES:
        raise ValueError(f"unsupported safetensors dtype {dtype!r}")
    return tag


def read_safetensors_header(path):
    """Return (header dict without __metadata__, metadata, data start offset, file size)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", raw)  # u64 little-endian header length
        if n > size - 8 or n > 100 * 1024 * 1024:
            raise ValueError(f"{path}: bad header length {n}")
        header = json.loads(f.read(n).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    meta = header.pop("__metadata__", None)
    return header, meta, 8 + n, size


def _decode(buf, tag, shape, out_dtype):
    """Raw little-endian bytes (a bytearray) -> torch tensor of out_dtype (float32 or float64)."""
    np_dtype, _ = _ST_DTYPES[tag]
    a = np.frombuffer(buf, dtype=np_dtype)
    if tag == "BF16":
        # bf16 is the top half of an IEEE float32: widen the bits and reinterpret.
        a = a.astype(np.uint32)
        a <<= 16
        a = a.view(np.float32)
    np_out = np.float64 if out_dtype == torch.float64 else np.float32
    # copy=False: an F32 file read as float32 keeps the read buffer, no second copy.
    return torch.from_numpy(a.astype(np_out, copy=False).reshape(shape))


def read_safetensors(path, dtype=torch.float32, names=None):
    """Read every tensor (or only `names`) from one .safetensors file."""
    header, _, start, size = read_safetensors_header(path)
    out = {}
    # Plain reads, one tensor at a time: peak memory stays at the converted
    # tensors plus one raw buffer (an mmap would add the whole file to RSS).
    f = open(path, "rb")
    for name, info in header.items():
        if names is not None and name not in names:
            continue
        tag = info["dtype"]
        if tag not in _ST_DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {tag}")
        shape = [int(d) for d in info["shape"]]
        b, e = info["data_offsets"]
        want = int(np.prod(shape, dtype=np.int64)) * _ST_DTYPES[tag][1]
        if e - b != want or b < 0 or start + e > size:
            raise ValueError(f"{path}: tensor {name} has bad data_offsets {b},{e}")
        f.seek(start + b)
        buf = bytearray(e - b)  # writable, so the tensor may alias it
        if f.readinto(buf) != e - b:
            raise ValueError(f"{path}: file truncated in tensor {name}")
        out[name] = _decode(buf, tag, shape, dtype)
    f.close()
    return out


def _encode(t, tag):
    """torch tensor -> little-endian bytes in the safetensors dtype `tag`."""
    t = t.detach().cpu().contiguous()
    if tag == "BF16":
        # torch rounds to nearest-even when narrowing; keep those bits.
        bits = t.to(torch.float32).to(torch.bfloat16).view(torch.int16).numpy()
        return bits.astype("<i2").tobytes()
    tdt = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16}[tag]
    return t.to(tdt).numpy().astype(_ST_DTYPES[tag][0], copy=False).tobytes()


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    """Write {name: tensor} as one safetensors file, all tensors in `dtype`.

    Header is padded with spaces to a multiple of 8 so the data is aligned,
    as the reference writer does; `__metadata__` defaults to {"format": "pt"}
    because transformers' loader looks for it.
    """
    tag = _as_tag(dtype)
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        data = _encode(tensors[name], tag)
        header[name] = {"dtype": tag, "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    meta = {"format": "pt"} if metadata is None else dict(metadata)
    header["__metadata__"] = {str(k): str(v) for k, v in meta.items()}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for data in blobs:
            f.write(data)


def load_weights(folder, dtype=torch.float32):
    """All tensors of a model folder: model.safetensors or an index + shards."""
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        by_file = {}
        for name, fname in weight_map.items():
            by_file.setdefault(fname, set()).add(name)
        out = {}
        for fname, names in sorted(by_file.items()):
            part = read_safetensors(os.path.join(folder, fname), dtype, names)
            missing = names - part.keys()
            if missing:
                raise ValueError(f"{fname} lacks tensors the index maps to it: {sorted(missing)[:5]}")
            out.update(part)
        return out
    if os.path.exists(single):
        return read_safetensors(single, dtype)
    raise FileNotFoundError(f"{folder}: no model.safetensors or model.safetensors.index.json")


# --------------------------------------------------------------------- config

class Config:
    """The fields of config.json the forward needs, with the HF defaults."""

    def __init__(self, c):
        self.raw = c
        mt = c.get("model_type")
        if mt not in ("qwen3", "qwen2", "llama"):
            raise ValueError(f"unsupported model_type {mt!r}")
        arch = (c.get("architectures") or [None])[0]
        want = {"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM",
                "llama": "LlamaForCausalLM"}[mt]
        if arch is not None and arch != want:
            raise ValueError(f"model_type {mt} but architectures[0] is {arch}")
        if c.get("hidden_act", "silu") != "silu":
            raise ValueError(f"unsupported hidden_act {c.get('hidden_act')}")
        if c.get("use_sliding_window"):
            raise ValueError("use_sliding_window=true is not supported")
        self.model_type = mt
        self.hidden = int(c["hidden_size"])
        self.intermediate = int(c["intermediate_size"])
        self.layers = int(c["num_hidden_layers"])
        self.heads = int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads") or self.heads)
        if self.heads % self.kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        self.head_dim = int(c.get("head_dim") or self.hidden // self.heads)
        self.vocab = int(c["vocab_size"])
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        # transformers v5 moves rope_theta / rope_scaling into rope_parameters.
        rp = c.get("rope_parameters") or {}
        self.rope_theta = float(c.get("rope_theta", rp.get("rope_theta", 10000.0)))
        scaling = c.get("rope_scaling") or rp or None
        rtype = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
        if rtype not in ("default", "llama3"):
            raise ValueError(f"unsupported rope type {rtype!r}")
        self.rope_scaling = scaling if rtype == "llama3" else None
        self.tie = bool(c.get("tie_word_embeddings", False))
        # Bias layout differs per family (see HF modeling_*):
        #   qwen2: q,k,v always biased, o never; llama/qwen3: q,k,v,o all follow attention_bias.
        ab = bool(c.get("attention_bias", False))
        if mt == "qwen2":
            self.qkv_bias, self.o_bias = True, False
        else:
            self.qkv_bias, self.o_bias = ab, ab
        self.mlp_bias = mt == "llama" and bool(c.get("mlp_bias", False))
        self.qk_norm = mt == "qwen3"

    @staticmethod
    def from_folder(folder):
        with open(os.path.join(folder, "config.json")) as f:
            return Config(json.load(f))


def rope_inv_freq(cfg):
    """Inverse frequencies (float64), length head_dim/2, with llama3 scaling if configured."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    s = cfg.rope_scaling
    if s is None:
        return inv
    factor = float(s["factor"])
    lo, hi = float(s["low_freq_factor"]), float(s["high_freq_factor"])
    old = float(s["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    # long wavelengths (> old/lo) are slowed by `factor`, short ones (< old/hi) kept,
    # the band in between blends linearly in old/wavelen.
    smooth = (old / wavelen - lo) / (hi - lo)
    mid = (1 - smooth) * inv / factor + smooth * inv
    out = torch.where(wavelen > old / lo, inv / factor, inv)
    is_mid = (wavelen >= old / hi) & (wavelen <= old / lo)
    return torch.where(is_mid, mid, out)


def rope_cos_sin(cfg, positions, dtype=torch.float64):
    """cos/sin tables [T, head_dim] in the rotate-half layout (freqs repeated twice)."""
    ang = positions.to(torch.float64)[:, None] * rope_inv_freq(cfg)[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rms_norm(x, w, eps):
    # eps goes inside the sqrt, added to the mean of squares; weight multiplies after.
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# ----------------------------------------------------------------------- LoRA

# Short target name -> module path inside a decoder layer (HF and PEFT naming).
LORA_MODULES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
                "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
                "down": "mlp.down_proj"}


def peft_lora_name(layer, target, part):
    """PEFT tensor name, e.g. base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight."""
    if part not in ("A", "B"):
        raise ValueError(f"LoRA part must be 'A' or 'B', got {part!r}")
    return f"base_model.model.model.layers.{layer}.{LORA_MODULES[target]}.lora_{part}.weight"


def lora_shapes(cfg, target, rank):
    """((rank, in), (out, rank)): the shapes of A and B for one targeted projection."""
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    in_out = {"q": (cfg.hidden, q), "k": (cfg.hidden, kv), "v": (cfg.hidden, kv), "o": (q, cfg.hidden),
              "gate": (cfg.hidden, cfg.intermediate), "up": (cfg.hidden, cfg.intermediate),
              "down": (cfg.intermediate, cfg.hidden)}
    i, o = in_out[target]
    return (rank, i), (o, rank)


def lora_names(cfg, targets):
    """Every PEFT name an adapter over `targets` has, layer by layer."""
    return [peft_lora_name(l, t, part) for l in range(cfg.layers) for t in LORA_MODULES
            if t in targets for part in "AB"]


def load_lora(path, cfg, rank, targets, dtype=torch.float64):
    """Read a PEFT adapter file; it must hold exactly A and B of every targeted module."""
    bad = [t for t in targets if t not in LORA_MODULES]
    if bad or not targets:
        raise ValueError(f"LoRA targets must be a non-empty subset of {list(LORA_MODULES)}, got {targets}")
    t = read_safetensors(path, dtype)
    want = lora_names(cfg, targets)
    missing, extra = set(want) - t.keys(), t.keys() - set(want)
    if missing or extra:
        raise ValueError(f"{path}: adapter mismatch: missing {sorted(missing)[:4]}, unexpected {sorted(extra)[:4]}")
    for l in range(cfg.layers):
        for tg in targets:
            for part, shape in zip("AB", lora_shapes(cfg, tg, rank)):
                n = peft_lora_name(l, tg, part)
                if tuple(t[n].shape) != shape:
                    raise ValueError(f"{n} has shape {tuple(t[n].shape)}, rank {rank} implies {shape}")
    return t


# ---------------------------------------------------------------------- model

class Model:
    """KV-free decoder forward; params are plain tensors keyed by HF names."""

    def __init__(self, cfg, weights, dtype=torch.float64, requires_grad=False):
        self.cfg, self.dtype = cfg, dtype
        p = {k: v.to(dtype) for k, v in weights.items()
             if not k.endswith("rotary_emb.inv_freq")}  # old llama dumps carry a buffer
        if "lm_head.weight" not in p or cfg.tie:
            p.pop("lm_head.weight", None)
        self._check(p)
        for t in p.values():
            t.requires_grad_(requires_grad)
        self.params = p
        self.lora = {}  # "model.layers.{i}.self_attn.q_proj" -> (A [r, in], B [out, r])
        # Every matrix product (projections, adapters, attention); train_step.py swaps in one
        # that rounds its inputs to bf16, for the bf16 trainer's check.
        self.mm = torch.matmul
        self.lora_scale = 0.0

    def set_lora(self, tensors, rank, alpha, targets):
        """Attach adapters keyed by PEFT name (see load_lora); the tensors are used as given,
        so gradients reach them if they require grad. Each targeted projection then computes
        x W^T (+ b) + (alpha / rank) * (x A^T) B^T."""
        self.lora, self.lora_scale = {}, float(alpha) / float(rank)
        for l in range(self.cfg.layers):
            for tg in targets:
                self.lora[f"model.layers.{l}.{LORA_MODULES[tg]}"] = (
                    tensors[peft_lora_name(l, tg, "A")], tensors[peft_lora_name(l, tg, "B")])

    def _proj(self, module, x):
        """One projection by its HF module path, with its bias and LoRA adapter if present."""
        p = self.params
        y = self._linear(x, p[module + ".weight"], p.get(module + ".bias"))
        ab = self.lora.get(module)
        if ab is not None:
            y = y + self.lora_scale * self._linear(self._linear(x, ab[0]), ab[1])
        return y

    def _linear(self, x, w, b=None):
        if self.mm is torch.matmul:
            return torch.nn.functional.linear(x, w, b)
        y = self.mm(x, w.t())
        return y if b is None else y + b

    def _expected(self):
        c, names = self.cfg, ["model.embed_tokens.weight", "model.norm.weight"]
        for i in range(c.layers):
            pre = f"model.layers.{i}."
            names += [pre + "input_layernorm.weight", pre + "post_attention_layernorm.weight"]
            for m in "qkvo":
                names.append(pre + f"self_attn.{m}_proj.weight")
                if (c.qkv_bias and m != "o") or (c.o_bias and m == "o"):
                    names.append(pre + f"self_attn.{m}_proj.bias")
            if c.qk_norm:
                names += [pre + "self_attn.q_norm.weight", pre + "self_attn.k_norm.weight"]
            for m in ("gate", "up", "down"):
                names.append(pre + f"mlp.{m}_proj.weight")
                if c.mlp_bias:
                    names.append(pre + f"mlp.{m}_proj.bias")
        return names

    def _check(self, p):
        exp = self._expected()
        if "lm_head.weight" in p:
            exp.append("lm_head.weight")
        missing, extra = set(exp) - p.keys(), p.keys() - set(exp)
        if missing or extra:
            raise ValueError(f"weights mismatch: missing {sorted(missing)[:6]}, unexpected {sorted(extra)[:6]}")
        c = self.cfg
        shapes = {"model.embed_tokens.weight": (c.vocab, c.hidden),
                  "model.layers.0.self_attn.q_proj.weight": (c.heads * c.head_dim, c.hidden),
                  "model.layers.0.self_attn.k_proj.weight": (c.kv_heads * c.head_dim, c.hidden),
                  "model.layers.0.self_attn.o_proj.weight": (c.hidden, c.heads * c.head_dim),
                  "model.layers.0.mlp.gate_proj.weight": (c.intermediate, c.hidden),
                  "model.layers.0.mlp.down_proj.weight": (c.hidden, c.intermediate)}
        for k, s in shapes.items():
            if k in p and tuple(p[k].shape) != s:
                raise ValueError(f"{k} has shape {tuple(p[k].shape)}, config implies {s}")

    def parameters(self):
        return list(self.params.values())

    def lm_head(self):
        return self.params.get("lm_head.weight", self.params["model.embed_tokens.weight"])

    def hidden_states(self, ids, positions=None):
        """ids: [T] or [B, T] ints -> final RMS-normed hidden states [T, hidden] or [B, T, hidden]."""
        c, p = self.cfg, self.params
        ids = torch.as_tensor(ids, dtype=torch.long)
        squeeze = ids.dim() == 1
        if squeeze:
            ids = ids[None]
        B, T = ids.shape
        if positions is None:
            positions = torch.arange(T)
        cos, sin = rope_cos_sin(c, positions, self.dtype)
        H, KV, D = c.heads, c.kv_heads, c.head_dim
        # True above the diagonal: key j > query i is in the future and masked.
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        x = p["model.embed_tokens.weight"][ids]
        for i in range(c.layers):
            pre = f"model.layers.{i}."
            g = lambda n: p.get(pre + n)  # noqa: E731  (None for absent biases)
            h = rms_norm(x, g("input_layernorm.weight"), c.eps)
            q = self._proj(pre + "self_attn.q_proj", h)
            k = self._proj(pre + "self_attn.k_proj", h)
            v = self._proj(pre + "self_attn.v_proj", h)
            q = q.view(B, T, H, D)
            k = k.view(B, T, KV, D)
            v = v.view(B, T, KV, D)
            if c.qk_norm:  # Qwen3: per-head RMSNorm over head_dim, before RoPE
                q = rms_norm(q, g("self_attn.q_norm.weight"), c.eps)
                k = rms_norm(k, g("self_attn.k_norm.weight"), c.eps)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, heads, T, D]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            # GQA: query head j reads kv head j // (H // KV).
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            s = self.mm(q, k.transpose(-1, -2)) / math.sqrt(D)
            s = s.masked_fill(future, float("-inf"))
            a = self.mm(torch.softmax(s, dim=-1), v)
            a = a.transpose(1, 2).reshape(B, T, H * D)
            x = x + self._proj(pre + "self_attn.o_proj", a)
            h = rms_norm(x, g("post_attention_layernorm.weight"), c.eps)
            gate = self._proj(pre + "mlp.gate_proj", h)
            up = self._proj(pre + "mlp.up_proj", h)
            x = x + self._proj(pre + "mlp.down_proj", torch.nn.functional.silu(gate) * up)
        x = rms_norm(x, p["model.norm.weight"], c.eps)
        return x[0] if squeeze else x

    def forward(self, ids, positions=None):
        """ids: [T] or [B, T] ints -> logits [T, V] or [B, T, V] in self.dtype.

        Full causal attention over the given tokens, no cache, no padding.
        Differentiable w.r.t. self.params (and attached LoRA tensors).
        """
        return torch.matmul(self.hidden_states(ids, positions), self.lm_head().t())

    __call__ = forward


def load_model(folder, dtype=torch.float64, requires_grad=False):
    cfg = Config.from_folder(folder)
    return Model(cfg, load_weights(folder, dtype), dtype, requires_grad)
