"""PyTorch CPU float32 competitor for the engine benchmarks.

Usage: python3 bench/torch_engine.py '{"model": DIR, "threads": 2, "promptLen": 128,
                                        "decodeTokens": 32, "runs": 5, "seed": 0}'
       (or the same JSON on stdin). Only "model" is required.
Prints: {"prefillTokPerS": ..., "decodeTokPerS": ..., "peakRssMB": ..., + the settings used}

Prefill = one forward over promptLen random prompt tokens (logits of the last
position only, as a generator needs). Decode = decodeTokens greedy steps, batch 1,
against a preallocated KV cache. One warm-up, then the median of `runs` runs.
Weights are fused (qkv, gate|up) once at load; that is what a decent hand-written
PyTorch engine would do, so the comparison is fair rather than a strawman.
"""

import json
import os
import resource
import sys
import time


def parse_args():
    text = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
    a = json.loads(text)
    if not isinstance(a, dict) or not isinstance(a.get("model"), str):
        raise ValueError('need a JSON object with "model"')
    return {"model": a["model"], "threads": int(a.get("threads", 2)),
            "promptLen": int(a.get("promptLen", 128)), "decodeTokens": int(a.get("decodeTokens", 32)),
            "runs": int(a.get("runs", 5)), "seed": int(a.get("seed", 0))}


if __name__ == "__main__":
    try:
        ARGS = parse_args()
    except (ValueError, TypeError) as e:
        print(f"torch_engine.py: bad arguments: {e}", file=sys.stderr)
        sys.exit(2)
    # Debian's torch uses pthread OpenBLAS, whose pool ignores torch.set_num_threads;
    # these must be set before torch (and so OpenBLAS) is loaded.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS["threads"])
    # Two pools (OpenMP for elementwise ops, OpenBLAS's own for matmuls) share the
    # cores; spinning OpenMP workers starve OpenBLAS (measured 2-3x slower here).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "reference"))
from hf_model import Config, load_weights, rope_cos_sin  # noqa: E402


