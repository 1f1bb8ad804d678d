#!/usr/bin/env bash
# Install what building and testing mha needs on Debian 12, if it is missing.
# Runs apt-get as root, or through sudo when not root. Nothing else is downloaded.
set -euo pipefail
pkgs=(gcc make cmake pkg-config libopenblas-dev libopenblas-openmp-dev libcmocka-dev libcjson-dev)
[ "${1:-}" = "--with-valgrind" ] && pkgs+=(valgrind)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "mha: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
