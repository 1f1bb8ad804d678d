#!/usr/bin/env bash
# float32 against bf16 at equal steps: `mha-g2p train` with its default model and options,
# the same seed (SEED, default 1337: train's), for STEPS steps (default 3000) at 2 threads, once with --precision fp32 and
# once with bf16 (the CPU must have AVX512_BF16), then their validation WER/PER (all 6,152
# validation words, greedy, at the last step) and mean step time side by side. The row behind
# `--precision auto`: bf16 is chosen only where it is faster, so it must train as well.
# Runs go to runs/precision/{fp32,bf16}-sSEED (replaced); the table to stdout. Run it on an otherwise
# idle machine (the step times are in it).
#
#   bash bench/g2p_precision.sh [STEPS [SEED]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g2p=${MHA_G2P:-$root/build/mha-g2p}
steps=${1:-3000}
seed=${2:-1337}
dir=$root/runs/precision
mkdir -p "$dir"
echo "# load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for p in fp32 bf16; do
  "$g2p" train --steps "$steps" --eval-every "$steps" --ckpt-every 0 --precision "$p" \
    --seed "$seed" --threads 2 --progress plain --out "$dir/$p-s$seed" --force \
    >"$dir/$p-s$seed.log" 2>&1 || { tail -5 "$dir/$p-s$seed.log" >&2; exit 1; }
done
python3 - "$dir" "$seed" <<'PY'
import json, os, sys
d, seed = sys.argv[1], sys.argv[2]
print("| precision | seed | steps | ms/step | wall s | val WER | val PER | val WER stress |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for p in ("fp32", "bf16"):
    s = json.load(open(os.path.join(d, "%s-s%s" % (p, seed), "summary.json")))
    v = s["last_validation"]
    print("| %s | %s | %d | %.1f | %.0f | %.2f%% | %.2f%% | %.2f%% |" % (
        p, seed, s["steps_done"], s["step_ms"], s["wall_seconds"], 100 * v["wer"], 100 * v["per"],
        100 * v["wer_stress"]))
PY
