"""The Learner contract of src/engine/learner.ts over data-parallel ranks; learn/ppo.ts (in Node)
drives it: the anchor, epochs and mini-batches are its.

  logprobs: each rank computes its share of the samples (sample j goes to rank j % world), and
  rank 0 gathers them. forwardBackward: each rank forward/backwards its share in micro-batches;
  metric sums are all-reduced. optimStep: gradients are all-reduced and every rank applies the
  same AdamW step to its replica (or, with shard "optimizer", each rank steps its slice of the
  parameters and keeps AdamW's moments for it only: shard.py). Losses are divided by the
  mini-batch's sample count, so the reduced gradient is the one-rank gradient."""

import contextlib
import json
import os

import torch
import torch.distributed as dist

from . import losses, model as mdl, st_io
from .optim import AdamW
from .shard import ShardedAdamW

MEANS = ("clipFraction", "approxKl", "entropy", "tisMean", "rolloutAbsDiff")


def sums_of(m):
    """A forward_backward result as summable numbers: loss, tokens, and each mean times tokens."""
    return torch.tensor([m["loss"], m["tokens"]] + [m[k] * m["tokens"] for k in MEANS], dtype=torch.float64)


class Learner:
    def __init__(self, cfg, device, rank, world, restored=None):
        self.cfg, self.device, self.rank, self.world = cfg, device, rank, world
        self.model = mdl.load(cfg["modelDir"], device)
        self.bf16 = cfg.get("bf16", False)
        mode = cfg["mode"]
        if mode["kind"] == "lora":
            self.lora_spec = mode["spec"]
            tensors = mdl.lora_tensors(self.model.cfg, self.lora_spec, cfg.get("initAdapter"), cfg.get("seed", 0),
                                       device)
            if restored is not None:
                for k in tensors:
                    tensors[k].copy_(restored["trainable"][k])
            mdl.attach_lora(self.model, tensors, self.lora_spec)
            self.trainable = tensors
        else:
            self.lora_spec = None
            # The frozen base for the KL term: a copy only when the caller asked for one.
            self.reference = mdl.Decoder(self.model.cfg, {k: v.clone() for k, v in self.model.weights.items()}) \
                if cfg.get("keepReference") else None
            if restored is not None:
                for k, v in self.model.weights.items():
                    v.copy_(restored["trainable"][k])
            self.trainable = self.model.weights
        for p in self.trainable.values():
            p.requires_grad_(True)
        self.sharded = cfg.get("shard", "none") == "optimizer" and world > 1
        if self.sharded:
            self.optimizer = ShardedAdamW(self.trainable, cfg["optimizer"], rank, world)
        else:
            self.optimizer = AdamW(self.trainable, cfg["optimizer"], restored["optimizer"] if restored else None)

    @property
    def steps(self):
        return self.optimizer.step_count

    def _autocast(self):
        if self.bf16 and self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _tokens(self, s):
        return torch.tensor(s["promptIds"] + s["completionIds"], dtype=torch.long, device=self.device)

    def _logp(self, s, reference=False):
        with self._autocast():
            if reference and self.lora_spec is None:
                if self.reference is None:
                    raise ValueError("a KL term under full fine-tuning needs the learner started with keepReference")
                return self.reference.completion_logp(self._tokens(s), len(s["promptIds"]))
            return self.model.completion_logp(self._tokens(s), len(s["promptIds"]), use_lora=not reference)

    def own(self, samples):
        return [s for j, s in enumerate(samples) if j % self.world == self.rank]

    @torch.no_grad()
    def logprobs(self, samples, reference=False):
        out = []
        for s in samples:
            lp = self._logp(s, reference)
            out.append(lp.gather(1, torch.tensor(s["completionIds"], device=self.device)[:, None])[:, 0])
        return out

    def _micro_batches(self, samples):
        batch, tokens = [], 0
        for s in samples:
            n = len(s["promptIds"]) + len(s["completionIds"])
            if batch and tokens + n > self.cfg["microBatchTokens"]:
                yield batch
                batch, tokens = [], 0
            batch.append(s)
            tokens += n
        if batch:
            yield batch

    def gather_logprobs(self, samples):
        """Every sample's completion log-probs (lists, on rank 0; None elsewhere), each rank its share."""
        mine = [lp.float().tolist() for lp in self.logprobs(self.own(samples))]
        if self.world == 1:
            return mine
        parts = [None] * self.world
        dist.all_gather_object(parts, mine)
        if self.rank != 0:
            return None
        return [parts[j % self.world][j // self.world] for j in range(len(samples))]

    def forward_backward_batch(self, samples, loss_cfg, batch_size):
        """Each rank's share of `samples` in micro-batches; the metrics reduced over the ranks."""
        acc = torch.zeros(2 + len(MEANS), dtype=torch.float64)
        for micro in self._micro_batches(self.own(samples)):
            acc += sums_of(self.forward_backward(micro, loss_cfg, batch_size))
        return self.reduce_metrics(acc)

    def reduce_metrics(self, acc):
        """Sums from sums_of over every rank -> the loss, trained tokens and token-weighted means."""
        if self.world > 1:
            dist.all_reduce(acc)
        n = float(acc[1])
        means = {k: float(v) / n if n > 0 else 0.0 for k, v in zip(MEANS, acc[2:])}
        return {"loss": float(acc[0]), "tokens": n, **means}

    @torch.no_grad()
    def restore(self, path):
        """A rollback: the trained weights become a published version's (path: its folder) or, with
        None, the start of training; AdamW's moments belong to the abandoned weights and are reset
        (the step count goes on). Rank 0 reads, the others receive by broadcast. A folder that does
        not fit this learner changes nothing."""
        values, error = None, None
        if self.rank == 0:
            try:
                values = self._version_values(path)
            except Exception as e:  # noqa: BLE001 - every rank must learn of it
                error = f"{type(e).__name__}: {e}"
        if self.world > 1:
            box = [error]
            dist.broadcast_object_list(box, src=0)
            error = box[0]
        if error is not None:
            raise ValueError(error)
        for k, p in self.trainable.items():
            if self.rank == 0:
                p.copy_(values[k])
            if self.world > 1:
                dist.broadcast(p, src=0)
        self.optimizer.reset_moments()
        self.optimizer.zero_grad()

    def _version_values(self, path):
        """{trainable name: CPU tensor} of a version folder (None: the start), checked against this learner."""
        cfg, spec = self.cfg, self.lora_spec
        lora_folder = path is not None and os.path.exists(os.path.join(path, "adapter_config.json"))
        if path is not None and not os.path.isdir(path):
            raise FileNotFoundError(f"{path} is not a folder")
        if spec is not None:
            if path is not None:
                if not lora_folder:
                    raise ValueError(f"{path} holds full weights, this learner trains a LoRA adapter")
                with open(os.path.join(path, "adapter_config.json")) as f:
                    a = json.load(f)
                theirs = (a.get("r"), a.get("lora_alpha"), sorted(a.get("target_modules") or []))
                ours = (spec["rank"], spec["alpha"],
                        sorted(mdl.MODULES[t].split(".")[-1] for t in spec["targets"]))
                if theirs != ours:
                    raise ValueError(f"{path} holds a LoRA adapter of another shape than this learner trains")
            # None: the adapter training started from (the initial adapter, or the seeded init).
            return mdl.lora_tensors(self.model.cfg, spec, path if path is not None else cfg.get("initAdapter"),
                                    cfg.get("seed", 0), "cpu")
        if lora_folder:
            raise ValueError(f"{path} holds a LoRA adapter, this learner trains full weights")
        source = path if path is not None else cfg["modelDir"]
        loaded = st_io.load_folder(source)
        for k, p in self.trainable.items():
            if k not in loaded or tuple(loaded[k].shape) != tuple(p.shape):
                raise ValueError(f"{source}: needs {k} of shape {list(p.shape)}")
        return loaded

    def optimizer_elements(self):
        """The elements of AdamW's state this rank holds."""
        if self.sharded:
            return self.optimizer.state_elements()
        return sum(t.numel() for t in self.optimizer.m.values()) + sum(t.numel() for t in self.optimizer.v.values())

    @torch.no_grad()
    def load_optimizer(self, state):
        """state: a checkpoint's whole moments on rank 0 (None for a fresh start; ignored elsewhere)."""
        if self.sharded:
            self.optimizer.scatter_state(state)
            return
        if state is not None and self.rank == 0:
            for k in self.trainable:
                self.optimizer.m[k].copy_(state["m"][k])
                self.optimizer.v[k].copy_(state["v"][k])
        if self.world > 1:
            for k in self.trainable:
                dist.broadcast(self.optimizer.m[k], src=0)
                dist.broadcast(self.optimizer.v[k], src=0)

    def optimizer_state(self):
        """-> (m, v) whole on rank 0, None elsewhere (every rank must call it)."""
        if self.sharded:
            return self.optimizer.gather_state()
        return (self.optimizer.m, self.optimizer.v) if self.rank == 0 else None

    def all_reduce_grads(self):
        # The sharded optimizer sums each slice's gradients itself.
        if self.world == 1 or self.sharded:
            return
        params = list(self.trainable.values())
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        dist.all_reduce(flat)
        o = 0
        for p in params:
            p.grad = flat[o:o + p.numel()].view_as(p).clone()
            o += p.numel()

    def optim_step(self):
        r = self.optimizer.step()
        self.optimizer.zero_grad()
        return r

    def forward_backward(self, samples, loss_cfg, batch_size):
        """Adds the gradients of this micro-batch's loss (divided by batch_size samples)."""
        total, acc = 0.0, {"tokens": 0.0, "clip": 0.0, "kl": 0.0, "entropy": 0.0, "tis": 0.0, "rollout": 0.0}
        has_rollout = all(s.get("rolloutLogprobs") is not None for s in samples)
        f32 = dict(dtype=torch.float32, device=self.device)
        for i, s in enumerate(samples):
            logp = self._logp(s)
            mask = torch.tensor(s["mask"] if s.get("mask") is not None else [1.0] * len(s["completionIds"]), **f32)
            losses.check_mask(mask, i)
            ids = torch.tensor(s["completionIds"], device=self.device)
            if loss_cfg["kind"] == "topk":
                top = s["teacherTop"]
                t_ids = torch.tensor(top["ids"], dtype=torch.long, device=self.device)
                teacher = torch.tensor([losses.finite_or_nan(r) for r in top["logprobs"]], **f32)
                loss, sums = losses.topk_terms(logp, t_ids, teacher, mask, loss_cfg["entropyCoef"], batch_size)
                sums.update(clip=0.0, tis=sums["tokens"], rollout=0.0)
            else:
                lp = logp.gather(1, ids[:, None])[:, 0]
                ent = -(logp.exp() * logp).sum(-1)
                old = s["oldLogprobs"] if s.get("oldLogprobs") is not None else lp.detach()
                old = old if torch.is_tensor(old) else torch.tensor(losses.finite_or_nan(old), **f32)
                adv = torch.tensor(s["advantages"], **f32)
                rollout = torch.tensor(losses.finite_or_nan(s["rolloutLogprobs"]), **f32) if has_rollout else None
                ref = self.logprobs([s], reference=True)[0] if loss_cfg["klCoef"] > 0 else None
                loss, sums = losses.policy_terms(lp, ent, old, adv, mask, rollout, ref, loss_cfg, batch_size)
            if loss.requires_grad:
                loss.backward()
            total += float(loss)
            for k in acc:
                acc[k] += sums[k]
        n = acc["tokens"]
        mean = (lambda x: x / n) if n > 0 else (lambda x: 0.0)
        return {"loss": total, "tokens": n, "clipFraction": mean(acc["clip"]), "approxKl": mean(acc["kl"]),
                "entropy": mean(acc["entropy"]), "tisMean": mean(acc["tis"]) if loss_cfg["kind"] == "policy" else 1.0,
                "rolloutAbsDiff": mean(acc["rollout"])}
