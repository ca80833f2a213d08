"""Self-checks for the reference: run with /usr/bin/python3 test/reference/selftest.py

Exits non-zero on the first failure. Uses only temp folders.
"""

import atexit
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import hf_model as hm  # noqa: E402
from make_tiny import make_tiny, tiny_config, tiny_weights, write_folder  # noqa: E402

TMP = tempfile.mkdtemp(prefix="hfref-")
atexit.register(shutil.rmtree, TMP, True)
FAMILIES = ("qwen3", "qwen2", "llama")
PASSED = []


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test(fn):
    fn()
    PASSED.append(fn.__name__)
    print(f"ok  {fn.__name__}", flush=True)
    return fn


def folder(name, family, **kw):
    out = os.path.join(TMP, name)
    if not os.path.exists(os.path.join(out, "config.json")):
        make_tiny(out, family, **kw)
    return out


def maxdiff(a, b):
    return float((torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)).abs().max())


# ------------------------------------------------------------- safetensors

@test
def safetensors_round_trip():
    g = torch.Generator().manual_seed(1)
    ts = {"a.weight": torch.randn(7, 5, generator=g) * 100, "b": torch.randn(3, generator=g),
          "scalar": torch.tensor(3.25), "empty": torch.zeros(0, 4), "c.d.e": torch.randn(2, 3, 4, generator=g),
          "special": torch.tensor([0.0, -0.0, 1.0, -2.5, 65504.0, 1e-8, float("inf"), 3.4e38])}
    for tag, tdt in (("F32", torch.float32), ("F16", torch.float16), ("BF16", torch.bfloat16), ("F64", torch.float64)):
        p = os.path.join(TMP, f"rt-{tag}.safetensors")
        hm.write_safetensors(p, ts, tag, metadata={"format": "pt", "note": "x"})
        header, meta, start, size = hm.read_safetensors_header(p)
        check(meta == {"format": "pt", "note": "x"}, "metadata round trip")
        check(start % 8 == 0, "data start aligned to 8")
        ends = sorted(tuple(v["data_offsets"]) for v in header.values())
        check(ends[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:])), "offsets contiguous")
        check(start + ends[-1][1] == size, "no trailing bytes")
        back = hm.read_safetensors(p, torch.float32)
        check(back.keys() == ts.keys(), f"{tag}: names")
        for k, t in ts.items():
            want = t.to(tdt).to(torch.float32)  # what narrowing to the file dtype must give
            check(tuple(back[k].shape) == tuple(t.shape), f"{tag} {k}: shape")
            check(torch.equal(back[k], want), f"{tag} {k}: values {back[k]} vs {want}")
    # Known bit patterns, read with struct, independent of the reader.
    p = os.path.join(TMP, "bits.safetensors")
    hm.write_safetensors(p, {"x": torch.tensor([1.0, -2.5, 3.140625])}, "BF16")
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        check(hdr["x"] == {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}, "bf16 header")
        check(struct.unpack("<3H", f.read(6)) == (0x3F80, 0xC020, 0x4049), "bf16 bits")
    check(torch.equal(hm.read_safetensors(p)["x"], torch.tensor([1.0, -2.5, 3.140625])), "bf16 decode")
    # Reading F16 as float64 directly
    hm.write_safetensors(p, {"x": torch.tensor([0.1])}, "F16")
    check(hm.read_safetensors(p, torch.float64)["x"].item() == float(np.float16(0.1)), "f16 -> f64")


@test
def sharded_loading_matches_single():
    for fam in FAMILIES:
        for dt in ("F32", "F16", "BF16"):
            one = folder(f"shard1-{fam}-{dt}", fam, dtype=dt, seed=3)
            two = folder(f"shard2-{fam}-{dt}", fam, dtype=dt, seed=3, shards=2)
            check(os.path.exists(os.path.join(two, "model.safetensors.index.json")), "index written")
            check(not os.path.exists(os.path.join(two, "model.safetensors")), "no single file when sharded")
            a, b = hm.load_weights(one), hm.load_weights(two)
            check(a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"{fam} {dt}: shards")
            ids = [3, 1, 4, 1, 5, 9, 2, 6]
            la, lb = hm.load_model(one)(ids), hm.load_model(two)(ids)
            check(torch.equal(la, lb), f"{fam} {dt}: logits from shards")


