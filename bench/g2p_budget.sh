#!/usr/bin/env bash
# What `mha-g2p train` can reach in the default command's budget: 30 minutes of this 2-core
# machine at 2 threads. Each configuration's speed at 2 threads is probed first (100
# steps, twice, all probes back to back; the faster counts), and it is given
# BUDGET / (ms/step) steps, rounded down to a thousand (BUDGET defaults to 1700 s: the
# 30 minutes less its evaluations and checkpoints). The runs themselves go at THREADS
# threads each, PARALLEL at a time (default 1 thread, 2 at once on 2 cores: a run's result
# depends on its steps, not on its thread count beyond summation order). Each finished run
# is scored on the 12,362 test words (greedy and beam 4). Runs are kept in runs/budget/NAME
# and skipped when finished, so an interrupted sweep resumes. The table goes to stdout and
# to runs/budget/budget.md.
#
#   bash bench/g2p_budget.sh [BUDGET_SECONDS [THREADS [PARALLEL]]]
#
# Probe on an otherwise idle machine: the step counts come from those speeds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g2p=${MHA_G2P:-$root/build/mha-g2p}
budget=${1:-1700}
threads=${2:-1}
parallel=${3:-2}
dir=$root/runs/budget
mkdir -p "$dir"

# name | options (everything else at mha-g2p train's defaults, but in float32: the table in
# docs/g2p_sweep.md was made when that was the default; MHA_G2P_PRECISION=auto or bf16 for
# the default of now)
prec=${MHA_G2P_PRECISION:-fp32}
configs=(
  "L3+3|--enc-layers 3 --dec-layers 3 --precision $prec"
  "L2+2|--enc-layers 2 --dec-layers 2 --precision $prec"
)

echo "# load at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for round in 1 2; do
  for c in "${configs[@]}"; do
    name=${c%%|*} opts=${c#*|}
    p=$dir/$name/probe$round
    [ -f "$p/summary.json" ] && continue
    # shellcheck disable=SC2086
    "$g2p" train $opts --steps 100 --eval-every 100 --eval-words 1 --ckpt-every 0 \
      --threads 2 --progress plain --out "$p" --force >/dev/null 2>&1
  done
done
steps_of() {
  python3 -c "import json, sys; ms = min(json.load(open(p))['step_ms'] for p in sys.argv[2:]); print(ms, int(float(sys.argv[1]) / ms * 1000) // 1000 * 1000)" \
    "$budget" "$dir/$1"/probe*/summary.json
}

run_one() {
  local name=$1 opts=$2 steps=$3
  local r=$dir/$name/run
  if [ ! -f "$r/summary.json" ]; then
    # shellcheck disable=SC2086
    "$g2p" train $opts --steps "$steps" --threads "$threads" --progress plain \
      --out "$r" --force >"$dir/$name/train.log" 2>&1
  fi
  for b in 1 4; do
    [ -f "$dir/$name/eval-b$b/eval.json" ] ||
      "$g2p" eval --model "$r/best.safetensors" --beam "$b" --threads "$threads" \
        --out "$dir/$name/eval-b$b" >/dev/null 2>&1
  done
}
n=0
for c in "${configs[@]}"; do
  name=${c%%|*} opts=${c#*|}
  read -r ms steps < <(steps_of "$name")
  echo "$ms $steps" >"$dir/$name/budget"
  run_one "$name" "$opts" "$steps" &
  n=$((n + 1))
  [ $((n % parallel)) -eq 0 ] && wait
done
wait

{
  echo "| run | options | ms/step (2 threads) | steps | passes | est. minutes at 2 threads | val WER | test WER greedy | test PER | test WER stress | test WER beam 4 | beam 4 stress |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for c in "${configs[@]}"; do
    name=${c%%|*} opts=${c#*|}
    read -r ms steps <"$dir/$name/budget"
    s=$dir/$name/run/summary.json
    g=$dir/$name/eval-b1/eval.json
    b=$dir/$name/eval-b4/eval.json
    python3 - "$name" "$opts" "$ms" "$steps" "$s" "$g" "$b" <<'EOF'
import json, sys
name, opts, ms, steps, s, g, b = sys.argv[1:]
S = json.load(open(s)); G = json.load(open(g))["greedy"]; B = json.load(open(b))["beam"]
ms, steps = float(ms), int(steps)
pct = lambda x: "%.2f%%" % (100 * x)
print("| %s | `%s` | %.1f | %d | %.1f | %.1f | %s | %s | %s | %s | %s | %s |" % (
    name, opts, ms, steps, S["epochs"], steps * ms / 60000,
    pct(S["best_val_wer"]),
    pct(G["wer"]), pct(G["per"]), pct(G["wer_stress"]), pct(B["wer"]), pct(B["wer_stress"])))
EOF
  done
} | tee "$dir/budget.md"
