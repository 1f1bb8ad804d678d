#!/usr/bin/env bash
# Install what building and testing mha needs on Debian 12, if it is missing.
# Runs apt-get as root, or through sudo when not root. Nothing else is downloaded.
set -euo pipefail
pkgs=(gcc make cmake pkg-config libopenblas-dev libopenblas-openmp-dev libxsmm-dev libcmocka-dev libcjson-dev)
# --with-valgrind: valgrind (CI); --with-mpi: Open MPI (mpirun and the headers), for
# mha-gpt-mpi and its test (the test command and CI)
for a in "$@"; do
  case "$a" in
    --with-valgrind) pkgs+=(valgrind) ;;
    --with-mpi) pkgs+=(openmpi-bin libopenmpi-dev) ;;
    *) echo "deps.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
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
