"""PyTorch CPU competitor for the training-throughput benchmark.

Usage: python3 bench/torch_train.py '{"model": DIR, "threads": 2, "seqLen": 512, "steps": 3,
                                       "lora": {"rank": 16, "alpha": 32} | null,
                                       "dtype": "float32", "seed": 0, "tuneMalloc": true,
                                       "autocast": null | "bf16", "gemmPeak": false}'
       (or the same JSON on stdin). Only "model" is required; lora defaults to null (full
       fine-tuning), dtype to float32 ("float64" is accepted for checks). autocast "bf16" runs
       forward and loss under torch.autocast('cpu', dtype=torch.bfloat16) (fp32 master weights
       and optimizer, as mixed-precision training does). gemmPeak: also time torch.matmul on
       square fp32 and bf16 matrices (1024, 2048) and report GFLOP/s.
Prints: {"trainTokPerS": seqLen / median step seconds, "stepSeconds": median, "peakRssMB": ...,
         "stepTimes": [...], "stepCpuUser"/"stepCpuSys": median CPU seconds per step,
         "trainableParams", "loadAvg1m" (machine load at the end), "openblasCore" (the core
         OpenBLAS chose, e.g. Haswell under OPENBLAS_CORETYPE=Haswell, Cooperlake on its own),
         "openblasConfig", "gemmPeakGflops" ({"fp32-1024": ..., ...} with gemmPeak), + the settings used}
Bad arguments or a failure: message on stderr, exit code 2.

One training step = forward over one sequence of seqLen random tokens whose last half is the
completion, the clipped policy-gradient loss on the completion tokens (ratio exp(lp - lp.detach()),
eps 0.2 / 0.28, random advantages, token mean), backward, global grad-norm clip to 1.0 and a
torch.optim.AdamW step (weight decay 0.1 on matrices, none on 1-D tensors). One warm-up step,
then the median of `steps` steps.

What makes it a decent rather than a strawman PyTorch implementation:
  - q|k|v and gate|up are fused into one matmul each (as fused leaf parameters for full
    fine-tuning, AdamW being elementwise that is the same optimisation problem);
  - GQA attention folds each kv head's query heads into rows, so K/V are never repeated;
  - logits (and the log-softmax) only for the completion positions;
  - with LoRA the base weights are frozen (requires_grad False: no weight gradients computed),
    the A matrices of q|k|v and of gate|up are applied as one matmul each; B starts small
    random rather than PEFT's zeros, which costs the same and keeps every gradient nontrivial;
  - glibc malloc keeps freed memory instead of unmapping it (tuneMalloc, default on; see setup_env);
  - thread env set before torch loads: Debian's torch uses pthread OpenBLAS, whose pool ignores
    torch.set_num_threads, and OMP_WAIT_POLICY=PASSIVE so idle OpenMP workers do not spin
    against OpenBLAS's (see bench/torch_engine.py).
"""

import json
import os
import resource
import sys
import time


def parse_args(text):
    a = json.loads(text)
    if not isinstance(a, dict) or not isinstance(a.get("model"), str):
        raise ValueError('need a JSON object with "model"')
    lora = a.get("lora")
    if lora is not None:
        if not isinstance(lora, dict) or int(lora.get("rank", 0)) < 1:
            raise ValueError('"lora" must be null or {"rank": r >= 1, "alpha": a}')
        lora = {"rank": int(lora["rank"]), "alpha": float(lora.get("alpha", 2 * int(lora["rank"])))}
    out = {"model": a["model"], "threads": int(a.get("threads", 2)), "seqLen": int(a.get("seqLen", 512)),
           "steps": int(a.get("steps", 3)), "lora": lora, "dtype": a.get("dtype", "float32"),
           "seed": int(a.get("seed", 0)), "tuneMalloc": bool(a.get("tuneMalloc", True)),
           "autocast": a.get("autocast"), "gemmPeak": bool(a.get("gemmPeak", False))}
    if out["autocast"] not in (None, "bf16"):
        raise ValueError('autocast must be null or "bf16"')
    if out["seqLen"] < 2 or out["steps"] < 1 or out["threads"] < 1:
        raise ValueError("seqLen must be >= 2, steps and threads >= 1")
    if out["dtype"] not in ("float32", "float64"):
        raise ValueError('dtype must be "float32" or "float64"')
    return out


