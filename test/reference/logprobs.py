"""Reference log-probabilities for the TypeScript engine's tests.

stdin (JSON):
  {"model": DIR, "sequences": [[id, ...], ...],
   "dtype": "float64" | "float32",   optional, default float64
   "top": k,                          optional, k >= 1
   "lastLogits": true}                optional
stdout (JSON):
  {"logprobs": [[lp_1, ..., lp_{n-1}], ...]}     lp_t = log_softmax(logits[t-1])[ids[t]]
  with "top":        "topIds": [[[k ids] per position 0..n-1], ...],
                     "topLogprobs": same shape, log-softmax values, descending,
                     ties broken by the smaller id. Entry j is the distribution
                     after ids[0..j], so topX[j] pairs with logprobs[j] and the
                     last entry is the next-token distribution after the sequence.
  with "lastLogits": "lastLogits": [[V raw logits at position n-1], ...],
                     "lastLogprobs": [[V log-softmax values at position n-1], ...]
Errors: message on stderr, exit code 2.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class InputError(Exception):
    pass


def parse(req):
    if not isinstance(req, dict):
        raise InputError("input must be a JSON object")
    if not isinstance(req.get("model"), str):
        raise InputError('"model" must be a folder path string')
    seqs = req.get("sequences")
    if not isinstance(seqs, list) or not all(
            isinstance(s, list) and len(s) >= 1 and all(isinstance(t, int) and not isinstance(t, bool) for t in s)
            for s in seqs):
        raise InputError('"sequences" must be a list of non-empty lists of integer token ids')
    dtype = req.get("dtype", "float64")
    if dtype not in ("float64", "float32"):
        raise InputError('"dtype" must be "float64" or "float32"')
    top = req.get("top")
    if top is not None and (not isinstance(top, int) or isinstance(top, bool) or top < 1):
        raise InputError('"top" must be a positive integer')
    return req["model"], seqs, dtype, top, bool(req.get("lastLogits", False))


def run(req):
    model_dir, seqs, dtype, top, last = parse(req)
    import numpy as np
    import torch
    from hf_model import load_model

    tdtype = torch.float64 if dtype == "float64" else torch.float32
    model = load_model(model_dir, tdtype)
    V = model.cfg.vocab
    out = {"logprobs": []}
    if top:
        out["topIds"], out["topLogprobs"] = [], []
    if last:
        out["lastLogits"], out["lastLogprobs"] = [], []
    with torch.no_grad():
        for s in seqs:
            if min(s) < 0 or max(s) >= V:
                raise InputError(f"token id out of range [0, {V})")
            logits = model.forward(torch.tensor(s))  # [n, V]
            lp = torch.log_softmax(logits, dim=-1)
            ids = torch.tensor(s[1:], dtype=torch.long)
            out["logprobs"].append(lp[:-1].gather(1, ids[:, None])[:, 0].tolist())
            if top:
                k = min(top, V)
                a = lp.numpy()
                # stable sort of -lp: equal values keep ascending id order
                order = np.argsort(-a, axis=1, kind="stable")[:, :k]
                out["topIds"].append(order.tolist())
                out["topLogprobs"].append(np.take_along_axis(a, order, axis=1).tolist())
            if last:
                out["lastLogits"].append(logits[-1].tolist())
                out["lastLogprobs"].append(lp[-1].tolist())
    return out


def main():
    try:
        req = json.loads(sys.stdin.read())
        # allow_nan=False: JSON has no NaN/Infinity, JS JSON.parse would choke on them
        text = json.dumps(run(req), allow_nan=False)
    except (InputError, json.JSONDecodeError) as e:
        print(f"logprobs.py: bad input: {e}", file=sys.stderr)
        sys.exit(2)
    except Exception as e:  # model folder unreadable, unsupported config, ...
        print(f"logprobs.py: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
