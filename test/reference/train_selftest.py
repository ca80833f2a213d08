"""Self-checks for train_step.py (and bench/torch_train.py's maths):
run with /usr/bin/python3 test/reference/train_selftest.py

Exits non-zero on the first failure. Uses only temp folders.
"""

import atexit
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
sys.path.insert(0, HERE)
sys.path.insert(0, BENCH)
import hf_model as hm  # noqa: E402
import train_step as ts  # noqa: E402
from make_tiny import make_tiny  # noqa: E402

TMP = tempfile.mkdtemp(prefix="trainref-")
atexit.register(shutil.rmtree, TMP, True)
FAMILIES = ("qwen3", "qwen2", "llama")
ALL_TARGETS = ["q", "k", "v", "o", "gate", "up", "down"]
PASSED = []
OPT = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weightDecay": 0.1, "clipNorm": 1.0}


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test(fn):
    fn()
    PASSED.append(fn.__name__)
    print(f"ok  {fn.__name__}", flush=True)
    return fn


# Per family: a config variant that exercises its optional parts (tied head, biases, GQA).
FAMILY_KW = {"qwen3": {"tie": True}, "qwen2": {}, "llama": {"attention_bias": True}}


def folder(name, family, **kw):
    out = os.path.join(TMP, name)
    if not os.path.exists(os.path.join(out, "config.json")):
        make_tiny(out, family, **kw)
    return out


def fam_folder(fam):
    return folder(f"m-{fam}", fam, seed=11, **FAMILY_KW[fam])


def make_adapter(model_dir, name, rank, targets, seed=0, zero_b=False, b_scale=0.3):
    """Random PEFT adapter file for the model; B = 0 if zero_b (PEFT's initial state)."""
    cfg = hm.Config.from_folder(model_dir)
    g = torch.Generator().manual_seed(seed)
    t = {}
    for l in range(cfg.layers):
        for tg in targets:
            sa, sb = hm.lora_shapes(cfg, tg, rank)
            t[hm.peft_lora_name(l, tg, "A")] = torch.randn(*sa, generator=g, dtype=torch.float64) / math.sqrt(sa[1])
            t[hm.peft_lora_name(l, tg, "B")] = (torch.zeros(*sb, dtype=torch.float64) if zero_b else
                                                torch.randn(*sb, generator=g, dtype=torch.float64) * b_scale)
    path = os.path.join(TMP, name + ".safetensors")
    hm.write_safetensors(path, t, "F64")
    return path


