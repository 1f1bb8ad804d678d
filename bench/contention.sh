#!/usr/bin/env bash
# bench/contention.sh — the contention row: a training step (zero_grad, forward, backward,
# clipping, AdamW) on the quiet machine and beside ONE busy process at normal priority
# (`sh -c 'while :; do :; done'`, what any other job on a 2-core machine is), at 1 and 2
# threads, under each waiting policy; median and mean ms of the steps, and the ratios that
# say whether a 2-thread step survives a neighbour.
#
#   bash bench/contention.sh [--build-dir DIR] [--steps N] [--passes N] [--out FILE.md]
#                            [--policies LIST] [--model gpt|g2p] [--precision fp32|bf16]
#
#   --build-dir DIR  a build with mha-gpt-bench and mha-g2p-bench (default: build)
#   --steps N        timed steps per run (default 200: the mean needs the tail)
#   --passes N       repeat the quiet/busy pair N times per policy (default 2), keep the
#                    pass whose busy 2-thread median is lowest
#   --out FILE.md    the table (default bench-contention.md)
#   --policies LIST  comma-separated, of default, spinN (N microseconds), passive, gomp10k
#                    (default: default,spin0,passive)
#   --model M        gpt: the baby GPT (mha-gpt-bench on Tiny Shakespeare, the default);
#                    g2p: the G2P encoder-decoder of bench/run_g2p.sh (3 + 3 blocks, batch 128)
#   --precision P    the step's precision (default fp32; bf16 needs AVX512_BF16)
#
# Policies: the library's own threads (src/pool.h) spin before they sleep: `default` is the
# library's choice (MHA__POOL_SPIN_US microseconds, MHA__POOL_SPIN_BUSY_US while other tasks
# want the CPUs), `spinN` fixes it with MHA_SPIN_US=N (spin0: sleep at once).
# `passive` (OMP_WAIT_POLICY=passive) and `gomp10k` (GOMP_SPINCOUNT=10000) change only what
# still runs on libgomp's threads: OpenBLAS's products of a float32 step. Run it on an
# otherwise idle machine: the quiet rows are the reference of the busy ones, taken in the
# same pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/common.sh"
build=$root/build steps=200 passes=2 out=bench-contention.md pols=default,spin0,passive
model=gpt prec=fp32
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --policies) pols=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --precision) prec=$2; shift 2 ;;
    *) echo "contention.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
case $model in
  gpt) exe=$build/mha-gpt-bench
       args=(--data "$root/data/tinyshakespeare.txt" --gen-chars 10) ;;
  g2p) exe=$build/mha-g2p-bench
       args=(--src-vocab 28 --tgt-vocab 72 --src-context 36 --tgt-context 36 --enc-layers 3
             --dec-layers 3 --heads 4 --dim 192 --mlp-dim 640 --dropout 0.1
             --label-smoothing 0.1 --batch 128 --src-len 10 --tgt-len 10 --lr 1.5e-3
             --weight-decay 0.01 --decode-words 0) ;;
  *) echo "contention.sh: --model gpt or g2p" >&2; exit 2 ;;
esac
[ -x "$exe" ] || { echo "contention.sh: no $exe (build it first)" >&2; exit 2; }
tmp=$(mktemp -d)
busy_pid=
cleanup() { [ -n "$busy_pid" ] && kill "$busy_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
machine_header | tee "$tmp/header"

run() { # run TAG ENV...: one mha-gpt-bench at 1 and 2 threads into $tmp/TAG.json
  local tag=$1; shift
  env "$@" "$exe" "${args[@]}" --threads 1,2 --precision "$prec" \
    --steps "$steps" --warmup 10 --json "$tmp/$tag.json" >"$tmp/$tag.log" 2>&1 \
    || { cat "$tmp/$tag.log" >&2; exit 1; }
}

IFS=, read -r -a policies <<<"$pols"
policy_env() {
  case $1 in
    default) echo "MHA_BENCH_POLICY=default" ;;
    spin[0-9]*) echo "MHA_SPIN_US=${1#spin}" ;;
    passive) echo "OMP_WAIT_POLICY=passive" ;;
    gomp10k) echo "GOMP_SPINCOUNT=10000" ;;
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

python3 - "$tmp" "$out" "$passes" "$steps" "$pols" "$exe" "$prec" <<'PY'
import json, os, sys
tmp, out, passes, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pols, exe, prec = sys.argv[5].split(","), sys.argv[6], sys.argv[7]
header = open(os.path.join(tmp, "header")).read().strip()
def rows(tag):
    d = json.load(open(os.path.join(tmp, tag + ".json")))
    return {r["threads"]: r for r in d["train"]}
lines = [header, "",
         "training step (%s), %s, %s timed steps a run; ms (median / "
         "mean); the pass with the lowest busy 2-thread median of %d" % (exe, prec, steps, passes),
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
