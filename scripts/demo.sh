#!/usr/bin/env bash
# The main job: install missing packages, build, and train the baby GPT (4 blocks,
# 4 heads, width 128, context 64, 2,000 AdamW steps) on Tiny Shakespeare
# (data/tinyshakespeare.txt, committed), showing progress. It ends with the
# validation loss and a generated passage; the loss curves, attention heat maps,
# log, summary and checkpoints are in runs/gpt/. Extra arguments go to
# `mha-gpt train` (see: build/mha-gpt train --help); then try
#   build/mha-gpt sample --prompt "ROMEO:" --chars 300
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MHA_BUILD_DIR:-$root/build}
bash "$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target mha-gpt >/dev/null
cd "$root"
"$build/mha-gpt" train "$@"
