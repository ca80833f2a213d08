"""AdamW as src/engine/local/train/optimizer.ts does it: global-norm clipping with the same
coefficient as torch.nn.utils.clip_grad_norm_, linear warm-up, bias-corrected moments and
decoupled weight decay p -= lr * wd * p on matrices and embeddings only (dims >= 2). After a
rollback the moments restart from zero at `moments_from` and the bias correction counts from there."""

import math

import torch


class AdamW:
    def __init__(self, params, cfg, state=None):
        """params: {name: tensor requiring grad}; state: {"m": {...}, "v": {...}, "step": n} to resume."""
        self.params, self.cfg = params, cfg
        self.m = {k: torch.zeros_like(p) for k, p in params.items()}
        self.v = {k: torch.zeros_like(p) for k, p in params.items()}
        self.step_count = 0
        self.moments_from = 0
        if state is not None:
            for k in params:
                self.m[k].copy_(state["m"][k])
                self.v[k].copy_(state["v"][k])
            self.step_count = int(state["step"])
            self.moments_from = int(state.get("momentsFrom", 0))

    @torch.no_grad()
    def reset_moments(self):
        """Zeroes the moments (they belong to weights a rollback abandoned); the step count goes on."""
        for t in list(self.m.values()) + list(self.v.values()):
            t.zero_()
        self.moments_from = self.step_count

    def bias_corrections(self, step):
        c, n = self.cfg, step - self.moments_from
        return 1 - c["beta1"] ** n, 1 - c["beta2"] ** n

    def lr_at(self, step):
        lr, warm = self.cfg["lr"], self.cfg["warmupSteps"]
        return lr * min(1.0, step / warm) if warm > 0 else lr

    def zero_grad(self):
        for p in self.params.values():
            p.grad = None

    @torch.no_grad()
    def step(self):
        grads = {k: (p.grad if p.grad is not None else torch.zeros_like(p)) for k, p in self.params.items()}
        norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads.values()))
        if not math.isfinite(norm):
            return {"gradNorm": norm, "applied": False, "lr": 0.0, "step": self.step_count}
        c = self.cfg
        clip = 1.0 if c["maxGradNorm"] is None else min(1.0, c["maxGradNorm"] / (norm + 1e-6))
        self.step_count += 1
        step = self.step_count
        lr = self.lr_at(step)
        bc1, bc2 = self.bias_corrections(step)
        for k, p in self.params.items():
            g = grads[k] * clip
            m, v = self.m[k], self.v[k]
            m.mul_(c["beta1"]).add_(g, alpha=1 - c["beta1"])
            v.mul_(c["beta2"]).addcmul_(g, g, value=1 - c["beta2"])
            wd = c["weightDecay"] if p.dim() >= 2 else 0.0
            update = m / bc1 / (torch.sqrt(v / bc2) + c["eps"]) + wd * p
            p.sub_(lr * update)
        return {"gradNorm": norm, "applied": True, "lr": lr, "step": step}
