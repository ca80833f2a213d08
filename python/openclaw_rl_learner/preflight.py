"""What this Python's PyTorch can do, checked before anything loads, so a missing piece is
named up front instead of failing mid-run. Importable without torch (that is the first check)."""

import sys

MIN_TORCH = (1, 13)


def fsdp_status():
    """None when torch.distributed.fsdp imports on this PyTorch, else why not (in words)."""
    try:
        import torch.distributed.fsdp  # noqa: F401
    except Exception as e:  # Debian's 1.13 on Python 3.11 raises a dataclass ValueError inside torch
        return f"{type(e).__name__}: {e}"
    return None


def check(device, world, shard="none"):
    """-> {"ok", "python", "torch", "bf16", "fsdp", "missing": [sentences a person can act on]};
    fsdp: whether torch's FSDP imports here (the learner shards with its own collectives instead)."""
    out = {"ok": False, "python": sys.executable, "torch": None, "bf16": False, "fsdp": False, "missing": []}
    miss = out["missing"]
    try:
        import numpy  # noqa: F401
    except ImportError:
        miss.append(f"numpy is not installed for {sys.executable} (Debian: apt install python3-numpy)")
    try:
        import torch
    except ImportError as e:
        miss.append(f"PyTorch is not installed for {sys.executable} ({e}); install python3-torch (Debian) "
                    "or PyTorch >= 1.13, or point --learner-python at a Python that has it")
        return out
    out["torch"] = torch.__version__
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2] if x.isdigit())
    if version < MIN_TORCH:
        miss.append(f"PyTorch {torch.__version__} is too old; the learner needs >= {'.'.join(map(str, MIN_TORCH))}")
    import torch.distributed as dist
    if not dist.is_available():
        miss.append("this PyTorch was built without torch.distributed, which the launcher needs")
    elif device == "cpu" and not dist.is_gloo_available():
        miss.append("this PyTorch has no gloo backend, which data-parallel ranks on the CPU need")
    if device == "cuda":
        if not torch.cuda.is_available():
            miss.append("--learner-device cuda, but this PyTorch sees no CUDA device (CPU-only build, or no driver)")
        elif torch.cuda.device_count() < world:
            miss.append(f"{world} ranks per node need {world} CUDA devices, this node has {torch.cuda.device_count()}")
        elif world > 1 and not (dist.is_available() and dist.is_nccl_available()):
            miss.append("this PyTorch has no NCCL backend, which several CUDA ranks need")
        else:
            out["bf16"] = bool(torch.cuda.is_bf16_supported())
    fsdp_error = fsdp_status() if dist.is_available() else "no torch.distributed"
    out["fsdp"] = fsdp_error is None
    if shard == "fsdp":
        why = f"torch.distributed.fsdp does not even import on PyTorch {torch.__version__} ({fsdp_error})" \
            if fsdp_error else "torch's FSDP imports on this PyTorch"
        miss.append(f"--learner-shard fsdp: {why}, but this learner does not implement FSDP sharding; "
                    "use --learner-shard optimizer (AdamW's state sharded over the ranks) or none")
    elif shard not in ("none", "optimizer"):
        miss.append(f"unknown shard {shard!r}: use none or optimizer")
    if device == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            miss.append("--learner-device mps, but this PyTorch has no usable MPS (Apple GPU) backend")
        if world > 1:
            miss.append("MPS runs one rank only (PyTorch has no collective backend for it): use --learner-nproc 1")
    out["ok"] = not miss
    return out
