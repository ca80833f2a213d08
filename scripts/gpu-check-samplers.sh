#!/bin/sh
# llama.cpp on one NVIDIA GPU through serve's sampler, in under 10 minutes: Qwen3-0.6B and 1.7B
# shapes (random weights), F16 and Q8_0; prefill and decode tokens/s (1 and 8 streams), the GPU's
# log-probs against the embedded engine's fp32 (0.6B), and one LoRA publication.
#   scripts/gpu-check-samplers.sh                          # needs the network once, for the CUDA build
#   scripts/gpu-check-samplers.sh --shapes qwen3-0.6b
# On a machine without a GPU, `--gpu off --shapes tiny` runs the same code paths on the CPU.
set -eu
cd "$(dirname "$0")/.."
gpu=cuda
for a in "$@"; do [ "$a" = off ] && gpu=; done
if [ -n "$gpu" ]; then
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  node scripts/install-llama-cpp.mjs --gpu cuda
else
  node scripts/install-llama-cpp.mjs
fi
[ -f dist/bench/gpu-samplers.js ] || npx tsc -p tsconfig.json
exec timeout 570 node dist/bench/gpu-samplers.js "$@"
