"""AdamW with its state sharded over the ranks (ZeRO stage 1, with plain torch.distributed
collectives). The trainable tensors, in their dict order, are one flat vector of `total`
elements, padded to `world * chunk`; rank r owns elements [r * chunk, (r + 1) * chunk) and keeps
AdamW's moments for them only. A step: the gradients are summed over the ranks into each owner's
slice (reduce_scatter on NCCL; gloo has none, so all_reduce and keep the slice), the global norm
comes from the slices' squared norms (one all_reduce), each rank applies optim.AdamW's arithmetic
to its slice, and the updated slices are all_gathered so every rank holds the full weights for
the next forward. The weights are fp32 (bf16 is autocast only), so there is no master copy to
shard. Gradients and weights stay whole on every rank while the backward runs (stage 1, not 2);
the step holds one whole-size flat buffer at a time (the gradients, then the weights)."""

import math

import torch
import torch.distributed as dist

from .optim import AdamW


class ShardedAdamW(AdamW):
    def __init__(self, params, cfg, rank, world):
        self.params, self.cfg, self.rank, self.world = params, cfg, rank, world
        self.total = sum(p.numel() for p in params.values())
        self.chunk = -(-self.total // world)
        first = next(iter(params.values()))
        self.m = torch.zeros(self.chunk, dtype=first.dtype, device=first.device)
        self.v = torch.zeros_like(self.m)
        self.step_count = 0
        self.moments_from = 0
        self.reduce_scatter = dist.get_backend() == "nccl"
        # (start, end) within this rank's slice of each tensor it overlaps, and its weight decay.
        lo, hi = rank * self.chunk, min(self.total, (rank + 1) * self.chunk)
        self.segments, o = [], 0
        for p in params.values():
            a, b = max(o, lo), min(o + p.numel(), hi)
            if a < b:
                self.segments.append((a - lo, b - lo, cfg["weightDecay"] if p.dim() >= 2 else 0.0))
            o += p.numel()

    @torch.no_grad()
    def reset_moments(self):
        self.m.zero_()
        self.v.zero_()
        self.moments_from = self.step_count

    def state_elements(self):
        return self.m.numel() + self.v.numel()

    def _flat(self, tensors):
        pad = self.chunk * self.world - self.total
        parts = [t.reshape(-1).to(self.m.device, self.m.dtype) for t in tensors]
        return torch.cat(parts + [torch.zeros(pad, dtype=self.m.dtype, device=self.m.device)])

    def _unflat(self, flat):
        out, o = {}, 0
        for k, p in self.params.items():
            out[k] = flat[o:o + p.numel()].view_as(p)
            o += p.numel()
        return out

    @torch.no_grad()
    def step(self):
        grads = self._flat([p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params.values()])
        # One whole-size buffer at a time: the gradients, then (below) the weights.
        self.zero_grad()
        chunks = list(grads.split(self.chunk))
        if self.reduce_scatter:
            g = torch.empty_like(chunks[0])
            dist.reduce_scatter(g, chunks)
        else:
            dist.all_reduce(grads)
            g = chunks[self.rank].clone()
        del grads, chunks
        squares = g.double().pow(2).sum()
        dist.all_reduce(squares)
        norm = math.sqrt(float(squares))
        if not math.isfinite(norm):
            return {"gradNorm": norm, "applied": False, "lr": 0.0, "step": self.step_count}
        c = self.cfg
        clip = 1.0 if c["maxGradNorm"] is None else min(1.0, c["maxGradNorm"] / (norm + 1e-6))
        self.step_count += 1
        step = self.step_count
        lr = self.lr_at(step)
        bc1, bc2 = self.bias_corrections(step)
        g = g * clip
        self.m.mul_(c["beta1"]).add_(g, alpha=1 - c["beta1"])
        self.v.mul_(c["beta2"]).addcmul_(g, g, value=1 - c["beta2"])
        weights = self._flat([p.detach() for p in self.params.values()])
        slices = list(weights.split(self.chunk))
        mine = slices[self.rank].clone()
        for a, b, wd in self.segments:
            m, v, p = self.m[a:b], self.v[a:b], mine[a:b]
            p.sub_(lr * (m / bc1 / (torch.sqrt(v / bc2) + c["eps"]) + wd * p))
        dist.all_gather(slices, mine)
        for k, t in self._unflat(weights).items():
            self.params[k].copy_(t)
        return {"gradNorm": norm, "applied": True, "lr": lr, "step": step}

    @torch.no_grad()
    def gather_state(self):
        """-> ({name: m}, {name: v}) whole on rank 0, None elsewhere (every rank must call it)."""
        whole = []
        for mine in (self.m, self.v):
            parts = [torch.empty_like(mine) for _ in range(self.world)] if self.rank == 0 else None
            dist.gather(mine, parts, dst=0)
            if self.rank == 0:
                whole.append(self._unflat(torch.cat(parts)))
        return tuple(whole) if self.rank == 0 else None

    @torch.no_grad()
    def scatter_state(self, state):
        """state: a checkpoint's whole {"m": {...}, "v": {...}} on rank 0 (None there for a fresh
        start; ignored elsewhere); every rank receives its slices (every rank must call it)."""
        for mine, key in ((self.m, "m"), (self.v, "v")):
            parts = None
            if self.rank == 0:
                whole = [state[key][k] if state else torch.zeros_like(p) for k, p in self.params.items()]
                parts = list(self._flat(whole).split(self.chunk))
            dist.scatter(mine, parts, src=0)
