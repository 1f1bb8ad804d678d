#!/usr/bin/env bash
# The test command: install missing packages, build from scratch in build/
# (or $MHA_BUILD_DIR) and run every test with ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MHA_BUILD_DIR:-$root/build}
bash "$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMHA_WERROR=ON "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
