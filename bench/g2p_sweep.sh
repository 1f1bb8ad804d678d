#!/usr/bin/env bash
# The G2P hyperparameter sweep: short mha-g2p training runs with an equal compute budget each,
# scored on all 6,152 validation words, written as a Markdown table.
#
#   bash bench/g2p_sweep.sh [BUDGET_SECONDS [THREADS]]     (default 600 s, 1 thread)
#
# Equal budgets by measured speed, not by wall clock: each configuration first runs 50 steps
# twice to measure its ms/step (all probes back to back, so they see the same machine; the
# fastest probe of its shape counts, see step_ms), then trains
# for BUDGET / (ms/step) steps with its cosine schedule ending there. A run's result then does
# not depend on what else ran beside it, only its wall time does. Every run is kept in
# runs/sweep/NAME and skipped when it has finished, so an interrupted sweep resumes.
# The table goes to stdout and to runs/sweep/sweep.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g2p=${MHA_G2P:-$root/build/mha-g2p}
budget=${1:-600}
threads=${2:-1}
dir=$root/runs/sweep
mkdir -p "$dir"
# float32, the default when the table in docs/g2p_sweep.md was made (MHA_G2P_PRECISION=auto
# or bf16 for another)
prec=${MHA_G2P_PRECISION:-fp32}

# name | options (everything else at mha-g2p train's defaults)
configs=(
  "default|"
  "C128-M512|--dim 128 --mlp-dim 512"
  "C256-M1024|--dim 256 --mlp-dim 1024"
  "L2+2|--enc-layers 2 --dec-layers 2"
  "B64|--batch 64"
  "B256|--batch 256"
  "lr3e-3|--lr 0.003"
  "lr7e-4|--lr 0.0007"
  "C128-M512-lr3e-3|--dim 128 --mlp-dim 512 --lr 0.003"
  "drop0|--dropout 0"
)
[ -n "${MHA_SWEEP_ONLY:-}" ] && configs=("${configs[@]:0:$MHA_SWEEP_ONLY}")

json() { # json FILE KEY...: a number from summary.json, by its path
  python3 - "$@" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = v[k]
print(v)
EOF
}

# 1. probes: 50 steps each, all configurations back to back, twice; the faster of a
#    configuration's two probes is its speed (a probe slowed by something else loses)
for round in 1 2; do
  for c in "${configs[@]}"; do
    name=${c%%|*} opts=${c#*|}
    p=$dir/$name/probe$round
    [ -f "$p/summary.json" ] && continue
    # shellcheck disable=SC2086
    "$g2p" train $opts --steps 50 --eval-every 50 --eval-words 1 --ckpt-every 0 \
      --precision "$prec" --threads "$threads" --progress plain --out "$p" --force >/dev/null 2>&1
  done
done
[ -n "${MHA_SWEEP_PROBES_ONLY:-}" ] && exit 0
# The speed of a configuration is the best of every probe of its shape: the configurations
# whose options differ only in --lr, --dropout, --label-smoothing or --weight-decay do the
# same work per step, so their probes are pooled (on a shared machine a probe is only ever
# slowed, never sped up, by what runs beside it).
shape() { sed -E 's/--(lr|dropout|label-smoothing|weight-decay) [^ ]+//g; s/ +/ /g; s/^ | $//g' <<<"$1"; }
step_ms() {
  local want best="" c n o
  want=$(shape "$(for c in "${configs[@]}"; do [ "${c%%|*}" = "$1" ] && echo "${c#*|}"; done)")
  for c in "${configs[@]}"; do
    n=${c%%|*} o=${c#*|}
    [ "$(shape "$o")" = "$want" ] || continue
    for p in "$dir/$n"/probe*/summary.json; do
      [ -f "$p" ] && best="$best $p"
    done
  done
  # shellcheck disable=SC2086
  python3 -c "import json, sys; print(min(json.load(open(p))['step_ms'] for p in sys.argv[1:]))" $best
}

# 2. the runs, each for the budget at its measured speed
for c in "${configs[@]}"; do
  name=${c%%|*} opts=${c#*|}
  out=$dir/$name/run
  ms=$(step_ms "$name")
  steps=$(python3 -c "print(max(1, int($budget * 1000 / $ms)))")
  if [ -f "$out/summary.json" ] && [ "$(json "$out/summary.json" completed)" = True ]; then
    continue
  fi
  resume=()
  [ -f "$out/checkpoint.safetensors" ] && resume=(--resume "$out/checkpoint.safetensors")
  echo "sweep: $name ($opts) $steps steps at $ms ms/step" >&2
  # shellcheck disable=SC2086
  "$g2p" train $opts --steps "$steps" --eval-every "$steps" --ckpt-every 500 \
    --precision "$prec" --threads "$threads" --progress plain --out "$out" "${resume[@]}" >"$dir/$name/train.out" 2>&1
done

# 3. the table
{
  echo "| run | options | parameters | ms/step | steps | passes | train loss | val WER | val PER | val WER stress | val PER stress |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for c in "${configs[@]}"; do
    name=${c%%|*} opts=${c#*|}
    s=$dir/$name/run/summary.json
    [ -f "$s" ] || continue
    python3 - "$s" "$name" "$opts" "$(step_ms "$name")" "$dir/$name/run/train_log.csv" <<'EOF'
import csv, json, sys
s = json.load(open(sys.argv[1])); ms = float(sys.argv[4])
rows = list(csv.DictReader(open(sys.argv[5])))
loss = sum(float(r["train_loss"]) for r in rows[-100:]) / len(rows[-100:])
v = s["last_validation"]
print(f"| {sys.argv[2]} | `{sys.argv[3] or '(defaults)'}` | {s['parameters']/1e6:.2f} M | "
      f"{ms:.0f} | {s['steps_done']} | {s['epochs']:.2f} | {loss:.3f} | "
      f"{100*v['wer']:.2f}% | {100*v['per']:.2f}% | {100*v['wer_stress']:.2f}% | "
      f"{100*v['per_stress']:.2f}% |")
EOF
  done
} | tee "$dir/sweep.md"
