#!/usr/bin/env bash
# Installs the Debian packages openclaw-rl needs: a C toolchain and OpenBLAS for the native
# compute addon, and python3-torch for the independent numerics reference used by the tests.
# Skips what is already installed; needs root (or sudo) only when something is missing.
set -euo pipefail
packages=(build-essential libopenblas-dev)
if [ "${1:-}" = "--with-tests" ]; then packages+=(python3-torch python3-numpy); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing Debian packages: ${missing[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
