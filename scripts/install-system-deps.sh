#!/usr/bin/env bash
# Installs the Debian packages openclaw-rl needs: a C toolchain, OpenBLAS and oneDNN for the
# native compute addon (they must be present before `npm ci` builds it), bubblewrap for the
# terminal environment sandbox (`openclaw-rl env run --env terminal`); with --with-tests also
# python3-torch for the independent numerics reference used by the tests and chromium for the
# dashboard's browser test. oneDNN is optional: where the
# distribution has no libdnnl-dev the addon builds on OpenBLAS alone.
# Skips what is already installed; needs root (or sudo) only when something is missing.
set -euo pipefail
packages=(build-essential libopenblas-dev libdnnl-dev bubblewrap)
optional=(libdnnl-dev)
if [ "${1:-}" = "--with-tests" ]; then packages+=(python3-torch python3-numpy chromium); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
available=()
for p in "${missing[@]}"; do
  if [[ " ${optional[*]} " == *" $p "* ]] && ! apt-cache show "$p" >/dev/null 2>&1; then
    echo "note: $p is not available here; the native addon will use OpenBLAS alone"
  else
    available+=("$p")
  fi
done
if [ ${#available[@]} -eq 0 ]; then exit 0; fi
echo "installing Debian packages: ${available[*]}"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${available[@]}" >/dev/null
