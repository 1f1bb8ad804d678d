#!/usr/bin/env bash
# bench/contention.sh — the contention row: the baby GPT's training step (mha-gpt-bench: zero_grad,
# forward, backward, clipping, AdamW) on the quiet machine and beside ONE busy process at
# normal priority (`sh -c 'while :; do :; done'`, what any other job on a 2-core machine is),
# at 1 and 2 threads, under each OpenMP waiting policy of libgomp; median and mean ms of the
# steps, and the ratios that say whether a 2-thread step survives a neighbour.
#
#   bash bench/contention.sh [--build-dir DIR] [--steps N] [--passes N] [--out FILE.md]
#                            [--policies LIST]
#
#   --build-dir DIR  a build with mha-gpt-bench (default: build)
#   --steps N        timed steps per run (default 200: the mean needs the tail)
#   --passes N       repeat the quiet/busy pair N times per policy (default 2), keep the
#                    pass whose busy 2-thread median is lowest
#   --out FILE.md    the table (default bench-contention.md)
#   --policies LIST  comma-separated, of default, passive, spin10k (default: all three)
#
# Policies: libgomp's default (OMP_WAIT_POLICY unset: a waiting thread spins ~300,000
# iterations before it sleeps), OMP_WAIT_POLICY=passive (sleeps at once) and
# GOMP_SPINCOUNT=10000 (a short spin). Run it on an otherwise idle machine: the quiet rows
# are the reference of the busy ones, taken in the same pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/common.sh"
build=$root/build steps=200 passes=2 out=bench-contention.md pols=default,passive,spin10k
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --policies) pols=$2; shift 2 ;;
    *) echo "contention.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
exe=$build/mha-gpt-bench
[ -x "$exe" ] || { echo "contention.sh: no $exe (build it first)" >&2; exit 2; }
tmp=$(mktemp -d)
busy_pid=
cleanup() { [ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
machine_header | tee "$tmp/header"

run() { # run TAG ENV...: one mha-gpt-bench at 1 and 2 threads into $tmp/TAG.json
  local tag=$1; shift
  env "$@" "$exe" --data "$root/data/tinyshakespeare.txt" --threads 1,2 --precision fp32 \
    --steps "$steps" --warmup 10 --gen-chars 10 --json "$tmp/$tag.json" >"$tmp/$tag.log" 2>&1 \
    || { cat "$tmp/$tag.log" >&2; exit 1; }
}

IFS=, read -r -a policies <<<"$pols"
policy_env() {
  case $1 in
    default) echo "MHA_BENCH_POLICY=default" ;;
    passive) echo "OMP_WAIT_POLICY=passive" ;;
    spin10k) echo "GOMP_SPINCOUNT=10000" ;;
    *) echo "contention.sh: unknown policy $1" >&2; exit 2 ;;
  esac
}
for pol in "${policies[@]}"; do policy_env "$pol" >/dev/null; done
for pol in "${policies[@]}"; do
  for p in $(seq 1 "$passes"); do
    echo "== $pol, pass $p: quiet"
    run "$pol-$p-quiet" "$(policy_env "$pol")"
    echo "== $pol, pass $p: beside a busy loop"
    sh -c 'while :; do :; done' &
    busy_pid=$!
    run "$pol-$p-busy" "$(policy_env "$pol")"
    kill "$busy_pid"; wait "$busy_pid" 2>/dev/null || true
    busy_pid=
  done
done

python3 - "$tmp" "$out" "$passes" "$steps" "$pols" "$build" <<'PY'
import json, os, sys
tmp, out, passes, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pols, build = sys.argv[5].split(","), sys.argv[6]
header = open(os.path.join(tmp, "header")).read().strip()
def rows(tag):
    d = json.load(open(os.path.join(tmp, tag + ".json")))
    return {r["threads"]: r for r in d["train"]}
lines = [header, "",
         "baby GPT training step (%s/mha-gpt-bench), fp32, %s timed steps a run; ms (median / "
         "mean); the pass with the lowest busy 2-thread median of %d" % (build, steps, passes),
         "",
         "| policy | quiet, 1 thread | quiet, 2 threads | busy, 1 thread | busy, 2 threads | "
         "busy/quiet 2 threads (median, mean) | busy 2 threads / busy 1 thread (median) |",
         "| --- | --- | --- | --- | --- | --- | --- |"]
for pol in pols:
    best = min(range(1, passes + 1), key=lambda p: rows("%s-%d-busy" % (pol, p))[2]["ms"])
    q, b = rows("%s-%d-quiet" % (pol, best)), rows("%s-%d-busy" % (pol, best))
    cell = lambda r: "%.1f / %.1f" % (r["ms"], r["mean_ms"])
    lines.append("| %s | %s | %s | %s | %s | %.2f×, %.2f× | %.2f |" % (
        pol, cell(q[1]), cell(q[2]), cell(b[1]), cell(b[2]),
        b[2]["ms"] / q[2]["ms"], b[2]["mean_ms"] / q[2]["mean_ms"], b[2]["ms"] / b[1]["ms"]))
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
PY