@test
def missing_or_unexpected_weights_fail():
    c = tiny_config("qwen2", layers=1)
    w = tiny_weights(c)
    del w["model.layers.0.self_attn.q_proj.bias"]  # qwen2 always has q/k/v bias
    try:
        hm.Model(hm.Config(c), w)
        check(False, "missing qwen2 bias should raise")
    except ValueError:
        pass
    c = tiny_config("llama", layers=1)
    w = tiny_weights(c)
    w["model.layers.0.self_attn.q_proj.bias"] = torch.zeros(c["hidden_size"])  # attention_bias is false
    try:
        hm.Model(hm.Config(c), w)
        check(False, "unexpected llama bias should raise")
    except ValueError:
        pass


# --------------------------------------------------------- forward properties

@test
def causal_property():
    for fam in FAMILIES:
        m = hm.load_model(folder(f"m-{fam}", fam))
        a = [5, 17, 3, 88, 42, 7, 60, 1, 33, 12]
        with torch.no_grad():
            la = m(a)
            for t in (0, 3, 8):
                b = a[:t + 1] + [(x * 7 + 11) % m.cfg.vocab for x in a[t + 1:]]
                lb = m(b)
                check(maxdiff(la[:t + 1], lb[:t + 1]) < 1e-12, f"{fam}: logits <= {t} changed")
                if t + 1 < len(a):
                    check(maxdiff(la[t + 1:], lb[t + 1:]) > 1e-6, f"{fam}: later logits should change")


@test
def batch_invariance():
    for fam in FAMILIES:
        m = hm.load_model(folder(f"m-{fam}", fam))
        seqs = torch.tensor([[5, 17, 3, 88, 42, 7], [1, 2, 3, 4, 5, 6], [90, 80, 70, 60, 50, 40]])
        with torch.no_grad():
            batched = m(seqs)
            for i in range(3):
                check(maxdiff(batched[i], m(seqs[i])) < 1e-12, f"{fam}: batch row {i}")


@test
def float32_close_to_float64():
    for fam in FAMILIES:
        f = folder(f"m-{fam}", fam)
        ids = list(range(0, 97, 5))
        with torch.no_grad():
            d = maxdiff(hm.load_model(f, torch.float32)(ids), hm.load_model(f, torch.float64)(ids))
        check(d < 1e-4, f"{fam}: f32 vs f64 {d}")


@test
def qwen3_qk_norm_is_applied():
    c = tiny_config("qwen3")
    w = tiny_weights(c)
    ids = [3, 14, 15, 92, 65]
    base = hm.Model(hm.Config(c), w)(ids).detach()
    for n in ("q_norm", "k_norm"):
        w2 = dict(w)
        key = f"model.layers.1.self_attn.{n}.weight"
        w2[key] = w[key] * torch.linspace(0.5, 2.0, w[key].numel())
        check(maxdiff(hm.Model(hm.Config(c), w2)(ids), base) > 1e-3, f"{n} has no effect")
    # A uniform scale of q_norm changes logits too (it scales the attention scores),
    # which guards against a norm implemented without its weight.
    w2 = dict(w)
    w2["model.layers.0.self_attn.q_norm.weight"] = w["model.layers.0.self_attn.q_norm.weight"] * 3
    check(maxdiff(hm.Model(hm.Config(c), w2)(ids), base) > 1e-3, "q_norm weight ignored")