def run_cli(req):
    p = subprocess.run([sys.executable, os.path.join(HERE, "train_step.py")], input=json.dumps(req),
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def run_ok(req):
    rc, out, err = run_cli(req)
    check(rc == 0, f"train_step failed: {err}")
    r = json.loads(out)
    grads = hm.read_safetensors(os.path.join(req["out"], "grads.safetensors"), torch.float64)
    after = hm.read_safetensors(os.path.join(req["out"], "after.safetensors"), torch.float64)
    return r, grads, after


def current_logprobs(req):
    """Current completion log-probs for the request's model/adapter (in-process, no grads)."""
    r = dict(req, loss={"type": "policy"}, optimizer=OPT,
             batch=[{"tokens": b["tokens"], "promptLength": b["promptLength"],
                     "advantages": [0.0] * (len(b["tokens"]) - b["promptLength"])} for b in req["batch"]])
    with torch.no_grad():
        return ts.Job(ts.parse(r)).loss()[2]


def outdir(name):
    return os.path.join(TMP, "out-" + name)


# Ratios and advantages chosen so every branch of the clipped objective shows up, each well
# away from the kinks at 1 - eps and 1 + epsHigh (eps 0.2, epsHigh 0.28):
#   (1.6, +) clipped high   (1.6, -) unclipped   (0.5, -) clipped low   (0.5, +) unclipped
#   (1.1, +/-) inside the range
RATIOS = [1.6, 1.6, 0.5, 0.5, 1.1, 1.05, 0.9, 1.5, 0.6, 1.0]
ADVS = [1.0, -0.7, -1.3, 0.8, 0.5, -0.4, 1.2, 2.0, -1.5, 0.3]
# exp(old - rollout): below the cap, above the cap of 2 (so capped), and around 1
TIS_W = [0.5, 3.0, 1.2, 0.8, 2.5, 1.0, 1.7, 0.3, 4.0, 1.1]


def policy_batch(req_base, with_old=True, with_roll=True, with_ref=True, masks=True):
    """Two samples with completions of 6 and 4 tokens; old/rollout/ref built around the current lp."""
    toks = [[5, 17, 3, 88, 42, 7, 60, 1, 33], [9, 8, 7, 6, 50, 51, 52]]
    Ps = [3, 3]
    base = dict(req_base, batch=[{"tokens": t, "promptLength": p} for t, p in zip(toks, Ps)])
    lps = current_logprobs(base)
    batch, k = [], 0
    for i, (t, p) in enumerate(zip(toks, Ps)):
        C = len(t) - p
        idx = [(k + j) % len(RATIOS) for j in range(C)]
        k += C
        b = {"tokens": t, "promptLength": p, "advantages": [ADVS[j] for j in idx]}
        old = [lps[i][j] - math.log(RATIOS[idx[j]]) for j in range(C)]
        if with_old:
            b["oldLogprobs"] = old
        if with_roll:
            b["rolloutLogprobs"] = [old[j] - math.log(TIS_W[idx[j]]) for j in range(C)]
        if with_ref:
            b["refLogprobs"] = [lps[i][j] + 0.3 * math.sin(3.0 * j + i) for j in range(C)]
        if masks and i == 0:
            b["mask"] = [1, 1, 0, 1, 1, 1]
        batch.append(b)
    return batch


POLICY_LOSS = {"type": "policy", "eps": 0.2, "epsHigh": 0.28, "tisCap": 2.0, "klCoef": 0.05,
               "entropyCoef": 0.01}


def topk_loss_for(req_base, K=4, seed=0):
    """Teacher distributions: K ids per completion token (some include the token itself), random
    log-probs that leave mass for the tail bin."""
    rng = random.Random(seed)
    V = hm.Config.from_folder(req_base["model"]).vocab
    ids, lps = [], []
    for b in req_base["batch"]:
        C = len(b["tokens"]) - b["promptLength"]
        si, sl = [], []
        for t in range(C):
            row = rng.sample(range(V), K)
            if t % 2 == 0 and b["tokens"][b["promptLength"] + t] not in row:
                row[0] = b["tokens"][b["promptLength"] + t]
            w = [rng.uniform(0.2, 1.0) for _ in range(K)]
            mass = rng.uniform(0.5, 0.95)
            si.append(row)
            sl.append([math.log(mass * x / sum(w)) for x in w])
        ids.append(si)
        lps.append(sl)
    return {"type": "topk", "teacherIds": ids, "teacherLogprobs": lps}


# ------------------------------------------------------------ hand computations

def log_softmax_rows(model_dir, tokens):
    with torch.no_grad():
        return torch.log_softmax(hm.load_model(model_dir)(tokens), -1).tolist()


@test
def policy_loss_matches_hand_computation():
    f = fam_folder("qwen3")
    req = {"model": f, "lora": None, "loss": POLICY_LOSS, "optimizer": OPT, "out": outdir("hand")}
    req["batch"] = policy_batch(req)
    r, _, _ = run_ok(req)
    L = POLICY_LOSS
    per, clipf, kl, ent_m = [], [], [], []
    for b in req["batch"]:
        rows = log_softmax_rows(f, b["tokens"])
        P, C = b["promptLength"], len(b["tokens"]) - b["promptLength"]
        mask = b.get("mask", [1] * C)
        tot, nclip, skl, sent = 0.0, 0.0, 0.0, 0.0
        for t in range(C):
            row = rows[P + t - 1]
            lp = row[b["tokens"][P + t]]
            check(abs(lp - r["logprobs"][len(per)][t]) < 1e-12, "logprob output")
            H = -sum(math.exp(x) * x for x in row)
            old, A = b["oldLogprobs"][t], b["advantages"][t]
            ratio = math.exp(lp - old)
            u = -ratio * A
            c = -min(max(ratio, 1 - L["eps"]), 1 + L["epsHigh"]) * A
            pg = max(u, c)
            pg *= min(math.exp(old - b["rolloutLogprobs"][t]), L["tisCap"])
            d = b["refLogprobs"][t] - lp
            term = pg + L["klCoef"] * (math.exp(d) - d - 1) - L["entropyCoef"] * H
            tot += mask[t] * term
            nclip += mask[t] * (1.0 if c > u else 0.0)
            skl += mask[t] * (old - lp)
            sent += mask[t] * H
        n = max(1.0, float(sum(mask)))
        per.append(tot / n)
        clipf.append(nclip / n)
        kl.append(skl / n)
        ent_m.append(sent / n)
    want = sum(per) / len(per)
    check(abs(r["loss"] - want) < 1e-12 * max(1, abs(want)), f"loss {r['loss']} vs hand {want}")
    for k, v in (("clipFraction", clipf), ("approxKl", kl), ("entropy", ent_m)):
        w = sum(v) / len(v)
        check(abs(r["metrics"][k] - w) < 1e-12, f"metric {k}: {r['metrics'][k]} vs {w}")
    # clipped tokens present: (1.6,+) and (0.5,-) among the masked-in tokens of sample 0
    check(0 < r["metrics"]["clipFraction"] < 1, f"clip fraction {r['metrics']['clipFraction']}")


@test
def topk_loss_matches_hand_computation():
    f = fam_folder("llama")
    req = {"model": f, "lora": None, "optimizer": OPT, "out": outdir("hand-topk"),
           "batch": [{"tokens": [5, 17, 3, 88, 42, 7], "promptLength": 2},
                     {"tokens": [1, 2, 3, 4, 5], "promptLength": 4, "mask": [1]}]}
    req["loss"] = topk_loss_for(req, K=3, seed=4)
    r, _, _ = run_ok(req)
    per = []
    for i, b in enumerate(req["batch"]):
        rows = log_softmax_rows(f, b["tokens"])
        P, C = b["promptLength"], len(b["tokens"]) - b["promptLength"]
        tot = 0.0
        for t in range(C):
            s = [rows[P + t - 1][k] for k in req["loss"]["teacherIds"][i][t]]
            q = list(req["loss"]["teacherLogprobs"][i][t])
            for v in (s, q):
                lse = min(math.log(sum(math.exp(x) for x in v)), -1e-7)
                v.append(math.log(1 - math.exp(lse)))
            tot += sum(math.exp(a) * (a - c) for a, c in zip(s, q))
        per.append(tot / C)
    want = sum(per) / len(per)
    check(abs(r["loss"] - want) < 1e-12, f"topk loss {r['loss']} vs hand {want}")
    check(r["metrics"]["clipFraction"] == 0 and r["metrics"]["approxKl"] == 0, "topk metrics")
    # A teacher equal to the student gives zero loss and zero gradient.
    rows = [log_softmax_rows(f, b["tokens"]) for b in req["batch"]]
    same = json.loads(json.dumps(req["loss"]))
    for i, b in enumerate(req["batch"]):
        for t, row_ids in enumerate(same["teacherIds"][i]):
            same["teacherLogprobs"][i][t] = [rows[i][b["promptLength"] + t - 1][k] for k in row_ids]
    r2, g2, _ = run_ok(dict(req, loss=same, out=outdir("hand-topk-same")))
    check(abs(r2["loss"]) < 1e-12, f"self-distillation loss {r2['loss']}")
    check(max(float(g.abs().max()) for g in g2.values()) < 1e-10, "self-distillation gradient")


# ------------------------------------------------------------ finite differences

def fd_check(req, what, n_dirs=2, h=1e-4, tol=1e-7):
    """CLI gradients (grads.safetensors) vs finite differences of the in-process loss.

    Directions are unit vectors (over all tensors, within one tensor, one element) and the
    difference is the 4th-order central stencil, which at h = 1e-4 is accurate to ~1e-11 here;
    errors are relative to max(|analytic|, 1% of the gradient norm on the direction's support,
    1e-4 * max(1, |loss|)), the last being where the stencil's rounding (~1e-16 |loss| / h) sits."""
    r, grads, _ = run_ok(req)
    job = ts.Job(ts.parse(req))
    params = job.trainable
    check(set(grads) == set(params), f"{what}: grad names {sorted(set(grads) ^ set(params))[:4]}")
    for k in params:
        check(grads[k].shape == params[k].shape, f"{what}: {k} grad shape")
    check(abs(job.loss()[0].item() - r["loss"]) < 1e-12, f"{what}: in-process loss differs from CLI")

    def loss_at(dirs, step):
        with torch.no_grad():
            for k, d in dirs.items():
                params[k] += step * d
            v = job.loss()[0].item()
            for k, d in dirs.items():
                params[k] -= step * d
        return v

    def compare(dirs, label):
        nrm = math.sqrt(sum(float((d ** 2).sum()) for d in dirs.values()))
        dirs = {k: d / nrm for k, d in dirs.items()}
        an = sum(float((grads[k] * d).sum()) for k, d in dirs.items())
        fd = (8 * (loss_at(dirs, h) - loss_at(dirs, -h)) - (loss_at(dirs, 2 * h) - loss_at(dirs, -2 * h))) / (12 * h)
        support = math.sqrt(sum(float((grads[k] ** 2).sum()) for k in dirs))
        err = abs(fd - an) / max(abs(an), 0.01 * support, 1e-4 * max(1.0, abs(r["loss"])))
        check(err < tol, f"{what}: {label}: grad {an} vs finite diff {fd} (rel {err:.1e})")
        return err

    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for _ in range(n_dirs):  # random directions through every tensor at once
        dirs = {k: torch.randn(v.shape, generator=g, dtype=torch.float64) for k, v in params.items()}
        worst = max(worst, compare(dirs, "all tensors"))
    for k, v in params.items():  # per tensor: its largest-gradient element, a random direction in it
        e = torch.zeros_like(v).view(-1)
        e[int(grads[k].abs().argmax())] = 1.0
        worst = max(worst, compare({k: e.view(v.shape)}, k + " max element"))
        worst = max(worst, compare({k: torch.randn(v.shape, generator=g, dtype=torch.float64)}, k))
    return r, grads, worst


@test
def policy_grads_match_finite_differences():
    for fam in FAMILIES:
        f = fam_folder(fam)
        for lora in (None, {"rank": 3, "alpha": 6.0, "targets": ALL_TARGETS,
                            "adapter": make_adapter(f, f"ad-{fam}", 3, ALL_TARGETS, seed=2)}):
            name = f"{fam} {'lora' if lora else 'full'} policy"
            req = {"model": f, "lora": lora, "loss": POLICY_LOSS, "optimizer": OPT, "out": outdir("fd-p")}
            req["batch"] = policy_batch(req)
            r, grads, worst = fd_check(req, name)
            cf = r["metrics"]["clipFraction"]
            check(0 < cf < 1, f"{name}: want both clipped and unclipped tokens, got clipFraction {cf}")
            check(all(float(g.abs().max()) > 0 for g in grads.values()), f"{name}: a zero gradient tensor")
            if lora is None and fam == "qwen3":
                check("lm_head.weight" not in grads, "tied embedding: one tensor, no lm_head gradient")
            print(f"    {name}: worst rel err {worst:.1e}", flush=True)


@test
def topk_grads_match_finite_differences():
    for fam in FAMILIES:
        f = fam_folder(fam)
        for lora in (None, {"rank": 2, "alpha": 3.0, "targets": ["q", "v", "down"],
                            "adapter": make_adapter(f, f"ad2-{fam}", 2, ["q", "v", "down"], seed=3)}):
            name = f"{fam} {'lora' if lora else 'full'} topk"
            req = {"model": f, "lora": lora, "optimizer": OPT, "out": outdir("fd-t"),
                   "batch": [{"tokens": [5, 17, 3, 88, 42, 7, 60], "promptLength": 3},
                             {"tokens": [9, 8, 7, 6, 50], "promptLength": 2, "mask": [1, 0, 1]}]}
            req["loss"] = topk_loss_for(req, K=4, seed=1)
            _, grads, worst = fd_check(req, name)
            if lora:
                check(len(grads) == 2 * 3 * hm.Config.from_folder(f).layers, f"{name}: only targeted modules")
            print(f"    {name}: worst rel err {worst:.1e}", flush=True)


@test
def policy_without_old_logprobs_is_on_policy_gradient():
    # old = lp detached: ratio is 1 in value, so the loss is -mean(A) and the gradient that of
    # -mean(mask * A * lp); must equal the run where oldLogprobs is passed as the current lp.
    f = fam_folder("qwen2")
    req = {"model": f, "lora": None, "out": outdir("onp"), "optimizer": OPT,
           "loss": {"type": "policy", "eps": 0.2, "epsHigh": 0.28, "tisCap": None, "klCoef": 0.0, "entropyCoef": 0.0}}
    req["batch"] = policy_batch(req, with_old=False, with_roll=False, with_ref=False)
    r, g, _ = run_ok(req)
    per = []
    for b in req["batch"]:
        mask = b.get("mask", [1] * len(b["advantages"]))
        per.append(-sum(m * a for m, a in zip(mask, b["advantages"])) / max(1, sum(mask)))
    want = sum(per) / len(per)
    check(abs(r["loss"] - want) < 1e-12, f"on-policy loss {r['loss']} vs {want}")
    check(r["metrics"]["clipFraction"] == 0 and r["metrics"]["approxKl"] == 0, "on-policy metrics")
    lps = current_logprobs(req)
    req2 = json.loads(json.dumps(req))
    for b, lp in zip(req2["batch"], lps):
        b["oldLogprobs"] = lp
    req2["out"] = outdir("onp2")
    _, g2, _ = run_ok(req2)
    d = max(float((g[k] - g2[k]).abs().max()) for k in g)
    check(d < 1e-12, f"grad without old vs old = lp: {d}")
    # and the explicit surrogate -mean(A * lp)
    job = ts.Job(ts.parse(req))
    terms = []
    for b in req["batch"]:
        P = b["promptLength"]
        lp = torch.log_softmax(job.model(b["tokens"]), -1)[P - 1:-1].gather(
            1, torch.tensor(b["tokens"][P:])[:, None])[:, 0]
        m = torch.tensor(b.get("mask", [1.0] * len(lp)), dtype=torch.float64)
        terms.append(-(m * torch.tensor(b["advantages"], dtype=torch.float64) * lp).sum() / max(1.0, float(m.sum())))
    torch.stack(terms).mean().backward()
    d = max(float((job.trainable[k].grad - g[k]).abs().max()) for k in g)
    check(d < 1e-12, f"grad vs -mean(A*lp): {d}")


@test
def tis_weight_carries_no_gradient():
    # With only TIS on, scaling the rollout log-probs so every weight sits below the cap makes the
    # gradient the weighted sum of the per-token gradients with those weights held fixed.
    f = fam_folder("llama")
    base = {"model": f, "lora": None, "optimizer": OPT, "out": outdir("tis")}
    base["batch"] = policy_batch(base, with_ref=False, masks=False)
    plain = {"type": "policy", "eps": 0.2, "epsHigh": 0.28, "tisCap": None, "klCoef": 0.0, "entropyCoef": 0.0}
    _, g0, _ = run_ok(dict(base, loss=plain))
    # uniform weight 0.5 on every token (old - rollout = log 0.5): gradient halves exactly
    b2 = json.loads(json.dumps(base["batch"]))
    for b in b2:
        b["rolloutLogprobs"] = [o - math.log(0.5) for o in b["oldLogprobs"]]
    r1, g1, _ = run_ok(dict(base, batch=b2, loss=dict(plain, tisCap=2.0), out=outdir("tis2")))
    d = max(float((g1[k] - 0.5 * g0[k]).abs().max()) for k in g0)
    check(d < 1e-12, f"TIS 0.5 should halve the gradient: {d}")
    # weight 10 capped at 2: doubles it
    for b in b2:
        b["rolloutLogprobs"] = [o - math.log(10.0) for o in b["oldLogprobs"]]
    _, g2, _ = run_ok(dict(base, batch=b2, loss=dict(plain, tisCap=2.0), out=outdir("tis3")))
    d = max(float((g2[k] - 2.0 * g0[k]).abs().max()) for k in g0)
    check(d < 1e-12, f"capped TIS should double the gradient: {d}")
    # tisCap null ignores rollout log-probs
    _, g3, _ = run_ok(dict(base, batch=b2, loss=plain, out=outdir("tis4")))
    check(max(float((g3[k] - g0[k]).abs().max()) for k in g0) == 0.0, "tisCap null ignores rollout")
    # Without oldLogprobs the weight is exp(lp - rollout) with lp detached: rollout = lp - log 0.5
    # must give half the on-policy gradient (a weight carrying gradient would give the full one).
    b3 = json.loads(json.dumps(base["batch"]))
    for b in b3:
        del b["oldLogprobs"]
    _, g4, _ = run_ok(dict(base, batch=b3, loss=plain, out=outdir("tis5")))
    for b, lp in zip(b3, current_logprobs(base)):
        b["rolloutLogprobs"] = [x - math.log(0.5) for x in lp]
    _, g5, _ = run_ok(dict(base, batch=b3, loss=dict(plain, tisCap=2.0), out=outdir("tis6")))
    d = max(float((g5[k] - 0.5 * g4[k]).abs().max()) for k in g4)
    check(d < 1e-12, f"TIS weight without oldLogprobs must be a constant: {d}")


# ------------------------------------------------------------------------ LoRA

@test
def lora_zero_b_gives_zero_a_grad():
    for fam in FAMILIES:
        f = fam_folder(fam)
        ad = make_adapter(f, f"zero-{fam}", 4, ALL_TARGETS, seed=5, zero_b=True)
        req = {"model": f, "lora": {"rank": 4, "alpha": 8, "targets": ALL_TARGETS, "adapter": ad},
               "loss": POLICY_LOSS, "optimizer": OPT, "out": outdir("zb")}
        req["batch"] = policy_batch(req)
        r, g, after = run_ok(req)
        full, _, _ = run_ok(dict(req, lora=None, out=outdir("zb-full")))
        check(abs(r["loss"] - full["loss"]) < 1e-12, f"{fam}: B = 0 adapter must not change the loss")
        for k, v in g.items():
            if ".lora_A." in k:
                check(float(v.abs().max()) == 0.0, f"{fam}: {k} grad should be exactly 0")
            else:
                check(float(v.abs().max()) > 1e-8, f"{fam}: {k} grad should be nonzero")
        a0 = hm.read_safetensors(ad, torch.float64)
        for k in g:
            if ".lora_A." in k:  # zero grad: only decay moves A
                check(float((after[k] - a0[k] * (1 - OPT["lr"] * OPT["weightDecay"])).abs().max()) < 1e-15,
                      f"{fam}: {k} after step")


@test
def lora_forward_equals_merged_weights():
    # x W^T + s (x A^T) B^T == x (W + s B A)^T: the adapter path against a merged dense model.
    for fam in FAMILIES:
        f = fam_folder(fam)
        targets = ["q", "k", "o", "up", "down"] if fam != "qwen2" else ALL_TARGETS
        ad = make_adapter(f, f"merge-{fam}", 3, targets, seed=6)
        cfg = hm.Config.from_folder(f)
        w = hm.load_weights(f, torch.float64)
        t = hm.read_safetensors(ad, torch.float64)
        merged = dict(w)
        for l in range(cfg.layers):
            for tg in targets:
                k = f"model.layers.{l}.{hm.LORA_MODULES[tg]}.weight"
                merged[k] = w[k] + (5.0 / 3) * t[hm.peft_lora_name(l, tg, "B")] @ t[hm.peft_lora_name(l, tg, "A")]
        m = hm.Model(cfg, w)
        m.set_lora(hm.load_lora(ad, cfg, 3, targets), 3, 5.0, targets)
        ids = [4, 8, 15, 16, 23, 42, 7]
        with torch.no_grad():
            d = float((m(ids) - hm.Model(cfg, merged)(ids)).abs().max())
        check(d < 1e-11, f"{fam}: lora vs merged {d}")


# ---------------------------------------------------------------------- AdamW

def hand_adamw_scalar(p, g, scale, o, is_matrix):
    g = g * scale
    m = 0.9 * 0.0 + (1 - o["beta1"]) * g
    v = 0.999 * 0.0 + (1 - o["beta2"]) * g * g
    mhat, vhat = m / (1 - o["beta1"]), v / (1 - o["beta2"])
    wd = o["weightDecay"] if is_matrix else 0.0
    return p - o["lr"] * mhat / (math.sqrt(vhat) + o["eps"]) - o["lr"] * wd * p


@test
def adamw_step_matches_hand_computation():
    f = fam_folder("llama")  # has 1-D biases and norms besides the matrices
    # At step 1 Adam's update is ~ g / (|g| + eps'), blind to a uniform scale of g unless eps is
    # comparable to |g|: the eps = 1e-3 cases make the clipping visible in the step.
    steps = {}
    for clip, lora, eps in ((1.0, None, 1e-8), (None, None, 1e-8), (1e6, None, 1e-8), (0.05, "lora", 1e-8),
                            (0.05, None, 1e-3), (None, None, 1e-3)):
        opt = dict(OPT, clipNorm=clip, lr=3e-3, weightDecay=0.2, beta1=0.8, beta2=0.95, eps=eps)
        lora_spec = None
        if lora:
            lora_spec = {"rank": 2, "alpha": 4, "targets": ALL_TARGETS,
                         "adapter": make_adapter(f, "adam", 2, ALL_TARGETS, seed=8)}
        req = {"model": f, "lora": lora_spec, "loss": POLICY_LOSS, "optimizer": opt, "out": outdir("adam")}
        req["batch"] = policy_batch(req)
        r, g, after = run_ok(req)
        before = (hm.read_safetensors(lora_spec["adapter"], torch.float64) if lora_spec
                  else hm.load_model(f).params)
        check(set(after) == set(before) == set(g), "after/grads names")
        norm = math.sqrt(sum(float((v ** 2).sum()) for v in g.values()))
        check(abs(norm - r["gradNorm"]) < 1e-12 * norm, f"gradNorm {r['gradNorm']} vs {norm}")
        scale = clip / norm if clip is not None and norm > clip else 1.0
        if clip == 1.0 or clip == 0.05:
            check(scale < 1, f"clip {clip} should be active (norm {norm})")
        rng = random.Random(0)
        n1 = 0
        for k in before:
            pv, gv, av = before[k].reshape(-1).tolist(), g[k].reshape(-1).tolist(), after[k].reshape(-1).tolist()
            n1 += before[k].dim() == 1
            for i in set([0, len(pv) - 1] + [rng.randrange(len(pv)) for _ in range(5)]):
                want = hand_adamw_scalar(pv[i], gv[i], scale, opt, before[k].dim() >= 2)
                check(abs(av[i] - want) < 1e-15 + 1e-13 * abs(want), f"{k}[{i}]: {av[i]} vs hand {want}")
        check(n1 > 0 or lora, "llama full has 1-D tensors (no decay)")
        # the same step via torch.optim.AdamW (decay only on >= 2-D tensors)
        ps = {k: v.clone().requires_grad_(True) for k, v in before.items()}
        for k in ps:
            ps[k].grad = g[k] * scale
        groups = [{"params": [v for v in ps.values() if v.dim() >= 2], "weight_decay": opt["weightDecay"]},
                  {"params": [v for v in ps.values() if v.dim() < 2], "weight_decay": 0.0}]
        groups = [x for x in groups if x["params"]]
        torch.optim.AdamW(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"]).step()
        d = max(float((ps[k].detach() - after[k]).abs().max()) for k in ps)
        check(d < 1e-14, f"vs torch.optim.AdamW: {d}")
        steps[(clip, lora, eps)] = after
    a, b = steps[(0.05, None, 1e-3)], steps[(None, None, 1e-3)]
    check(max(float((a[k] - b[k]).abs().max()) for k in a) > 1e-4, "clipping must change the eps=1e-3 step")


# ------------------------------------------------------------------ misc CLI

@test
def float32_close_to_float64():
    f = fam_folder("qwen3")
    req = {"model": f, "lora": None, "loss": POLICY_LOSS, "optimizer": OPT, "out": outdir("f64")}
    req["batch"] = policy_batch(req)
    r64, g64, a64 = run_ok(req)
    rc, out, err = run_cli(dict(req, dtype="float32", out=outdir("f32")))
    check(rc == 0, err)
    r32 = json.loads(out)
    hdr, _, _, _ = hm.read_safetensors_header(os.path.join(outdir("f32"), "grads.safetensors"))
    check(all(v["dtype"] == "F32" for v in hdr.values()), "float32 run writes F32")
    hdr, _, _, _ = hm.read_safetensors_header(os.path.join(outdir("f64"), "after.safetensors"))
    check(all(v["dtype"] == "F64" for v in hdr.values()), "float64 run writes F64")
    g32 = hm.read_safetensors(os.path.join(outdir("f32"), "grads.safetensors"), torch.float64)
    check(abs(r32["loss"] - r64["loss"]) < 1e-4, "f32 loss")
    rel = max(float((g32[k] - g64[k]).abs().max()) for k in g64) / max(float(v.abs().max()) for v in g64.values())
    check(rel < 1e-3, f"f32 grads rel {rel}")


@test
def bad_inputs_exit_2():
    f = fam_folder("qwen3")
    ok = {"model": f, "lora": None, "loss": {"type": "policy"}, "optimizer": OPT, "out": outdir("bad"),
          "batch": [{"tokens": [1, 2, 3], "promptLength": 1, "advantages": [1, 1]}]}
    rc, _, err = run_cli(ok)
    check(rc == 0, f"baseline request should pass: {err}")
    ad = make_adapter(f, "bad-ad", 2, ["q"], seed=0)
    bads = [
        dict(ok, batch=[{"tokens": [1, 2, 3], "promptLength": 1, "advantages": [1]}]),
        dict(ok, batch=[{"tokens": [1, 2, 3], "promptLength": 0, "advantages": [1, 1, 1]}]),
        dict(ok, batch=[{"tokens": [1, 2, 3], "promptLength": 3, "advantages": []}]),
        dict(ok, batch=[{"tokens": [1, 2, 97], "promptLength": 1, "advantages": [1, 1]}]),
        dict(ok, batch=[{"tokens": [1, 2, 3], "promptLength": 1, "advantages": [1, 1], "mask": [1]}]),
        dict(ok, dtype="float16"), dict(ok, loss={"type": "sft"}), dict(ok, batch=[]),
        dict(ok, model=f + "/nope"),
        dict(ok, lora={"rank": 2, "alpha": 4, "targets": ["q", "k"], "adapter": ad}),  # k missing in file
        dict(ok, lora={"rank": 3, "alpha": 4, "targets": ["q"], "adapter": ad}),       # wrong rank
        dict(ok, lora={"rank": 2, "alpha": 4, "targets": ["qq"], "adapter": ad}),
        dict(ok, loss={"type": "topk", "teacherIds": [[[1, 2]]], "teacherLogprobs": [[[-1, -2]]]}),
        dict(ok, optimizer=dict(OPT, clipNorm=0)),
    ]
    for b in bads:
        rc, out, err = run_cli(b)
        check(rc == 2 and out == "" and err.strip(), f"bad input -> rc {rc}: {json.dumps(b)[:200]}")
    rc, _, _ = run_cli(dict(ok, lora={"rank": 2, "alpha": 4, "targets": ["q"], "adapter": ad}))
    check(rc == 0, "matching one-target adapter passes")
    p = subprocess.run([sys.executable, os.path.join(HERE, "train_step.py")], input="{nope",
                       capture_output=True, text=True)
    check(p.returncode == 2, "invalid JSON -> 2")


# ----------------------------------------------------------- bench/torch_train

@test
def bench_train_step_matches_reference():
    """bench/torch_train.py's fused training model must compute the same loss and gradients."""
    import torch_train as tt
    for fam in FAMILIES:
        f = fam_folder(fam)
        T = 12
        for lora in (None, {"rank": 3, "alpha": 6.0}):
            eng = tt.TrainModel(f, lora, torch.float64, seed=3)
            g = torch.Generator().manual_seed(0)
            ids = torch.randint(0, eng.cfg.vocab, (T,), generator=g)
            adv = torch.randn(T // 2, generator=g, dtype=torch.float64)
            loss = eng.loss(ids, T // 2, adv)
            loss.backward()
            # the same step through train_step.py, with the bench's adapter written as a PEFT file
            lreq = None
            if lora:
                ad = os.path.join(TMP, f"bench-ad-{fam}.safetensors")
                hm.write_safetensors(ad, eng.peft_tensors(), "F64")
                lreq = {"rank": 3, "alpha": 6.0, "targets": ALL_TARGETS, "adapter": ad}
            req = {"model": f, "lora": lreq, "optimizer": OPT, "out": outdir("bench"),
                   "loss": {"type": "policy", "eps": 0.2, "epsHigh": 0.28, "tisCap": None},
                   "batch": [{"tokens": ids.tolist(), "promptLength": T // 2, "advantages": adv.tolist()}]}
            r, grads, _ = run_ok(req)
            check(abs(float(loss) - r["loss"]) < 1e-12, f"{fam}: bench loss {float(loss)} vs {r['loss']}")
            mine = eng.grads_by_name()
            check(set(mine) == set(grads), f"{fam}: bench grad names {sorted(set(mine) ^ set(grads))[:4]}")
            d = max(float((mine[k] - grads[k]).abs().max()) for k in grads)
            check(d < 1e-11, f"{fam} {'lora' if lora else 'full'}: bench grads differ by {d}")
    f = fam_folder("qwen3")
    for lora in (None, {"rank": 2, "alpha": 4}):
        p = subprocess.run([sys.executable, os.path.join(BENCH, "torch_train.py"),
                            json.dumps({"model": f, "threads": 1, "seqLen": 16, "steps": 2, "lora": lora})],
                           capture_output=True, text=True)
        check(p.returncode == 0, f"bench cli: {p.stderr}")
        r = json.loads(p.stdout)
        check(all(r[k] > 0 for k in ("trainTokPerS", "stepSeconds", "peakRssMB")), f"bench output {r}")
    p = subprocess.run([sys.executable, os.path.join(BENCH, "torch_train.py"), json.dumps({"model": f, "seqLen": 1})],
                       capture_output=True, text=True)
    check(p.returncode == 2, "bench bad args -> 2")


if __name__ == "__main__":
    print(f"all {len(PASSED)} checks passed")
