#!/bin/sh
# The PyTorch learner on one NVIDIA GPU, in under 10 minutes: Qwen3-0.6B and 1.7B shapes, LoRA and
# full fine-tuning; tokens/s, peak GPU memory, and one step's update against the CPU's.
#   scripts/gpu-check-learner.sh                      # needs python3 with CUDA PyTorch >= 1.13
#   PYTHON=/path/to/python scripts/gpu-check-learner.sh --shapes qwen3-0.6b
# On a machine without a GPU, `--device cpu --shapes tiny` runs the same code paths on the CPU.
set -eu
PYTHON=${PYTHON:-${OPENCLAW_RL_PYTHON:-python3}}
here=$(cd "$(dirname "$0")" && pwd)
device=cuda
for a in "$@"; do [ "$a" = cpu ] && device=cpu; done
# What is missing, in words, before anything heavy starts.
PYTHONPATH="$here/../python" "$PYTHON" -m openclaw_rl_learner --check --device "$device" >/dev/null || {
  PYTHONPATH="$here/../python" "$PYTHON" -m openclaw_rl_learner --check --device "$device" >&2 || true
  echo "gpu-check-learner: this Python's PyTorch cannot run the learner on $device (see above)" >&2
  exit 2
}
exec timeout 570 "$PYTHON" "$here/gpu_check_learner.py" "$@"
