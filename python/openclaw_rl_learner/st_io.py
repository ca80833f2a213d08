"""safetensors read/write with numpy (Debian ships no `safetensors` package).

Format: u64 little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
then the raw little-endian tensor bytes."""

import json
import os
import struct

import numpy as np
import torch

_NP = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}


def read_header(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > size - 8:
            raise ValueError(f"{path}: header length {n} runs past the end of the file")
        header = json.loads(f.read(n).decode("utf-8"))
    header.pop("__metadata__", None)
    return header, 8 + n


def read(path, names=None):
    """{name: float32 CPU tensor} for every tensor (or only `names`)."""
    header, start = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            if names is not None and name not in names:
                continue
            tag = info["dtype"]
            if tag not in _NP:
                raise ValueError(f"{path}: tensor {name} has unsupported dtype {tag}")
            b, e = info["data_offsets"]
            f.seek(start + b)
            buf = bytearray(f.read(e - b))
            if len(buf) != e - b:
                raise ValueError(f"{path}: file truncated in tensor {name}")
            a = np.frombuffer(buf, dtype=_NP[tag])
            if tag == "BF16":
                # bf16 is the upper half of a float32.
                a = (a.astype(np.uint32) << 16).view(np.float32)
            out[name] = torch.from_numpy(a.astype(np.float32).reshape([int(d) for d in info["shape"]]))
    return out


def write(path, tensors):
    """Writes {name: tensor} as F32, durably (fsync) with a private mode (0600)."""
    header, blobs, off = {}, [], 0
    for name in tensors:
        data = tensors[name].detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4", copy=False).tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for data in blobs:
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def load_folder(folder):
    """Every tensor of a model folder (model.safetensors, or an index and its shards)."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        out = {}
        for name in files:
            out.update(read(os.path.join(folder, name)))
        return out
    single = os.path.join(folder, "model.safetensors")
    if not os.path.exists(single):
        raise FileNotFoundError(f"{folder}: no model.safetensors or model.safetensors.index.json")
    return read(single)
