#!/usr/bin/env bash
# bench/run_mpi.sh — data-parallel training of the baby GPT (issue 10) in one run: the
# training speed of mha-gpt train with 1 process × 1 thread, 1 process × 2 threads, and
# mha-gpt-mpi with 2 ranks × 1 thread (gradients summed during backward, "overlap", and
# after it, "after"); writes bench-mpi.json and prints the table with the targets.
#
#   bench/run_mpi.sh [--out FILE] [--build-dir DIR] [--reps N] [--steps N1,N2]
#                    [--wait-idle SEC]
#
#   --out FILE       results (default: bench-mpi.json in the current directory)
#   --build-dir DIR  CMake build directory (default: ${TMPDIR:-/tmp}/mha-mpi-bench-build)
#   --reps N         runs of each configuration, alternating; the median counts (default 3)
#   --steps N1,N2    the two run lengths (default 60,260)
#   --wait-idle SEC  first wait up to SEC seconds for the CPUs to be >= 90 % idle
#
# Measured: each configuration trains the baby GPT (mha-gpt train's defaults: 4 blocks,
# 4 heads, width 128, context 64, batch 12; warm-up 10 steps) for N1 and N2 steps, with one
# evaluation batch at the end, no sample and no checkpoint but the last; steps/s =
# (N2 − N1) / (wall2 − wall1) from the two summary.json wall_seconds, which cancels
# start-up, MPI_Init, the evaluation and the files. tokens/s = steps/s · batch · context.
# allreduce_wait_ms_per_step (rank 0's summary of the N2 run): the time a step waits for
# the gradient all-reduce — with "after" the whole all-reduce, with "overlap" the part
# backward did not hide.
# Targets: 2 ranks × 1 thread ≥ 1.8× the tokens/s of 1 process × 1 thread, and ≥ 1.0×
# 1 process × 2 threads. The machine has 2 cores: run nothing else meanwhile.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="bench-mpi.json"
BUILD="${TMPDIR:-/tmp}/mha-mpi-bench-build"
REPS=3
STEPS="60,260"
WAIT_IDLE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --build-dir) BUILD="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --wait-idle) WAIT_IDLE="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_mpi.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
N1=${STEPS%,*} N2=${STEPS#*,}
for v in "$REPS" "$WAIT_IDLE" "$N1" "$N2"; do
  case "$v" in ''|*[!0-9]*) echo "run_mpi.sh: expected a number, got '$v'" >&2; exit 2 ;; esac
done
[ "$N2" -gt "$N1" ] && [ "$REPS" -ge 1 ] || { echo "run_mpi.sh: need N2 > N1 and --reps >= 1" >&2; exit 2; }
source "$REPO/bench/common.sh"

bash "$REPO/scripts/deps.sh" --with-mpi
cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMHA_WITH_MPI=ON -DBUILD_TESTING=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target mha-gpt mha-gpt-mpi >/dev/null
wait_idle "$WAIT_IDLE"
machine_header

work=$(mktemp -d "${TMPDIR:-/tmp}/mha-mpi-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
common=(train --data "$REPO/data/tinyshakespeare.txt" --warmup 10 --eval-every 1000000 --eval-batches 1
        --sample-chars 0 --ckpt-every 0)
mpirun_=(mpirun --allow-run-as-root --oversubscribe --bind-to core -np 2)

# run CONFIG STEPS DIR: one training run; prints wall_seconds and the all-reduce wait
run() {
  local cfg=$1 n=$2 dir=$3
  rm -rf "$dir"
  case "$cfg" in
    p1t1) "$BUILD/mha-gpt" "${common[@]}" --steps "$n" --threads 1 --out "$dir" ;;
    p1t2) "$BUILD/mha-gpt" "${common[@]}" --steps "$n" --threads 2 --out "$dir" ;;
    r2overlap) "${mpirun_[@]}" "$BUILD/mha-gpt-mpi" "${common[@]}" --steps "$n" --threads 1 \
                 --grad-sync overlap --out "$dir" ;;
    r2after) "${mpirun_[@]}" "$BUILD/mha-gpt-mpi" "${common[@]}" --steps "$n" --threads 1 \
               --grad-sync after --out "$dir" ;;
  esac >/dev/null 2>"$dir.err" || { echo "run_mpi.sh: $cfg failed:" >&2; cat "$dir.err" >&2; exit 1; }
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["wall_seconds"], s["allreduce_wait_ms_per_step"])' "$dir/summary.json"
}