class Engine:
    def __init__(self, folder, max_len):
        c = self.cfg = Config.from_folder(folder)
        w = load_weights(folder, torch.float32)
        self.embed = w["model.embed_tokens.weight"]
        self.lm_head = self.embed if c.tie or "lm_head.weight" not in w else w["lm_head.weight"]
        self.norm = w["model.norm.weight"]
        self.layers = []
        for i in range(c.layers):
            p = f"model.layers.{i}."
            get = lambda n: w.pop(p + n, None)  # noqa: E731  (pop: originals freed as we fuse)
            qkv_b = None
            if c.qkv_bias:
                qkv_b = torch.cat([get(f"self_attn.{m}_proj.bias") for m in "qkv"])
            self.layers.append({
                "ln1": get("input_layernorm.weight"), "ln2": get("post_attention_layernorm.weight"),
                "qkv": torch.cat([get(f"self_attn.{m}_proj.weight") for m in "qkv"]).contiguous(),
                "qkv_b": qkv_b,
                "o": get("self_attn.o_proj.weight"), "o_b": get("self_attn.o_proj.bias"),
                "qn": get("self_attn.q_norm.weight"), "kn": get("self_attn.k_norm.weight"),
                "gu": torch.cat([get("mlp.gate_proj.weight"), get("mlp.up_proj.weight")]).contiguous(),
                "gu_b": (torch.cat([get("mlp.gate_proj.bias"), get("mlp.up_proj.bias")])
                         if c.mlp_bias else None),
                "down": get("mlp.down_proj.weight"), "down_b": get("mlp.down_proj.bias"),
            })
        del w
        self.max_len = max_len
        self.cos, self.sin = rope_cos_sin(c, torch.arange(max_len), torch.float32)
        # Preallocated cache: [layer][kv_head, position, head_dim], batch 1.
        shape = (c.layers, c.kv_heads, max_len, c.head_dim)
        self.k_cache = torch.zeros(shape)
        self.v_cache = torch.zeros(shape)
        self.scale = c.head_dim ** -0.5

    @staticmethod
    def _linear(x, w, b=None):
        # One row (decode): gemv streams the weight once; OpenBLAS's gemm path for
        # m=1 reaches only a fraction of memory bandwidth.
        if x.shape[0] == 1:
            y = torch.mv(w, x[0])[None]
            return y if b is None else y + b
        return F.linear(x, w, b)

    def _rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.eps) * w

    @staticmethod
    def _rope(x, cos, sin):  # x [T, heads, D]; cos/sin [T, 1, D]
        h = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin

    def step(self, ids, pos, all_logits=False):
        """Feed ids [T] at positions pos..pos+T-1; returns logits of the last (or every) position."""
        c = self.cfg
        T, H, KV, D = ids.shape[0], c.heads, c.kv_heads, c.head_dim
        G, end = H // KV, pos + T
        cos, sin = self.cos[pos:end, None, :], self.sin[pos:end, None, :]
        mask = None
        if T > 1:  # queries see cached keys plus themselves and earlier new tokens
            mask = torch.full((T, end), float("-inf")).triu(pos + 1)
        x = self.embed[ids]
        for li, L in enumerate(self.layers):
            h = self._rms(x, L["ln1"])
            qkv = self._linear(h, L["qkv"], L["qkv_b"])
            q, k, v = qkv.split([H * D, KV * D, KV * D], dim=-1)
            q, k, v = q.view(T, H, D), k.view(T, KV, D), v.view(T, KV, D)
            if L["qn"] is not None:
                q, k = self._rms(q, L["qn"]), self._rms(k, L["kn"])
            q = self._rope(q, cos, sin) * self.scale
            k = self._rope(k, cos, sin)
            self.k_cache[li, :, pos:end] = k.transpose(0, 1)
            self.v_cache[li, :, pos:end] = v.transpose(0, 1)
            K, V = self.k_cache[li, :, :end], self.v_cache[li, :, :end]  # [KV, S, D] views
            # GQA without copying K/V: fold each kv head's G query heads into rows.
            qg = q.view(T, KV, G, D).permute(1, 2, 0, 3).reshape(KV, G * T, D)
            s = torch.matmul(qg, K.transpose(1, 2))  # [KV, G*T, S]
            if mask is not None:
                s = (s.view(KV, G, T, end) + mask).view(KV, G * T, end)
            o = torch.matmul(torch.softmax(s, dim=-1), V)  # [KV, G*T, D]
            o = o.view(KV, G, T, D).permute(2, 0, 1, 3).reshape(T, H * D)
            x = x + self._linear(o, L["o"], L["o_b"])
            h = self._rms(x, L["ln2"])
            gate, up = self._linear(h, L["gu"], L["gu_b"]).chunk(2, dim=-1)
            x = x + self._linear(F.silu(gate) * up, L["down"], L["down_b"])
        if not all_logits:
            x = x[-1:]
        return self._linear(self._rms(x, self.norm), self.lm_head)

    def generate(self, prompt, n):
        """Greedy: returns (prefill seconds, decode seconds, generated ids)."""
        t0 = time.perf_counter()
        tok = int(self.step(prompt, 0)[-1].argmax())
        t1 = time.perf_counter()
        out, pos = [tok], prompt.shape[0]
        for _ in range(n):
            tok = int(self.step(torch.tensor([tok]), pos)[-1].argmax())
            out.append(tok)
            pos += 1
        return t1 - t0, time.perf_counter() - t1, out


def median(xs):
    xs = sorted(xs)
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m])


def bench(a):
    torch.set_num_threads(a["threads"])
    P, N = a["promptLen"], a["decodeTokens"]
    if P < 1 or N < 1 or a["runs"] < 1:
        raise ValueError("promptLen, decodeTokens and runs must be >= 1")
    with torch.inference_mode():
        eng = Engine(a["model"], P + N + 1)
        g = torch.Generator().manual_seed(a["seed"])
        prompt = torch.randint(0, eng.cfg.vocab, (P,), generator=g)
        eng.generate(prompt, min(N, 4))  # warm-up: allocator, BLAS threads, caches
        pre, dec = [], []
        for _ in range(a["runs"]):
            tp, td, _ = eng.generate(prompt, N)
            pre.append(P / tp)
            dec.append(N / td)
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: kilobytes
    return {"prefillTokPerS": median(pre), "decodeTokPerS": median(dec), "peakRssMB": rss_kb / 1024.0,
            "threads": a["threads"], "promptLen": P, "decodeTokens": N, "runs": a["runs"]}


if __name__ == "__main__":
    try:
        res = bench(ARGS)
    except Exception as e:
        print(f"torch_engine.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(res))
