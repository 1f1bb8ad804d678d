#!/usr/bin/env bash
# The main job: install missing packages, build, and train the tiny attention
# model on the default task (reverse a sequence of 16 tokens from a vocabulary of
# 16), showing progress; it ends by printing the held-out accuracy and where the
# loss curve and attention heat maps are (runs/reverse/). Extra arguments go to
# mha-train (see: build/mha-train --help).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MHA_BUILD_DIR:-$root/build}
bash "$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target mha-train >/dev/null
cd "$root"
"$build/mha-train" "$@"
