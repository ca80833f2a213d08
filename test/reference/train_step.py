"""Reference training step (loss, gradients, one AdamW step) for the TypeScript trainer's tests.

Plain PyTorch autograd over hf_model.Model, written from the spec below, not from the
TypeScript engine, so it can cross-check that engine's backward pass and optimizer.

stdin (JSON):
  {"model": DIR,
   "dtype": "float64" | "float32",                       optional, default float64
   "precision": "exact" | "bf16-gemm" | "autocast",      optional, default exact:
       bf16-gemm: every matrix product (projections, adapters, attention, LM head) rounds its
                  inputs to bf16 (ties to even), forward and backward (the gradient flowing in
                  and the other operand), and keeps its output in dtype: the bf16 trainer's
                  rounding points, summed in dtype;
       autocast:  float32 model under torch.autocast('cpu', dtype=torch.bfloat16), as GPU
                  training runs (products output bf16); logits cast to float32 for the loss
   "lora": null | {"rank": r, "alpha": a,
                   "targets": ["q","k","v","o","gate","up","down"],   optional, default all
                   "adapter": PATH.safetensors},          PEFT names, A [r, in], B [out, r]
   "batch": [{"tokens": [...], "promptLength": P,         1 <= P < len(tokens)
              "advantages": [...],                        one per completion token (policy loss)
              "mask": [...],                              optional, default all 1
              "oldLogprobs": [...], "rolloutLogprobs": [...], "refLogprobs": [...]}],  optional
   "loss": {"type": "policy", "eps": 0.2, "epsHigh": 0.28, "tisCap": 2.0 | null,
            "klCoef": 0.0, "entropyCoef": 0.0}
         | {"type": "topk", "teacherIds": [[[K ids] per completion token] per sample],
            "teacherLogprobs": same shape},
   "optimizer": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                 "weightDecay": 0.1, "clipNorm": 1.0 | null},
   "out": DIR}                                            created if missing

Completion token t of a sample is tokens[P + t]; its log-prob lp_t comes from the logits at
position P + t - 1. The trainable tensors are every model tensor (full fine-tuning; a tied
embedding is one tensor, model.embed_tokens.weight) or, with "lora", only the adapter's A and B.

Loss "policy", per completion token:
  old = oldLogprobs or lp detached; ratio = exp(lp - old)
  pg = max(-ratio * A, -clamp(ratio, 1 - eps, 1 + epsHigh) * A)
  if tisCap is not null and rolloutLogprobs given: pg *= min(exp(old - rollout), tisCap)  (constant)
  if refLogprobs given and klCoef != 0: + klCoef * (exp(ref - lp) - (ref - lp) - 1)
  - entropyCoef * H, H = entropy of the full softmax at that position
Loss "topk", per completion token with teacher ids k_1..k_K:
  s_k = log_softmax at k_j, s_tail = log(1 - exp(min(logsumexp(s), -1e-7))), same for the
  teacher's t from teacherLogprobs; term = sum over the K+1 bins of exp(s) * (s - t)
Both: per sample sum(mask * term) / max(1, sum(mask)); loss = mean over samples.

Metrics, aggregated exactly like the loss (masked mean per sample, then mean over samples):
  clipFraction: share of tokens whose clipped branch is taken, -clamp(ratio)*A > -ratio*A
                (no gradient flows through such a token's ratio); 0 for topk
  approxKl:     old - lp (k1 estimator of KL(old || current)); 0 for topk or without oldLogprobs
  entropy:      H as above

Optimizer: global grad norm n = sqrt(sum g^2) over every trainable tensor; if clipNorm is not
null and n > clipNorm, every g *= clipNorm / n (no epsilon). Then one AdamW step from zero
moments (step 1): m = (1-b1) g; v = (1-b2) g^2; mhat = m / (1-b1); vhat = v / (1-b2);
p <- p - lr * (mhat / (sqrt(vhat) + eps) + wd * p), wd = weightDecay for tensors with >= 2
dimensions, 0 for 1-D tensors (norm weights, biases); p on the right is the value before the step.

Outputs in "out": grads.safetensors (the unclipped gradient of the loss, per trainable tensor,
F64 or F32 per dtype) and after.safetensors (the trainable tensors after the step), both under the
input names (HF names, or PEFT names with LoRA).
stdout (JSON): {"loss": L, "gradNorm": n (before clipping),
                "metrics": {"clipFraction": .., "approxKl": .., "entropy": ..},
                "logprobs": [[lp per completion token] per sample]}   (before the step)
Errors: message on stderr, exit code 2.
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class InputError(Exception):
    pass


# ----------------------------------------------------------------- validation

def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _num_list(v, n, what):
    if not isinstance(v, list) or len(v) != n or not all(_num(x) for x in v):
        raise InputError(f"{what} must be a list of {n} finite numbers")
    return [float(x) for x in v]


def _get_num(d, key, default, what, lo=None):
    v = d.get(key, default)
    if not _num(v):
        raise InputError(f"{what}.{key} must be a finite number")
    if lo is not None and v < lo:
        raise InputError(f"{what}.{key} must be >= {lo}")
    return float(v)


def parse(req):
    """Validate the request; returns a normalised dict (model-dependent checks come later)."""
    if not isinstance(req, dict):
        raise InputError("input must be a JSON object")
    if not isinstance(req.get("model"), str):
        raise InputError('"model" must be a folder path string')
    if not isinstance(req.get("out"), str) or not req["out"]:
        raise InputError('"out" must be a folder path string')
    dtype = req.get("dtype", "float64")
    if dtype not in ("float64", "float32"):
        raise InputError('"dtype" must be "float64" or "float32"')

    lora = req.get("lora")
    if lora is not None:
        if not isinstance(lora, dict):
            raise InputError('"lora" must be null or an object')
        if not _int(lora.get("rank")) or lora["rank"] < 1:
            raise InputError("lora.rank must be a positive integer")
        if not _num(lora.get("alpha")):
            raise InputError("lora.alpha must be a finite number")
        targets = lora.get("targets", ["q", "k", "v", "o", "gate", "up", "down"])
        allowed = ("q", "k", "v", "o", "gate", "up", "down")
        if (not isinstance(targets, list) or not targets or not all(t in allowed for t in targets)
                or len(set(targets)) != len(targets)):
            raise InputError(f"lora.targets must be a non-empty list of distinct names from {list(allowed)}")
        if not isinstance(lora.get("adapter"), str):
            raise InputError("lora.adapter must be a .safetensors path string")
        lora = {"rank": lora["rank"], "alpha": float(lora["alpha"]), "targets": targets,
                "adapter": lora["adapter"]}

    loss = req.get("loss")
    if not isinstance(loss, dict) or loss.get("type") not in ("policy", "topk"):
        raise InputError('"loss" must be an object with "type" "policy" or "topk"')

    batch = req.get("batch")
    if not isinstance(batch, list) or not batch:
        raise InputError('"batch" must be a non-empty list of samples')
    samples = []
    for i, b in enumerate(batch):
        w = f"batch[{i}]"
        if not isinstance(b, dict):
            raise InputError(f"{w} must be an object")
        toks = b.get("tokens")
        if not isinstance(toks, list) or len(toks) < 2 or not all(_int(t) and t >= 0 for t in toks):
            raise InputError(f"{w}.tokens must be a list of >= 2 non-negative integer ids")
        P = b.get("promptLength")
        if not _int(P) or not 1 <= P < len(toks):
            raise InputError(f"{w}.promptLength must be an integer in [1, len(tokens) - 1]")
        C = len(toks) - P
        s = {"tokens": toks, "P": P}
        if loss["type"] == "policy":
            s["advantages"] = _num_list(b.get("advantages"), C, f"{w}.advantages")
        elif b.get("advantages") is not None:
            s["advantages"] = _num_list(b["advantages"], C, f"{w}.advantages")
        s["mask"] = _num_list(b["mask"], C, f"{w}.mask") if b.get("mask") is not None else [1.0] * C
        for key in ("oldLogprobs", "rolloutLogprobs", "refLogprobs"):
            s[key] = _num_list(b[key], C, f"{w}.{key}") if b.get(key) is not None else None
        samples.append(s)

    if loss["type"] == "policy":
        tis = loss.get("tisCap")
        if tis is not None and (not _num(tis) or tis <= 0):
            raise InputError("loss.tisCap must be null or a positive number")
        loss = {"type": "policy", "eps": _get_num(loss, "eps", 0.2, "loss", 0.0),
                "epsHigh": _get_num(loss, "epsHigh", loss.get("eps", 0.2), "loss", 0.0),
                "tisCap": None if tis is None else float(tis),
                "klCoef": _get_num(loss, "klCoef", 0.0, "loss"),
                "entropyCoef": _get_num(loss, "entropyCoef", 0.0, "loss")}
    else:
        ids, lps = loss.get("teacherIds"), loss.get("teacherLogprobs")
        if not isinstance(ids, list) or not isinstance(lps, list) or len(ids) != len(samples) or len(lps) != len(samples):
            raise InputError("loss.teacherIds and loss.teacherLogprobs need one entry per sample")
        for i, s in enumerate(samples):
            C = len(s["tokens"]) - s["P"]
            ti, tl = ids[i], lps[i]
            if not isinstance(ti, list) or not isinstance(tl, list) or len(ti) != C or len(tl) != C:
                raise InputError(f"loss.teacherIds[{i}] / teacherLogprobs[{i}] need one row per completion token ({C})")
            if not ti[0] or not isinstance(ti[0], list):
                raise InputError(f"loss.teacherIds[{i}] rows must be non-empty lists")
            K = len(ti[0])
            for t in range(C):
                if (not isinstance(ti[t], list) or len(ti[t]) != K or not all(_int(x) and x >= 0 for x in ti[t])):
                    raise InputError(f"loss.teacherIds[{i}][{t}] must be {K} non-negative integer ids")
                _num_list(tl[t], K, f"loss.teacherLogprobs[{i}][{t}]")
            s["teacherIds"], s["teacherLogprobs"] = ti, [[float(x) for x in r] for r in tl]
        loss = {"type": "topk"}

    opt = req.get("optimizer")
    if not isinstance(opt, dict):
        raise InputError('"optimizer" must be an object')
    clip = opt.get("clipNorm")
    if clip is not None and (not _num(clip) or clip <= 0):
        raise InputError("optimizer.clipNorm must be null or a positive number")
    opt = {"lr": _get_num(opt, "lr", 1e-3, "optimizer"),
           "beta1": _get_num(opt, "beta1", 0.9, "optimizer", 0.0),
           "beta2": _get_num(opt, "beta2", 0.999, "optimizer", 0.0),
           "eps": _get_num(opt, "eps", 1e-8, "optimizer", 0.0),
           "weightDecay": _get_num(opt, "weightDecay", 0.0, "optimizer"),
           "clipNorm": None if clip is None else float(clip)}
    if not (opt["beta1"] < 1 and opt["beta2"] < 1):
        raise InputError("optimizer.beta1 and beta2 must be < 1")
    precision = req.get("precision", "exact")
    if precision not in ("exact", "bf16-gemm", "autocast"):
        raise InputError('"precision" must be "exact", "bf16-gemm" or "autocast"')
    if precision == "autocast" and dtype != "float32":
        raise InputError('"precision": "autocast" needs "dtype": "float32"')
    return {"model": req["model"], "out": req["out"], "dtype": dtype, "lora": lora, "precision": precision,
            "samples": samples, "loss": loss, "optimizer": opt}


# ------------------------------------------------------------------------ job

def _bf16(t):
    import torch
    return t.to(torch.bfloat16).to(t.dtype)


def bf16_matmul(a, b):
    """a @ b with a and b rounded to bf16; the backward rounds the incoming gradient and the
    other operand likewise (grad_a = bf16(g) @ bf16(b)^T, grad_b = bf16(a)^T @ bf16(g))."""
    import torch

    class Bf16MatMul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return torch.matmul(_bf16(x), _bf16(y))

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            g = _bf16(g)
            gx = torch.matmul(g, _bf16(y).transpose(-1, -2))
            gy = torch.matmul(_bf16(x).transpose(-1, -2), g)
            # Undo broadcasting over leading dimensions (none here beyond batch and heads).
            return gx.sum_to_size(x.shape), gy.sum_to_size(y.shape)

    return Bf16MatMul.apply(a, b)


class Job:
    """Model + trainable tensors + batch, built once; loss() can be re-evaluated (finite differences)."""

    def __init__(self, spec):
        import torch
        import hf_model as hm

        self.spec = spec
        self.tdtype = torch.float64 if spec["dtype"] == "float64" else torch.float32
        lora = spec["lora"]
        self.model = hm.load_model(spec["model"], self.tdtype, requires_grad=lora is None)
        cfg = self.model.cfg
        if lora is None:
            self.trainable = self.model.params  # HF names; a tied embedding is one tensor
        else:
            t = hm.load_lora(lora["adapter"], cfg, lora["rank"], lora["targets"], self.tdtype)
            for v in t.values():
                v.requires_grad_(True)
            self.model.set_lora(t, lora["rank"], lora["alpha"], lora["targets"])
            self.trainable = t  # PEFT names
        if spec["precision"] == "bf16-gemm":
            self.model.mm = bf16_matmul
        for i, s in enumerate(spec["samples"]):
            if max(s["tokens"]) >= cfg.vocab:
                raise InputError(f"batch[{i}].tokens: id out of range [0, {cfg.vocab})")
            if "teacherIds" in s and max(max(r) for r in s["teacherIds"]) >= cfg.vocab:
                raise InputError(f"loss.teacherIds[{i}]: id out of range [0, {cfg.vocab})")

    def loss(self):
        """-> (loss tensor, metrics {name: float}, logprobs [[float]]), differentiable."""
        import torch

        spec, L, dt = self.spec, self.spec["loss"], self.tdtype
        head = self.model.lm_head()
        per_sample, metrics, logprobs = [], {"clipFraction": [], "approxKl": [], "entropy": []}, []
        for s in spec["samples"]:
            toks, P = s["tokens"], s["P"]
            n = len(toks)
            x = self.model.hidden_states(torch.tensor(toks))
            logits = self.model.mm(x[P - 1:n - 1], head.t()).to(dt)  # only the completion positions
            logp = torch.log_softmax(logits, dim=-1)          # [C, V]
            tgt = torch.tensor(toks[P:], dtype=torch.long)
            lp = logp.gather(1, tgt[:, None])[:, 0]
            ent = -(logp.exp() * logp).sum(-1)                # full-softmax entropy per token
            mask = torch.tensor(s["mask"], dtype=dt)
            denom = max(1.0, float(mask.sum()))

            def mmean(v):
                return (mask * v).sum() / denom

            if L["type"] == "policy":
                A = torch.tensor(s["advantages"], dtype=dt)
                old = torch.tensor(s["oldLogprobs"], dtype=dt) if s["oldLogprobs"] is not None else lp.detach()
                ratio = torch.exp(lp - old)
                unclipped = -ratio * A
                clipped = -torch.clamp(ratio, 1.0 - L["eps"], 1.0 + L["epsHigh"]) * A
                term = torch.maximum(unclipped, clipped)
                if L["tisCap"] is not None and s["rolloutLogprobs"] is not None:
                    roll = torch.tensor(s["rolloutLogprobs"], dtype=dt)
                    w = torch.clamp(torch.exp(old.detach() - roll), max=L["tisCap"])
                    term = term * w.detach()
                if s["refLogprobs"] is not None and L["klCoef"] != 0.0:
                    d = torch.tensor(s["refLogprobs"], dtype=dt) - lp
                    term = term + L["klCoef"] * (torch.exp(d) - d - 1.0)
                if L["entropyCoef"] != 0.0:
                    term = term - L["entropyCoef"] * ent
                with torch.no_grad():
                    metrics["clipFraction"].append(float(mmean((clipped > unclipped).to(dt))))
                    metrics["approxKl"].append(float(mmean(old - lp)))
            else:
                ids = torch.tensor(s["teacherIds"], dtype=torch.long)       # [C, K]
                t = torch.tensor(s["teacherLogprobs"], dtype=dt)            # [C, K]
                st = logp.gather(1, ids)                                     # [C, K]

                def with_tail(v):
                    lse = torch.clamp(torch.logsumexp(v, dim=-1), max=-1e-7)
                    return torch.cat([v, torch.log(-torch.expm1(lse))[:, None]], dim=-1)

                st, t = with_tail(st), with_tail(t)
                term = (st.exp() * (st - t)).sum(-1)
                metrics["clipFraction"].append(0.0)
                metrics["approxKl"].append(0.0)
            with torch.no_grad():
                metrics["entropy"].append(float(mmean(ent)))
            per_sample.append(mmean(term))
            logprobs.append(lp.detach().tolist())
        loss = torch.stack(per_sample).mean()
        m = {k: sum(v) / len(v) for k, v in metrics.items()}
        return loss, m, logprobs


def adamw_step(params, grads, opt):
    """One AdamW step from zero moments; returns (new params, pre-clip norm). Pure function."""
    import torch

    with torch.no_grad():
        norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads.values()))
        scale = 1.0
        if opt["clipNorm"] is not None and norm > opt["clipNorm"]:
            scale = opt["clipNorm"] / norm
        b1, b2, lr, eps = opt["beta1"], opt["beta2"], opt["lr"], opt["eps"]
        out = {}
        for k, p in params.items():
            g = grads[k] * scale
            m = (1.0 - b1) * g                     # b1 * 0 + (1 - b1) g
            v = (1.0 - b2) * g * g                 # b2 * 0 + (1 - b2) g^2
            mhat = m / (1.0 - b1 ** 1)
            vhat = v / (1.0 - b2 ** 1)
            wd = opt["weightDecay"] if p.dim() >= 2 else 0.0
            p0 = p.detach()
            out[k] = p0 - lr * (mhat / (torch.sqrt(vhat) + eps) + wd * p0)
    return out, norm


def run(req):
    spec = parse(req)
    import torch
    import hf_model as hm

    job = Job(spec)
    if spec["precision"] == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, metrics, logprobs = job.loss()
    else:
        loss, metrics, logprobs = job.loss()
    names = sorted(job.trainable)
    tensors = [job.trainable[k] for k in names]
    gs = torch.autograd.grad(loss, tensors, allow_unused=True)
    grads = {k: (g if g is not None else torch.zeros_like(t)).detach() for k, g, t in zip(names, gs, tensors)}
    after, norm = adamw_step({k: job.trainable[k] for k in names}, grads, spec["optimizer"])
    tag = "F64" if spec["dtype"] == "float64" else "F32"
    os.makedirs(spec["out"], exist_ok=True)
    hm.write_safetensors(os.path.join(spec["out"], "grads.safetensors"), grads, tag)
    hm.write_safetensors(os.path.join(spec["out"], "after.safetensors"), after, tag)
    return {"loss": float(loss), "gradNorm": norm, "metrics": metrics, "logprobs": logprobs}


def main():
    try:
        req = json.loads(sys.stdin.read())
        # allow_nan=False: JSON has no NaN/Infinity, JS JSON.parse would choke on them
        text = json.dumps(run(req), allow_nan=False)
    except (InputError, json.JSONDecodeError) as e:
        print(f"train_step.py: bad input: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # model folder unreadable, adapter mismatch, non-finite loss, ...
        print(f"train_step.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
