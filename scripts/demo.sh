#!/usr/bin/env bash
# The main job: install missing packages, build, and run the seed's example
# (batch 2, seq 10, model_dim 64, heads 8, mha(x, x)) printing every stage's shape.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MHA_BUILD_DIR:-$root/build}
bash "$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target seed_example >/dev/null
"$build/seed_example"
