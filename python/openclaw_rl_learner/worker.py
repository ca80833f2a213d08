"""The learner process. Global rank 0 reads JSON-line requests on stdin and answers on stdout
({"type": "ready" | "fatal" | "reply" | "failed", ...}); every request is broadcast so all ranks
take part in each step. Only rank 0 writes checkpoints and versions; the others get rank 0's
state by broadcast at start, so other nodes need the model folder only, not the data folder.
Non-finite numbers travel as null (JSON has no NaN)."""

import hashlib
import json
import math
import os
import sys
import time
from datetime import timedelta

from .preflight import check


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


class Channel:
    """Rank 0's pipe to Node; stdout is kept for it alone (stray prints go to stderr)."""

    def __init__(self):
        self.out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
        sys.stdout = sys.stderr

    def send(self, msg):
        self.out.write(json.dumps(_clean(msg), allow_nan=False) + "\n")
        self.out.flush()

    def receive(self):
        line = sys.stdin.readline()
        return json.loads(line) if line else {"op": "shutdown"}  # EOF: Node is gone


def check_sample(s, i, loss_kind):
    n = len(s["completionIds"])
    problems = []
    if not s["promptIds"]:
        problems.append("promptIds is empty")
    if n == 0:
        problems.append("completionIds is empty")
    for key in ("advantages", "rolloutLogprobs", "oldLogprobs", "mask"):
        if s.get(key) is not None and len(s[key]) != n:
            problems.append(f"{key} has {len(s[key])}")
    top = s.get("teacherTop")
    if top and (len(top["ids"]) != n or len(top["logprobs"]) != n):
        problems.append(f"teacherTop has {len(top['ids'])} id rows and {len(top['logprobs'])} log-prob rows")
    if problems:
        raise ValueError(f"sample {i}: {', '.join(problems)}, but completionIds has {n} tokens")
    if loss_kind == "topk" and not top:
        raise ValueError("the top-k loss needs teacherTop on every sample")


def run(device_kind):
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    channel = Channel() if rank == 0 else None
    report = check(device_kind, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    if not report["ok"]:
        message = "the PyTorch learner cannot start: " + "; ".join(report["missing"])
        print(message, file=sys.stderr)
        if channel:
            channel.send({"type": "fatal", "message": message})
        return 3
    if device_kind == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device(device_kind)
    if world > 1:
        dist.init_process_group("nccl" if device_kind == "cuda" else "gloo", timeout=timedelta(minutes=30))

    def broadcast(obj):
        if world == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    try:
        start = broadcast(channel.receive() if channel else None)
        cfg = start["config"]
        if cfg.get("shard", "none") not in ("none", "optimizer"):
            raise ValueError(f"shard {cfg['shard']!r}: this learner shards none or optimizer")
        cfg["bf16"] = device_kind == "cuda" and report["bf16"] and cfg.get("precision", "auto") != "fp32"
        from .learner import Learner
        from . import store
        if rank != 0:
            cfg = {**cfg, "initAdapter": None}  # rank 0's values arrive by broadcast below
        learner = Learner(cfg, device, rank, world)
        config_hash = hashlib.sha256(json.dumps({"config": learner.model.cfg.raw, "mode": cfg["mode"]},
                                                sort_keys=True).encode()).hexdigest()[:16]
        meta = {"step": 0, "publishedVersion": 0, "consumedSampleIds": []}
        restored = None
        if rank == 0 and cfg.get("checkpointDir"):
            restored = store.load_checkpoint(cfg["checkpointDir"], list(learner.trainable), config_hash)
            if restored is not None:
                meta = restored["meta"]
                with torch.no_grad():
                    for k, p in learner.trainable.items():
                        p.copy_(restored["trainable"][k])
        meta = broadcast(meta)
        learner.optimizer.step_count = int(meta["step"])
        learner.optimizer.moments_from = int(meta.get("momentsFrom", 0))
        if world > 1:
            with torch.no_grad():
                for t in learner.trainable.values():
                    dist.broadcast(t, src=0)
        learner.load_optimizer(restored["optimizer"] if restored else None)
        elements = [learner.optimizer_elements()] * world
        if world > 1:
            dist.all_gather_object(elements, elements[0])
    except Exception as e:  # unreadable model, bad checkpoint, out of memory, ...
        message = f"the PyTorch learner failed to start: {type(e).__name__}: {e}"
        print(message, file=sys.stderr)
        if channel:
            channel.send({"type": "fatal", "message": message})
        return 4
    version = max(int(cfg.get("versionAfter", 0)), int(meta.get("publishedVersion", 0)))
    if channel:
        channel.send({"type": "ready", "status": {
            "steps": learner.steps, "version": version, "consumedSampleIds": meta["consumedSampleIds"],
            "torch": torch.__version__, "device": str(device), "bf16": cfg["bf16"], "world": world,
            "shard": "optimizer" if learner.sharded else "none", "optimizerElements": elements}})

    while True:
        req = broadcast(channel.receive() if channel else None)
        op = req.get("op")
        try:
            if op == "shutdown":
                result = None
            elif op == "logprobs":
                result = learner.gather_logprobs(req["samples"])
            elif op == "forwardBackward":
                for i, s in enumerate(req["samples"]):
                    check_sample(s, i, req["loss"]["kind"])
                result = learner.forward_backward_batch(req["samples"], req["loss"], req["batchSize"])
            elif op == "optimStep":
                learner.all_reduce_grads()
                result = learner.optim_step()
            elif op == "publish":
                version += 1
                result = {"version": version, "path": None}
                if rank == 0:
                    t0 = time.perf_counter()
                    result["path"] = store.publish_version(
                        cfg["versionsDir"], version, learner.lora_spec, learner.trainable, cfg["modelDir"],
                        cfg.get("baseModel", cfg["modelDir"]), cfg.get("keepVersions", 2))
                    result["writeMs"] = (time.perf_counter() - t0) * 1000
            elif op == "restore":
                learner.restore(req["path"])
                result = None
            elif op == "save":
                result = None
                moments = learner.optimizer_state()
                if rank == 0:
                    store.save_checkpoint(
                        cfg["checkpointDir"],
                        {"step": learner.steps, "momentsFrom": learner.optimizer.moments_from,
                         "configHash": config_hash, "publishedVersion": version,
                         "consumedSampleIds": req.get("consumedSampleIds", []), "mode": cfg["mode"]},
                        learner.trainable, *moments)
            else:
                raise ValueError(f"unknown request {op!r}")
            if channel:
                channel.send({"type": "reply", "id": req.get("id"), "result": result})
        except Exception as e:
            if channel:
                channel.send({"type": "failed", "id": req.get("id"), "message": f"{type(e).__name__}: {e}"})
        if op == "shutdown":
            break
    if world > 1:
        dist.destroy_process_group()
    return 0
