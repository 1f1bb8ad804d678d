#!/usr/bin/env bash
# The main job: install missing packages, build, and train the baby GPT (4 blocks,
# 4 heads, width 128, context 64, 2,000 AdamW steps) on Tiny Shakespeare
# (data/tinyshakespeare.txt, committed), showing progress. It ends with the
# validation loss and a generated passage; the loss curves, attention heat maps,
# log, summary and checkpoints are in runs/gpt/ (runs/gpt-2/, ... when an earlier run is
# there: it is kept). Extra arguments go to
# `mha-gpt train` (see: build/mha-gpt train --help); then try
#   build/mha-gpt sample --prompt "ROMEO:" --chars 300
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MHA_BUILD_DIR:-$root/build}
bash "$root/scripts/deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target mha-gpt >/dev/null
cd "$root"
# A run directory holds one run: an earlier demo's model stays where it is, and this one
# goes to the first of runs/gpt, runs/gpt-2, runs/gpt-3, ... that holds no run (unless
# the arguments name --out or --resume themselves).
out=()
case " $* " in
  *" --out "*|*" --out="*|*" --resume "*|*" --resume="*) ;;
  *)
    dir=runs/gpt n=1
    while [ -e "$dir/checkpoint.safetensors" ] || [ -e "$dir/best.safetensors" ]; do
      n=$((n + 1)) dir=runs/gpt-$n
    done
    [ "$n" = 1 ] || echo "demo: runs/gpt holds an earlier run (kept); this one goes to $dir"
    out=(--out "$dir") ;;
esac
"$build/mha-gpt" train "${out[@]}" "$@"
