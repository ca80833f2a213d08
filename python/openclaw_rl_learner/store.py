"""What the learner leaves on disk, each appearing atomically (written aside, fsynced, renamed):

  checkpoints:  <dir>/latest names <dir>/step-<step>-<id>/ (checkpoint.json + state.safetensors
                with trainable.<name>, adam.m.<name>, adam.v.<name>); the rename of `latest` commits.
  versions:     <dir>/v-<version>/ : a PEFT LoRA adapter folder, or a full model folder (weights
                plus the base folder's config and tokenizer files), which the sampler loads."""

import json
import os
import secrets
import shutil

from . import st_io
from .model import MODULES, TARGETS

FORMAT = "openclaw-rl-torch-checkpoint/1"


def _private_dir(path):
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)


def _write_text(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _clear_leftovers(dir_, prefixes):
    for e in os.listdir(dir_):
        if e.startswith(prefixes):
            shutil.rmtree(os.path.join(dir_, e), ignore_errors=True) if os.path.isdir(os.path.join(dir_, e)) \
                else os.unlink(os.path.join(dir_, e))


def save_checkpoint(dir_, meta, trainable, m, v):
    _private_dir(dir_)
    _clear_leftovers(dir_, (".tmp-", "latest.tmp"))
    name = f"step-{meta['step']:010d}-{secrets.token_hex(4)}"
    tmp = os.path.join(dir_, ".tmp-" + name)
    _private_dir(tmp)
    tensors = {f"trainable.{k}": t for k, t in trainable.items()}
    tensors.update({f"adam.m.{k}": t for k, t in m.items()})
    tensors.update({f"adam.v.{k}": t for k, t in v.items()})
    st_io.write(os.path.join(tmp, "state.safetensors"), tensors)
    _write_text(os.path.join(tmp, "checkpoint.json"), json.dumps({"format": FORMAT, **meta}) + "\n")
    _fsync_dir(tmp)
    os.rename(tmp, os.path.join(dir_, name))
    _fsync_dir(dir_)
    _write_text(os.path.join(dir_, "latest.tmp"), name + "\n")
    os.rename(os.path.join(dir_, "latest.tmp"), os.path.join(dir_, "latest"))  # the commit point
    _fsync_dir(dir_)
    for e in os.listdir(dir_):
        if e.startswith("step-") and e != name:
            shutil.rmtree(os.path.join(dir_, e), ignore_errors=True)


def load_checkpoint(dir_, names, config_hash):
    """The committed checkpoint or None; a checkpoint of another model or mode is an error."""
    pointer = os.path.join(dir_, "latest")
    if not os.path.exists(pointer):
        return None
    with open(pointer) as f:
        version = os.path.join(dir_, f.read().strip())
    with open(os.path.join(version, "checkpoint.json")) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        raise ValueError(f"{version}: format {meta.get('format')!r}, expected {FORMAT!r}")
    if meta["configHash"] != config_hash:
        raise ValueError(f"the checkpoint in {dir_} belongs to another model or training mode; "
                         "move it away or choose another data folder")
    state = st_io.read(os.path.join(version, "state.safetensors"))
    pick = lambda prefix: {k: state[prefix + k] for k in names}  # noqa: E731
    return {"meta": meta, "trainable": pick("trainable."),
            "optimizer": {"m": pick("adam.m."), "v": pick("adam.v."), "step": meta["step"]}}


def publish_version(dir_, version, lora_spec, trainable, model_dir, base_model, keep=2):
    """Writes v-<version> atomically and removes the versions numbered `keep` or more below it
    (keep >= 2: the previous one, which a reader may still be loading, stays; None keeps all, for
    rollbacks). Returns the folder."""
    _private_dir(dir_)
    _clear_leftovers(dir_, (".tmp-",))
    final = os.path.join(dir_, f"v-{version}")
    tmp = os.path.join(dir_, f".tmp-v-{version}-{secrets.token_hex(4)}")
    _private_dir(tmp)
    if lora_spec is not None:
        st_io.write(os.path.join(tmp, "adapter_model.safetensors"), trainable)
        config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_model,
                  "r": lora_spec["rank"], "lora_alpha": lora_spec["alpha"], "lora_dropout": 0,
                  "target_modules": [MODULES[t].split(".")[-1] for t in TARGETS if t in lora_spec["targets"]],
                  "bias": "none", "fan_in_fan_out": False, "inference_mode": True, "use_rslora": False,
                  "use_dora": False, "modules_to_save": None}
        _write_text(os.path.join(tmp, "adapter_config.json"), json.dumps(config, indent=2) + "\n")
    else:
        st_io.write(os.path.join(tmp, "model.safetensors"), trainable)
        for e in os.listdir(model_dir):
            src = os.path.join(model_dir, e)
            if os.path.isfile(src) and not e.endswith(".safetensors") and e != "model.safetensors.index.json":
                shutil.copyfile(src, os.path.join(tmp, e))
                os.chmod(os.path.join(tmp, e), 0o600)
    _fsync_dir(tmp)
    if os.path.exists(final):  # left by a run that crashed before its checkpoint named it
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(dir_)
    for e in os.listdir(dir_):
        if keep is not None and e.startswith("v-") and e[2:].isdigit() and int(e[2:]) <= version - keep:
            shutil.rmtree(os.path.join(dir_, e), ignore_errors=True)
    return final