def setup_env(a, text):
    """Thread and allocator settings, which only take effect at process start: set them and
    re-exec once (the JSON travels as argv[1], stdin having been read)."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(a["threads"])
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if a["tuneMalloc"]:
        # Every step allocates GBs of activations. glibc serves blocks > 32 MB by fresh mmap and
        # unmaps them on free, so each step page-faults them in again, and first touch of a page
        # is slow in this VM. Keeping freed memory in the heap (no mmap, no trim) cut the CPU
        # time of a LoRA r16 step on Qwen3-0.6B, seqLen 512, 2 threads, from 22.7 user + 6.8 sys
        # to 20.8 user + 4.1 sys seconds; THP via glibc.malloc.hugetlb=1 cut the page faults but
        # raised system time here. A PyTorch user tuning CPU training would do this (or preload
        # jemalloc/tcmalloc, which this machine lacks). tuneMalloc: false turns it off.
        tun = env.get("GLIBC_TUNABLES", "")
        if "glibc.malloc.mmap_max" not in tun:
            extra = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1000000000000"
            env["GLIBC_TUNABLES"] = (tun + ":" if tun else "") + extra
    if env.get("TORCH_TRAIN_BENCH_EXECED") != "1":
        env["TORCH_TRAIN_BENCH_EXECED"] = "1"
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), text], env)


if __name__ == "__main__":
    try:
        _TEXT = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()
        ARGS = parse_args(_TEXT)
    except (ValueError, TypeError) as e:
        print(f"torch_train.py: bad arguments: {e}", file=sys.stderr)
        sys.exit(2)
    setup_env(ARGS, _TEXT)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "reference"))
from hf_model import Config, load_weights, peft_lora_name, rope_cos_sin  # noqa: E402

EPS_LOW, EPS_HIGH = 0.2, 0.28


class TrainModel:
    """Fused-weight decoder for training; full fine-tuning (lora None) or LoRA on all 7 projections."""

    def __init__(self, folder, lora, dtype=torch.float32, seed=0):
        c = self.cfg = Config.from_folder(folder)
        self.dtype, self.lora = dtype, lora
        full = lora is None
        w = load_weights(folder, dtype)

        def leaf(t):
            return t.contiguous().requires_grad_(full)

        self.embed = leaf(w.pop("model.embed_tokens.weight"))
        head = w.pop("lm_head.weight", None)
        self.tied = c.tie or head is None
        self.head = self.embed if self.tied else leaf(head)
        self.norm = leaf(w.pop("model.norm.weight"))
        H, KV, D, I = c.heads, c.kv_heads, c.head_dim, c.intermediate
        self.split_qkv = [H * D, KV * D, KV * D]
        self.layers = []
        for i in range(c.layers):
            p = f"model.layers.{i}."
            get = lambda n: w.pop(p + n, None)  # noqa: E731  (pop: originals freed as we fuse)
            opt = lambda t: None if t is None else leaf(t)  # noqa: E731
            L = {"ln1": leaf(get("input_layernorm.weight")), "ln2": leaf(get("post_attention_layernorm.weight")),
                 "qkv": leaf(torch.cat([get(f"self_attn.{m}_proj.weight") for m in "qkv"])),
                 "qkv_b": (leaf(torch.cat([get(f"self_attn.{m}_proj.bias") for m in "qkv"]))
                           if c.qkv_bias else None),
                 "o": leaf(get("self_attn.o_proj.weight")), "o_b": opt(get("self_attn.o_proj.bias")),
                 "qn": opt(get("self_attn.q_norm.weight")), "kn": opt(get("self_attn.k_norm.weight")),
                 "gu": leaf(torch.cat([get("mlp.gate_proj.weight"), get("mlp.up_proj.weight")])),
                 "gu_b": (leaf(torch.cat([get("mlp.gate_proj.bias"), get("mlp.up_proj.bias")]))
                          if c.mlp_bias else None),
                 "down": leaf(get("mlp.down_proj.weight")), "down_b": opt(get("mlp.down_proj.bias"))}
            self.layers.append(L)
        del w
        self.scale_lora = 0.0
        if lora:
            r = lora["rank"]
            self.scale_lora = lora["alpha"] / r
            g = torch.Generator().manual_seed(seed)

            def a(n_in, k=1):  # k stacked A matrices [k*r, in], PEFT-like uniform init
                b = n_in ** -0.5
                return (torch.rand(k * r, n_in, generator=g, dtype=torch.float64) * 2 * b - b).to(dtype).requires_grad_(True)

            def bm(n_out):
                return (torch.randn(n_out, r, generator=g, dtype=torch.float64) * 0.01).to(dtype).requires_grad_(True)

            for L in self.layers:
                L["A_qkv"] = a(c.hidden, 3)
                L["B_q"], L["B_k"], L["B_v"] = bm(H * D), bm(KV * D), bm(KV * D)
                L["A_o"], L["B_o"] = a(H * D), bm(c.hidden)
                L["A_gu"] = a(c.hidden, 2)
                L["B_gate"], L["B_up"] = bm(I), bm(I)
                L["A_down"], L["B_down"] = a(I), bm(c.hidden)

    # -------------------------------------------------------------- forward

    def params(self):
        seen, out = set(), []
        for t in [self.embed, self.head, self.norm] + [v for L in self.layers for v in L.values()]:
            if t is not None and t.requires_grad and id(t) not in seen:
                seen.add(id(t))
                out.append(t)
        return out

    def _rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg.eps) * w

    @staticmethod
    def _rope(x, cos, sin):  # x [T, heads, D]; cos/sin [T, 1, D]
        h = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin

    def hidden(self, ids):
        c = self.cfg
        T, H, KV, D = ids.shape[0], c.heads, c.kv_heads, c.head_dim
        G, r, s = H // KV, (self.lora or {}).get("rank", 0), self.scale_lora
        cos, sin = rope_cos_sin(c, torch.arange(T), self.dtype)
        cos, sin = cos[:, None, :], sin[:, None, :]
        mask = torch.full((T, T), float("-inf"), dtype=self.dtype).triu(1)
        scale = D ** -0.5
        x = F.embedding(ids, self.embed)
        for L in self.layers:
            h = self._rms(x, L["ln1"])
            q, k, v = F.linear(h, L["qkv"], L["qkv_b"]).split(self.split_qkv, dim=-1)
            if r:
                uq, uk, uv = F.linear(h, L["A_qkv"]).split(r, dim=-1)
                q = q + s * F.linear(uq, L["B_q"])
                k = k + s * F.linear(uk, L["B_k"])
                v = v + s * F.linear(uv, L["B_v"])
            q, k, v = q.reshape(T, H, D), k.reshape(T, KV, D), v.reshape(T, KV, D)
            if L["qn"] is not None:
                q, k = self._rms(q, L["qn"]), self._rms(k, L["kn"])
            q = self._rope(q, cos, sin) * scale
            k = self._rope(k, cos, sin)
            # GQA without repeating K/V: each kv head's G query heads become G*T rows.
            qg = q.view(T, KV, G, D).permute(1, 2, 0, 3).reshape(KV, G * T, D)
            kt = k.permute(1, 2, 0)                                   # [KV, D, T]
            sc = (torch.matmul(qg, kt).view(KV, G, T, T) + mask).view(KV, G * T, T)
            o = torch.matmul(torch.softmax(sc, dim=-1), v.transpose(0, 1))  # [KV, G*T, D]
            o = o.view(KV, G, T, D).permute(2, 0, 1, 3).reshape(T, H * D)
            y = F.linear(o, L["o"], L["o_b"])
            if r:
                y = y + s * F.linear(F.linear(o, L["A_o"]), L["B_o"])
            x = x + y
            h = self._rms(x, L["ln2"])
            gate, up = F.linear(h, L["gu"], L["gu_b"]).chunk(2, dim=-1)
            if r:
                ug, uu = F.linear(h, L["A_gu"]).split(r, dim=-1)
                gate = gate + s * F.linear(ug, L["B_gate"])
                up = up + s * F.linear(uu, L["B_up"])
            m = F.silu(gate) * up
            y = F.linear(m, L["down"], L["down_b"])
            if r:
                y = y + s * F.linear(F.linear(m, L["A_down"]), L["B_down"])
            x = x + y
        return self._rms(x, self.norm)

    def loss(self, ids, P, adv):
        """Clipped policy loss on tokens ids[P:], on-policy ratio, token mean."""
        x = self.hidden(ids)[P - 1:-1]                 # completion positions only
        logp = torch.log_softmax(F.linear(x, self.head), dim=-1)
        lp = logp.gather(1, ids[P:, None])[:, 0]
        ratio = torch.exp(lp - lp.detach())
        pg = torch.maximum(-ratio * adv, -torch.clamp(ratio, 1 - EPS_LOW, 1 + EPS_HIGH) * adv)
        return pg.mean()

    # ------------------------------------------- names (for the reference check)

    def grads_by_name(self):
        """Gradients under HF names (full) or PEFT names (LoRA), fused tensors split back."""
        c, out = self.cfg, {}
        if self.lora is None:
            out["model.embed_tokens.weight"] = self.embed.grad
            if not self.tied:
                out["lm_head.weight"] = self.head.grad
            out["model.norm.weight"] = self.norm.grad
            for i, L in enumerate(self.layers):
                p = f"model.layers.{i}."
                out[p + "input_layernorm.weight"] = L["ln1"].grad
                out[p + "post_attention_layernorm.weight"] = L["ln2"].grad
                for m, g in zip("qkv", L["qkv"].grad.split(self.split_qkv)):
                    out[p + f"self_attn.{m}_proj.weight"] = g
                if L["qkv_b"] is not None:
                    for m, g in zip("qkv", L["qkv_b"].grad.split(self.split_qkv)):
                        out[p + f"self_attn.{m}_proj.bias"] = g
                out[p + "self_attn.o_proj.weight"] = L["o"].grad
                if L["o_b"] is not None:
                    out[p + "self_attn.o_proj.bias"] = L["o_b"].grad
                if L["qn"] is not None:
                    out[p + "self_attn.q_norm.weight"] = L["qn"].grad
                    out[p + "self_attn.k_norm.weight"] = L["kn"].grad
                for m, g in zip(("gate", "up"), L["gu"].grad.chunk(2)):
                    out[p + f"mlp.{m}_proj.weight"] = g
                if L["gu_b"] is not None:
                    for m, g in zip(("gate", "up"), L["gu_b"].grad.chunk(2)):
                        out[p + f"mlp.{m}_proj.bias"] = g
                out[p + "mlp.down_proj.weight"] = L["down"].grad
                if L["down_b"] is not None:
                    out[p + "mlp.down_proj.bias"] = L["down_b"].grad
            return out
        return self._peft(lambda t: t.grad)

    def peft_tensors(self):
        return self._peft(lambda t: t.detach())

    def _peft(self, f):
        r, out = self.lora["rank"], {}
        for i, L in enumerate(self.layers):
            for tg, a in zip(("q", "k", "v"), f(L["A_qkv"]).split(r)):
                out[peft_lora_name(i, tg, "A")] = a
            for tg, a in zip(("gate", "up"), f(L["A_gu"]).split(r)):
                out[peft_lora_name(i, tg, "A")] = a
            out[peft_lora_name(i, "o", "A")] = f(L["A_o"])
            out[peft_lora_name(i, "down", "A")] = f(L["A_down"])
            for tg in ("q", "k", "v", "o", "gate", "up", "down"):
                out[peft_lora_name(i, tg, "B")] = f(L["B_" + tg])
        return out


def median(xs):
    xs = sorted(xs)
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m])


def openblas_info():
    """The core and build string of the OpenBLAS torch loaded (libopenblas.so.0 is already in the
    process, so CDLL returns that copy); None where torch does not use OpenBLAS."""
    import ctypes
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        lib.openblas_get_config.restype = ctypes.c_char_p
        return lib.openblas_get_corename().decode(), lib.openblas_get_config().decode()
    except (OSError, AttributeError):
        return None, None


def gemm_peaks():
    """GFLOP/s of torch.matmul on square matrices, fp32 and bf16 (median of >= 3 calls over >= 1 s)."""
    out = {}
    for n in (1024, 2048):
        for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            a = torch.rand(n, n, dtype=torch.float32).to(dt)
            b = torch.rand(n, n, dtype=torch.float32).to(dt)
            torch.matmul(a, b)
            times, t_end = [], time.perf_counter() + 1.0
            while len(times) < 3 or time.perf_counter() < t_end:
                t0 = time.perf_counter()
                torch.matmul(a, b)
                times.append(time.perf_counter() - t0)
            out[f"{name}-{n}"] = 2 * n ** 3 / median(times) / 1e9
    return out


def bench(a):
    torch.set_num_threads(a["threads"])
    core, config = openblas_info()
    peaks = gemm_peaks() if a["gemmPeak"] else None
    dtype = torch.float32 if a["dtype"] == "float32" else torch.float64
    model = TrainModel(a["model"], a["lora"], dtype, seed=a["seed"])
    params = model.params()
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=1e-5, betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(a["seed"])
    T = a["seqLen"]
    P = T // 2
    ids = torch.randint(0, model.cfg.vocab, (T,), generator=g)
    adv = torch.randn(T - P, generator=g, dtype=torch.float64).to(dtype)

    def step():
        t0, c0 = time.perf_counter(), os.times()
        opt.zero_grad(set_to_none=True)
        if a["autocast"] == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model.loss(ids, P, adv)
        else:
            loss = model.loss(ids, P, adv)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        c1 = os.times()
        return time.perf_counter() - t0, c1.user - c0.user, c1.system - c0.system

    step()  # warm-up: allocator, BLAS threads, optimizer state
    runs = [step() for _ in range(a["steps"])]
    times = [r[0] for r in runs]
    med = median(times)
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: kilobytes
    # CPU seconds per step (user / system, all threads): with other load on the machine the wall
    # time stretches but these mostly do not, so they tell a busy machine from a slow step.
    return {"trainTokPerS": T / med, "stepSeconds": med, "peakRssMB": rss_kb / 1024.0,
            "stepTimes": times, "stepCpuUser": median([r[1] for r in runs]),
            "stepCpuSys": median([r[2] for r in runs]), "trainableParams": sum(p.numel() for p in params),
            "threads": a["threads"], "seqLen": T, "steps": a["steps"], "lora": a["lora"], "dtype": a["dtype"],
            "tuneMalloc": a["tuneMalloc"], "loadAvg1m": os.getloadavg()[0], "autocast": a["autocast"],
            "openblasCore": core, "openblasConfig": config, "gemmPeakGflops": peaks,
            "openblasEnv": {v: os.environ.get(v) for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}}


if __name__ == "__main__":
    try:
        res = bench(ARGS)
    except Exception as e:
        print(f"torch_train.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(res))