configs=(p1t1 p1t2 r2overlap r2after)
declare -A sps waitms
for cfg in "${configs[@]}"; do sps[$cfg]=""; waitms[$cfg]=""; done
for rep in $(seq 1 "$REPS"); do
  for cfg in "${configs[@]}"; do
    read -r w1 _ < <(run "$cfg" "$N1" "$work/$cfg-a")
    read -r w2 wm < <(run "$cfg" "$N2" "$work/$cfg-b")
    s=$(python3 -c "print(($N2 - $N1) / ($w2 - $w1))")
    sps[$cfg]="${sps[$cfg]} $s"; waitms[$cfg]="${waitms[$cfg]} $wm"
    printf '  pass %d  %-10s %7.2f steps/s  all-reduce wait %.2f ms/step\n' "$rep" "$cfg" "$s" "$wm"
  done
done

python3 - "$OUT" "$N1" "$N2" "$REPS" "$MACHINE_IDLE" "$MACHINE_LOAD" \
  "${sps[p1t1]}" "${sps[p1t2]}" "${sps[r2overlap]}" "${sps[r2after]}" \
  "${waitms[r2overlap]}" "${waitms[r2after]}" <<'EOF'
import json, statistics, sys, platform
out, n1, n2, reps, idle, load = sys.argv[1:7]
vals = [[float(x) for x in a.split()] for a in sys.argv[7:13]]
names = ["p1t1", "p1t2", "r2overlap", "r2after"]
tok = 12 * 64  # batch x context of the baby GPT
med = {k: statistics.median(v) for k, v in zip(names, vals[:4])}
wait = {"r2overlap": statistics.median(vals[4]), "r2after": statistics.median(vals[5])}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
rows = {
    "p1t1": "1 process x 1 thread", "p1t2": "1 process x 2 threads",
    "r2overlap": "2 ranks x 1 thread, overlap", "r2after": "2 ranks x 1 thread, after"}
best2 = max(med["r2overlap"], med["r2after"])
targets = [
    ("2 ranks x 1 thread >= 1.8x 1 process x 1 thread", best2 / med["p1t1"], 1.8),
    ("2 ranks x 1 thread >= 1.0x 1 process x 2 threads", best2 / med["p1t2"], 1.0)]
res = {
    "machine": {"cpu": cpu, "cores": __import__("os").cpu_count(), "idle_percent": int(idle),
                "load": load},
    "method": f"steps/s = ({n2} - {n1}) / (wall({n2}) - wall({n1})), median of {reps}",
    "configs": {k: {"label": rows[k], "steps_per_s": med[k], "tokens_per_s": med[k] * tok,
                    "steps_per_s_all": v}
                for k, v in zip(names, vals[:4])},
    "allreduce_wait_ms_per_step": wait,
    "allreduce_hidden_ms_per_step": wait["r2after"] - wait["r2overlap"],
    "targets": [{"target": t, "value": round(v, 3), "met": v >= lim} for t, v, lim in targets]}
json.dump(res, open(out, "w"), indent=2)
print(f"\n| configuration | steps/s | tokens/s | vs 1x1 |\n|---|---|---|---|")
for k in names:
    print(f"| {rows[k]} | {med[k]:.2f} | {med[k]*tok:,.0f} | {med[k]/med['p1t1']:.2f}x |")
print(f"\nall-reduce wait per step (rank 0): after {wait['r2after']:.2f} ms, overlap "
      f"{wait['r2overlap']:.2f} ms (hidden: {wait['r2after'] - wait['r2overlap']:.2f} ms)")
for t, v, lim in targets:
    print(f"target: {t}: {v:.2f}x  {'met' if v >= lim else 'MISSED'}")
print(f"results: {out}")
EOF