def hand_inv_freq(c):
    """Llama3 scaled inverse frequencies, element by element with explicit branches."""
    D = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    out, branches = [], set()
    s = c.get("rope_scaling")
    for i in range(D // 2):
        f = c["rope_theta"] ** (-(2.0 * i) / D)
        if s:
            wl = 2 * math.pi / f
            low_wl = s["original_max_position_embeddings"] / s["low_freq_factor"]
            high_wl = s["original_max_position_embeddings"] / s["high_freq_factor"]
            if wl < high_wl:
                branches.add("high")
            elif wl > low_wl:
                f, _ = f / s["factor"], branches.add("low")
            else:
                sm = (s["original_max_position_embeddings"] / wl - s["low_freq_factor"]) / (
                    s["high_freq_factor"] - s["low_freq_factor"])
                f, _ = (1 - sm) * f / s["factor"] + sm * f, branches.add("mid")
        out.append(f)
    return np.array(out), branches


@test
def llama3_rope_scaling_is_applied():
    c = tiny_config("llama")
    inv, branches = hand_inv_freq(c)
    check(branches == {"high", "mid", "low"}, f"tiny config should hit all branches: {branches}")
    check(np.abs(hm.rope_inv_freq(hm.Config(c)).numpy() - inv).max() < 1e-15, "inv_freq formula")
    w = tiny_weights(c)
    ids = list(range(1, 40))
    base = hm.Model(hm.Config(c), w)(ids).detach()
    for change in ({"factor": 2.0}, None, {"rope_type": None, "type": "llama3"}):
        c2 = json.loads(json.dumps(c))
        if change is None:
            c2["rope_scaling"] = None
        else:
            c2["rope_scaling"].update(change)
            if c2["rope_scaling"].get("rope_type", 0) is None:
                del c2["rope_scaling"]["rope_type"]
        d = maxdiff(hm.Model(hm.Config(c2), w)(ids), base)
        if change and "type" in change:
            check(d == 0.0, "legacy 'type' key must mean the same as rope_type")
        else:
            check(d > 1e-3, f"rope scaling change {change} had no effect")
    # Position 0 is unrotated whatever the scaling.
    cos, sin = hm.rope_cos_sin(hm.Config(c), torch.arange(3))
    check(torch.equal(cos[0], torch.ones_like(cos[0])) and torch.equal(sin[0], torch.zeros_like(sin[0])), "pos 0")


# ------------------------------------------------------- independent numpy check

def numpy_forward(c, w, ids):
    """By-hand float64 forward: explicit loops over tokens and heads, explicit pair rotation."""
    fam = c["model_type"]
    H, KV, hid = c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"]
    D = c.get("head_dim") or hid // H
    eps = c["rms_norm_eps"]
    W = {k: v.double().numpy() for k, v in w.items()}
    inv, _ = hand_inv_freq(c)

    def rms(v, g):
        return v / np.sqrt(np.mean(v * v) + eps) * g

    def rot(v, pos):
        r = v.copy()
        for i in range(D // 2):
            a, b, ang = v[i], v[i + D // 2], pos * inv[i]
            r[i] = a * math.cos(ang) - b * math.sin(ang)
            r[i + D // 2] = b * math.cos(ang) + a * math.sin(ang)
        return r

    T = len(ids)
    x = np.stack([W["model.embed_tokens.weight"][t] for t in ids])
    for li in range(c["num_hidden_layers"]):
        p = f"model.layers.{li}."
        bias = lambda n: W.get(p + n, np.zeros(1))  # noqa: E731
        h = np.stack([rms(x[t], W[p + "input_layernorm.weight"]) for t in range(T)])
        Q = h @ W[p + "self_attn.q_proj.weight"].T + bias("self_attn.q_proj.bias")
        K = h @ W[p + "self_attn.k_proj.weight"].T + bias("self_attn.k_proj.bias")
        V = h @ W[p + "self_attn.v_proj.weight"].T + bias("self_attn.v_proj.bias")
        att = np.zeros((T, H * D))
        for hh in range(H):
            kvh = hh // (H // KV)
            qs, ks = [], []
            for t in range(T):
                q, k = Q[t, hh * D:(hh + 1) * D], K[t, kvh * D:(kvh + 1) * D]
                if fam == "qwen3":
                    q = rms(q, W[p + "self_attn.q_norm.weight"])
                    k = rms(k, W[p + "self_attn.k_norm.weight"])
                qs.append(rot(q, t))
                ks.append(rot(k, t))
            for t in range(T):
                sc = np.array([qs[t] @ ks[j] / math.sqrt(D) for j in range(t + 1)])
                e = np.exp(sc - sc.max())
                pr = e / e.sum()
                att[t, hh * D:(hh + 1) * D] = sum(pr[j] * V[j, kvh * D:(kvh + 1) * D] for j in range(t + 1))
        x = x + att @ W[p + "self_attn.o_proj.weight"].T + bias("self_attn.o_proj.bias")
        h = np.stack([rms(x[t], W[p + "post_attention_layernorm.weight"]) for t in range(T)])
        gt = h @ W[p + "mlp.gate_proj.weight"].T
        up = h @ W[p + "mlp.up_proj.weight"].T
        x = x + ((gt / (1 + np.exp(-gt))) * up) @ W[p + "mlp.down_proj.weight"].T
    x = np.stack([rms(x[t], W["model.norm.weight"]) for t in range(T)])
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return x @ head.T


@test
def one_layer_matches_numpy_by_hand():
    cases = [("qwen3", {}), ("qwen3", {"attention_bias": True, "tie": True, "kv_heads": 1}),
             ("qwen2", {}), ("qwen2", {"tie": True, "kv_heads": 4}),
             ("llama", {}), ("llama", {"attention_bias": True, "tie": True}),
             ("llama", {"rope_scaling": False})]
    ids = [7, 3, 91, 3, 50, 22, 64, 10, 0, 96, 45, 45]
    for n, (fam, kw) in enumerate(cases):
        out = os.path.join(TMP, f"hand-{n}")
        c, w = make_tiny(out, fam, layers=1, seed=10 + n, **kw)
        ref = numpy_forward(c, w, ids)
        got = hm.load_model(out)(ids).detach().numpy()
        d = np.abs(ref - got).max()
        check(d < 1e-10 * max(1.0, np.abs(ref).max()), f"{fam} {kw}: numpy vs torch {d}")
    # 2 layers too, one per family
    for fam in FAMILIES:
        out = os.path.join(TMP, f"hand2-{fam}")
        c, w = make_tiny(out, fam, layers=2, seed=5)
        d = np.abs(numpy_forward(c, w, ids) - hm.load_model(out)(ids).detach().numpy()).max()
        check(d < 1e-10, f"{fam} 2 layers: {d}")


@test
def autograd_matches_finite_difference():
    c = tiny_config("qwen3", layers=1, tie=True)
    m = hm.Model(hm.Config(c), tiny_weights(c), requires_grad=True)
    ids = torch.tensor([4, 8, 15, 16, 23, 42])

    def loss():
        lp = torch.log_softmax(m(ids), -1)
        return lp[:-1].gather(1, ids[1:, None]).sum()

    loss().backward()
    check(all(p.grad is not None for p in m.parameters()), "every param gets a grad")
    g = torch.Generator().manual_seed(0)
    dirs = {k: torch.randn(v.shape, generator=g, dtype=torch.float64) for k, v in m.params.items()}
    analytic = sum(float((m.params[k].grad * d).sum()) for k, d in dirs.items())
    eps = 1e-6
    with torch.no_grad():
        for k, d in dirs.items():
            m.params[k] += eps * d
        up = float(loss())
        for k, d in dirs.items():
            m.params[k] -= 2 * eps * d
        down = float(loss())
    fd = (up - down) / (2 * eps)
    check(abs(fd - analytic) < 1e-6 * max(1.0, abs(fd)), f"grad {analytic} vs finite diff {fd}")


# ------------------------------------------------------------------ CLI + bench

def run_cli(req):
    p = subprocess.run([sys.executable, os.path.join(HERE, "logprobs.py")], input=json.dumps(req),
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


@test
def logprobs_cli():
    f = folder("m-llama", "llama")
    seqs = [[5, 17, 3, 88, 42], [9], [1, 1, 1]]
    rc, out, err = run_cli({"model": f, "sequences": seqs, "top": 4, "lastLogits": True})
    check(rc == 0, f"cli failed: {err}")
    r = json.loads(out)
    m = hm.load_model(f)
    for i, s in enumerate(seqs):
        lp = torch.log_softmax(m(s), -1).detach()
        check(len(r["logprobs"][i]) == len(s) - 1, "len-1 entries")
        for t in range(1, len(s)):
            check(abs(r["logprobs"][i][t - 1] - float(lp[t - 1, s[t]])) < 1e-12, "logprob value")
        check(len(r["topIds"][i]) == len(s) and all(len(x) == 4 for x in r["topIds"][i]), "top shape")
        for j in range(len(s)):
            vals = r["topLogprobs"][i][j]
            check(vals == sorted(vals, reverse=True), "top sorted")
            check(abs(vals[0] - float(lp[j].max())) < 1e-12, "top-1 is max")
            check(all(abs(float(lp[j, k]) - v) < 1e-12 for k, v in zip(r["topIds"][i][j], vals)), "top ids")
        check(len(r["lastLogits"][i]) == m.cfg.vocab, "lastLogits length")
        check(abs(math.log(sum(math.exp(v) for v in r["lastLogprobs"][i]))) < 1e-12, "lastLogprobs normalised")
    check(set(r) == {"logprobs", "topIds", "topLogprobs", "lastLogits", "lastLogprobs"}, "keys")
    rc, out, _ = run_cli({"model": f, "sequences": seqs})
    check(rc == 0 and set(json.loads(out)) == {"logprobs"}, "plain output has only logprobs")
    rc32, out32, _ = run_cli({"model": f, "sequences": seqs, "dtype": "float32"})
    check(rc32 == 0 and maxdiff(json.loads(out32)["logprobs"][0], r["logprobs"][0]) < 1e-4, "float32 cli")
    for bad in ({"model": f, "sequences": [[1, 2, 97]]}, {"model": f, "sequences": [[]]},
                {"model": f, "sequences": "x"}, {"model": f + "/nope", "sequences": [[1]]},
                {"model": f, "sequences": [[1]], "dtype": "float16"}, {"model": f, "sequences": [[1]], "top": 0}):
        rc, out, err = run_cli(bad)
        check(rc == 2 and out == "" and err.strip(), f"bad input {bad} -> rc {rc}")
    p = subprocess.run([sys.executable, os.path.join(HERE, "logprobs.py")], input="{not json",
                       capture_output=True, text=True)
    check(p.returncode == 2, "invalid JSON -> 2")


@test
def bench_engine_kv_cache_matches_reference():
    import torch_engine as te
    for fam, kw in (("qwen3", {}), ("qwen2", {}), ("llama", {"attention_bias": True}),
                    ("llama", {"tie": True, "kv_heads": 1})):
        f = os.path.join(TMP, f"bench-{fam}-{len(kw)}")
        make_tiny(f, fam, seed=7, **kw)
        ids = [5, 17, 3, 88, 42, 7, 60, 1, 33, 12, 9, 70]
        with torch.no_grad():
            ref = hm.load_model(f)(ids)
            eng = te.Engine(f, 32)
            full = eng.step(torch.tensor(ids), 0, all_logits=True)
            check(maxdiff(full, ref) < 1e-4, f"{fam}: engine prefill")
            # prefill 5, then a chunk of 3, then one token at a time
            eng = te.Engine(f, 32)
            got = [eng.step(torch.tensor(ids[:5]), 0, all_logits=True),
                   eng.step(torch.tensor(ids[5:8]), 5, all_logits=True)]
            got += [eng.step(torch.tensor([t]), 8 + i) for i, t in enumerate(ids[8:])]
            check(maxdiff(torch.cat(got), ref) < 1e-4, f"{fam}: engine with cache")
    f = os.path.join(TMP, "bench-qwen3-0")
    p = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "bench", "torch_engine.py"),
                        json.dumps({"model": f, "threads": 1, "promptLen": 8, "decodeTokens": 4, "runs": 2})],
                       capture_output=True, text=True)
    check(p.returncode == 0, f"bench cli: {p.stderr}")
    r = json.loads(p.stdout)
    check(all(r[k] > 0 for k in ("prefillTokPerS", "decodeTokPerS", "peakRssMB")), f"bench output {r}")


if __name__ == "__main__":
    print(f"all {len(PASSED)} checks passed")
