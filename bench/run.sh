#!/usr/bin/env bash
# bench/run.sh — build (if needed) and run the whole benchmark; writes bench.json
# and prints the table.
#
#   bench/run.sh [--out FILE] [--build-dir DIR] [--quick] [--no-torch] [--no-train]
#                [--no-pthreads] [--pthreads-dir DIR] [--wait-idle SEC] [--passes N]
#                [--precision LIST]
#
#   --out FILE       merged results (default: bench.json in the current directory)
#   --build-dir DIR  CMake build directory (default: ${TMPDIR:-/tmp}/mha-bench-build)
#   --quick          cases 1,2 only (the thread-scaling section keeps its two
#                    shapes), shorter timing, one pass (a smoke run)
#   --passes N       time everything N times, alternating C and PyTorch, and keep
#                    each record's fastest pass (default 2)
#   --no-torch       skip the PyTorch side even if torch is importable
#   --no-train       skip the training-throughput comparison
#   --no-pthreads    skip the thread-scaling section with the pthreads OpenBLAS
#   --pthreads-dir DIR  where the pthreads build's libopenblas.so.0 is (default:
#                    the first of /usr/lib/*/openblas-pthread, Debian's place)
#   --wait-idle SEC  first wait up to SEC seconds for the CPUs to be >= 90 % idle
#                    over 3 s (other jobs on a 2-core machine ruin the 2-thread
#                    numbers); default 0 = do not wait
#   --precision LIST the main run's module precisions (mha-bench --precision):
#                    default fp32,bf16 where the CPU runs bf16 (mha-bench
#                    --check-precision bf16), else fp32 with a printed note; a list
#                    given here is checked first (bf16 on a CPU without
#                    AVX512_BF16: mha-bench's message, exit status 2)
#
# Steps: configure + build mha-bench (and mha-train, when the tree has it) in
# Release; run mha-bench (C) and, where /usr/bin/python3 imports torch,
# bench/torch_bench.py (the seed's module) on the same cases; time mha-train
# against bench/torch_train.py; merge everything into one JSON with one record
# per (case, dropout, threads) and print the table.
#
# Limits: mha-bench measures the machine's peak (a loop of independent FMAs on the
# widest vectors the CPU has, 1 and all threads) and a 1024³ sgemm; each record gets
# peak_fraction and sgemm_fraction. With bf16 rows it also measures the bf16 peak (a
# loop of independent _mm512_dpbf16_ps, 64 flops an instruction): a bf16 record's
# peak_fraction is against it; its sgemm_fraction against the float32 sgemm. The
# issue's targets and the thread-scaling section read the fp32 rows. GFLOP/s count the causal half of the attention
# scores (3·(8·B·S·D² + 2·B·S²·D) per step; gflops_dense has the old, dense count).
# The peak per thread count is the highest of the passes' (each a median of 7).
#
# Memory modes: each pass also times (1,4096,256,4), p 0, all threads, in the stored
# and the recompute mode (mha-bench --mode).
#
# Targets (issue 9): the table ends with each target, measured, met or MISSED;
# bench.json has them under "targets" (met null = not measured, e.g. with --quick).
#
# Thread scaling (issue 11: whatever BLAS a user links, 2 threads must never be
# slower than 1): each pass also runs mha-bench with the pthreads build of
# OpenBLAS forced at run time (LD_LIBRARY_PATH=DIR; mha-bench itself links the
# OpenMP build when CMake found it) at (16,64,128,4) and (1,2048,256,4), p 0 and
# 0.1, 1 and 2 threads. bench.json's "thread_scaling" has, per shape and p, the
# 1- and 2-thread ms of that run and of the main run's rows, their ratio and
# whether "2 threads <= 1 thread" was met; the table says MISSED where not.
# A benchmark reports: a missed target does not change the exit status.
#
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the environment sets them, for
# both sides (they pick the same OpenBLAS kernels for us and for torch).
# The machine has 2 cores: run nothing else meanwhile; the script prints the load
# average before it starts because a busy machine skews every number.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="bench.json"
BUILD="${TMPDIR:-/tmp}/mha-bench-build"
QUICK=0
PASSES=2
TORCH=1
TRAIN=1
PTHREADS=1
PTHREADS_DIR=""
WAIT_IDLE=0
PRECISION=""     # empty: fp32,bf16 where the CPU runs bf16, else fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --precision) PRECISION="$2"; shift 2 ;;
    --build-dir) BUILD="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --no-torch) TORCH=0; shift ;;
    --no-train) TRAIN=0; shift ;;
    --no-pthreads) PTHREADS=0; shift ;;
    --pthreads-dir) PTHREADS_DIR="$2"; shift 2 ;;
    --wait-idle) WAIT_IDLE="$2"; shift 2 ;;
    --passes) PASSES="$2"; shift 2 ;;
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
               exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mha-bench.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PY=/usr/bin/python3

. "$REPO/bench/common.sh"   # idle_percent, wait_idle, machine_header
wait_idle "$WAIT_IDLE"
machine_header

# ---- build ----------------------------------------------------------------------
echo "== build ($BUILD)"
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
        -DMHA_BUILD_EXAMPLES=OFF >"$TMP/cmake.log" 2>&1 || { cat "$TMP/cmake.log"; exit 1; }
fi
targets=(mha-bench)
if grep -q 'mha-train' "$REPO/CMakeLists.txt" 2>/dev/null; then targets+=(mha-train); fi
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" >"$TMP/build.log" 2>&1 \
  || { cat "$TMP/build.log"; exit 1; }

# ---- precisions: bf16 rows beside fp32 where the CPU runs them ---------------------
choose_precisions "$BUILD/mha-bench" "$TMP"
echo "== precisions: $PRECISION"

C_ARGS=(); T_ARGS=()
if [ "$QUICK" = 1 ]; then
  C_ARGS=(--cases 1,2 --min-time 0.1); T_ARGS=(--cases 1,2 --min-time 0.2 --warmup 2)
  PASSES=1
fi
# ---- the pthreads OpenBLAS, forced at run time ------------------------------------
# $TMP/pthr_note says why the section did not run; $TMP/pthr_dir where it looked
# (both read by the merge, which also checks that the forced build was loaded)
# stored vs recompute mode at S = 4096 (issue 9: recompute within 1.3x, memory kept)
MODE_ARGS=(--cases 1x4096x256x4 --threads 0 --dropout 0 --no-sgemm --no-peak --reps 3 --warmup 1)
SCALING_CASES=16x64x128x4,1x2048x256x4
SCALING_ARGS=(--cases "$SCALING_CASES" --threads 1,2 --dropout 0,0.1)
[ "$QUICK" = 1 ] && SCALING_ARGS+=(--min-time 0.1)
if [ "$PTHREADS" = 1 ]; then
  if [ -z "$PTHREADS_DIR" ]; then
    for d in /usr/lib/*/openblas-pthread /usr/lib64/openblas-pthread; do
      if [ -e "$d/libopenblas.so.0" ]; then PTHREADS_DIR="$d"; break; fi
    done
  fi
  if [ "$(nproc)" -lt 2 ]; then
    PTHREADS=0; echo "skipped: fewer than 2 cores" >"$TMP/pthr_note"
  elif [ -z "$PTHREADS_DIR" ] || [ ! -e "$PTHREADS_DIR/libopenblas.so.0" ]; then
    PTHREADS=0
    echo "skipped: no pthreads OpenBLAS found (${PTHREADS_DIR:-/usr/lib/*/openblas-pthread}/libopenblas.so.0; Debian: libopenblas0-pthread)" >"$TMP/pthr_note"
  fi
else
  echo "skipped (--no-pthreads)" >"$TMP/pthr_note"
fi
[ -n "$PTHREADS_DIR" ] && echo "$PTHREADS_DIR" >"$TMP/pthr_dir"

HAVE_TORCH=0
if [ "$TORCH" = 1 ] && [ -x "$PY" ] && "$PY" -c 'import torch' >/dev/null 2>&1; then
  HAVE_TORCH=1
fi

# ---- C and PyTorch, alternating, PASSES times ------------------------------------
# Each pass times every record once; the merge keeps, per record and side, the pass
# with the lowest median (a burst of someone else's work spoils a pass, not a
# machine). Every pass is a full measurement with its own warm-up, medians and
# adjacent sgemm reference.
for pass in $(seq 1 "$PASSES"); do
  echo "== mha-bench (pass $pass of $PASSES)"
  "$BUILD/mha-bench" "${C_ARGS[@]}" --precision "$PRECISION" --json "$TMP/c$pass.json"
  if [ "$PTHREADS" = 1 ]; then
    echo "== mha-bench with the pthreads OpenBLAS (LD_LIBRARY_PATH=$PTHREADS_DIR), thread scaling (pass $pass of $PASSES)"
    LD_LIBRARY_PATH="$PTHREADS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$BUILD/mha-bench" "${SCALING_ARGS[@]}" --json "$TMP/pthr$pass.json"
  fi
  echo "== mha-bench, stored vs recompute mode at S = 4096 (pass $pass of $PASSES)"
  for mode in stored recompute; do
    "$BUILD/mha-bench" "${MODE_ARGS[@]}" --mode "$mode" --json "$TMP/mode_${mode}_$pass.json"
  done
  if [ "$HAVE_TORCH" = 1 ]; then
    echo "== PyTorch, the seed module (pass $pass of $PASSES)"
    # a longer minimum time than the C side: torch's step times scatter widely here
    "$PY" "$REPO/bench/torch_bench.py" --min-time 0.4 --warmup 3 "${T_ARGS[@]}" \
          --json "$TMP/torch$pass.json"
  fi
done
if [ "$HAVE_TORCH" = 1 ]; then
  # PyTorch with glibc malloc told to keep its heap (no mmap per large tensor, no
  # trimming): with the defaults, most of torch's time at the larger shapes is page
  # faults on freshly mmap'd temporaries. Reported beside the default numbers.
  echo "== PyTorch, the seed module, malloc-tuned (MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2^40)"
  MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776 \
    "$PY" "$REPO/bench/torch_bench.py" --min-time 0.4 --warmup 3 "${T_ARGS[@]}" \
          --json "$TMP/torch_tuned.json"
else
  echo "== PyTorch: skipped (no /usr/bin/python3 with torch, or --no-torch)"
fi

# ---- training throughput --------------------------------------------------------
# mha-train with its own defaults (task reverse; model, optimizer, threads) except
# --steps, --out and --eval-every (= steps, so each run evaluates once, at the end),
# run twice, for N1 and N2 steps: steps/s = (N2 - N1) / (wall2 - wall1), which
# cancels start-up, the final held-out evaluation and the output files. Walls are
# the wall_seconds of summary.json. N2 / wall2 (fixed costs included) is kept too.
# The PyTorch model takes its config from the same summary.json; only its
# training steps are timed, with the best of 1 and all threads.
if [ "$TRAIN" = 1 ] && [ -x "$BUILD/mha-train" ]; then
  N1=200; N2=1200
  [ "$QUICK" = 1 ] && { N1=150; N2=400; }
  echo "== training throughput: mha-train (defaults: task reverse) for $N1 and $N2 steps"
  for n in $N1 $N2; do
    "$BUILD/mha-train" --steps "$n" --eval-every "$n" --out "$TMP/train_$n" \
        >"$TMP/train_$n.log" 2>&1 || { tail -20 "$TMP/train_$n.log"; exit 1; }
  done
  tail -3 "$TMP/train_$N2.log"
  if [ "$HAVE_TORCH" = 1 ]; then
    "$PY" "$REPO/bench/torch_train.py" --config "$TMP/train_$N2/summary.json" \
          --steps 300 --json "$TMP/torch_train.json"
    echo "   (malloc-tuned:)"
    MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776 \
      "$PY" "$REPO/bench/torch_train.py" --config "$TMP/train_$N2/summary.json" \
            --steps 300 --json "$TMP/torch_train_tuned.json"
  fi
  "$PY" - "$TMP" "$N1" "$N2" <<'PYEOF'
import json, os, sys
tmp, n1, n2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s1 = json.load(open(os.path.join(tmp, "train_%d" % n1, "summary.json")))
s2 = json.load(open(os.path.join(tmp, "train_%d" % n2, "summary.json")))
w1, w2 = float(s1["wall_seconds"]), float(s2["wall_seconds"])
res = {"model": "reverse (mha-train defaults)", "steps": [n1, n2], "mha_wall_seconds": [w1, w2],
       "mha_steps_per_s": (n2 - n1) / (w2 - w1), "mha_steps_per_s_with_fixed_costs": n2 / w2,
       "mha_config": s2.get("config"), "mha_parameters": s2.get("parameters")}
tp = os.path.join(tmp, "torch_train.json")
if os.path.exists(tp):
    t = json.load(open(tp))
    res["torch"] = t
    res["torch_steps_per_s"] = t["steps_per_s"]
    res["ratio"] = res["mha_steps_per_s"] / t["steps_per_s"]
tp = os.path.join(tmp, "torch_train_tuned.json")
if os.path.exists(tp):
    t = json.load(open(tp))
    res["torch_malloc_tuned"] = t
    res["torch_steps_per_s_malloc_tuned"] = t["steps_per_s"]
    res["ratio_vs_malloc_tuned"] = res["mha_steps_per_s"] / t["steps_per_s"]
json.dump(res, open(os.path.join(tmp, "train.json"), "w"), indent=1)
PYEOF
elif [ "$TRAIN" = 1 ]; then
  echo "== training throughput: skipped (mha-train is not built in this tree)"
fi

# ---- merge -------------------------------------------------------------------------
"$PY" - "$TMP" "$OUT" "$MACHINE_IDLE" "$QUICK" <<'EOF'
import json, os, sys
tmp, out = sys.argv[1], sys.argv[2]
quick = sys.argv[4] == "1"
busy = int(sys.argv[3]) < 90  # machine_header's rule
busy_note = ("warning: the machine was busy at the start (%s%% idle): these numbers are noisy" % sys.argv[3]) if busy else ""
def load(name):
    p = os.path.join(tmp, name)
    return json.load(open(p)) if os.path.exists(p) else None
def readtext_early(name):
    p = os.path.join(tmp, name)
    return (open(p).read().strip() or None) if os.path.exists(p) else None
def passes(prefix):
    out, k = [], 1
    while load("%s%d.json" % (prefix, k)):
        out.append(load("%s%d.json" % (prefix, k)))
        k += 1
    return out
cs, ts, tr = passes("c"), passes("torch"), load("train.json")
c = cs[0]
cores = c["machine"]["cores"]
t = ts[0] if ts else None
def key(r):
    # the precision last, so key(r)[:5] is the (case, dropout) PyTorch is matched on and
    # key(r)[:6] a torch record's key
    return (r["B"], r["S"], r["D"], r["H"], r["dropout"], r["threads"],
            r.get("precision", "fp32"))
best_c = {}     # record key -> the pass's record with the lowest ms
for p in cs:
    for r in p["records"]:
        if key(r) not in best_c or r["ms"] < best_c[key(r)]["ms"]:
            best_c[key(r)] = r
all_c_ms = {}
for p in cs:
    for r in p["records"]:
        all_c_ms.setdefault(key(r), []).append(r["ms"])
torch_ms = {}   # (B,S,D,H,dropout) -> {threads: lowest ms over passes}
all_t_ms = {}
for p in ts:
    for r in p["records"]:
        k5 = key(r)[:5]
        all_t_ms.setdefault(key(r)[:6], []).append(r["ms"])
        d = torch_ms.setdefault(k5, {})
        d[r["threads"]] = min(d.get(r["threads"], float("inf")), r["ms"])
# the machine's peak per thread count: the highest of the passes' FMA-loop medians
# (a peak is an upper bound: a pass that shared the CPU measures less, never more)
peak = {}
for p in cs:
    for th, g in (p.get("peak_gflops") or {}).items():
        if g > 0:
            peak[int(th)] = max(peak.get(int(th), 0.0), g)
peak_all = {str(th): [p.get("peak_gflops", {}).get(str(th)) for p in cs] for th in sorted(peak)}
# the bf16 peak (the _mm512_dpbf16_ps loop; only in runs with bf16 rows), the same way
peak_bf16 = {}
for p in cs:
    for th, g in (p.get("peak_bf16_gflops") or {}).items():
        if g > 0:
            peak_bf16[int(th)] = max(peak_bf16.get(int(th), 0.0), g)
peak_bf16_all = {str(th): [(p.get("peak_bf16_gflops") or {}).get(str(th)) for p in cs]
                 for th in sorted(peak_bf16)}
precisions = c.get("precisions", ["fp32"])
bf16_note = readtext_early("bf16_note")
# independent FMAs scale linearly with the threads unless the cores were shared
peak_note = ""
if 1 in peak and cores in peak and cores > 1 and peak[cores] < 0.8 * cores * peak[1]:
    peak_note = ("warning: the peak loop with %d threads reached only %.2fx its 1-thread rate: "
                 "the cores were shared, so %d-thread times, fractions and targets mean little"
                 % (cores, peak[cores] / peak[1], cores))
tuned_ms = {}   # (B,S,D,H,dropout) -> {threads: ms} with malloc tuned
tt_doc = load("torch_tuned.json")
if tt_doc:
    for r in tt_doc["records"]:
        tuned_ms.setdefault(key(r)[:5], {})[r["threads"]] = r["ms"]
records = []
for r0 in c["records"]:
    r = best_c[key(r0)]
    k = (r["B"], r["S"], r["D"], r["H"], r["dropout"])
    tm = torch_ms.get(k, {})
    rec = {key: r[key] for key in ("B", "S", "D", "H", "threads", "dropout", "precision", "ms",
                                   "fwd_ms",
                                   "bwd_ms", "reps", "gflops", "gflops_dense", "sgemm_gflops",
                                   "sgemm_fraction", "activation_bytes", "reference_bytes",
                                   "activation_ratio")}
    # gflops: causal-half count; peak_fraction against the run's peak at these threads
    # bf16 rows: against the bf16 peak (the dpbf16 loop), fp32 rows: the FMA loop
    pk_here = peak_bf16 if r["precision"] == "bf16" else peak
    rec["peak_gflops"] = pk_here.get(r["threads"])
    rec["peak_fraction"] = r["gflops"] / pk_here[r["threads"]] if r["threads"] in pk_here else None
    # torch_ms: PyTorch's best time, the faster of its 1-thread and all-thread runs
    # (the issue's definition); speedup = torch_ms / ms.
    rec["torch_ms_by_threads"] = {str(k2): v for k2, v in sorted(tm.items())}
    rec["torch_ms"] = min(tm.values()) if tm else None
    rec["speedup"] = rec["torch_ms"] / r["ms"] if tm else None
    tt = tuned_ms.get(key(r)[:5], {})
    rec["torch_ms_malloc_tuned_by_threads"] = {str(k2): v for k2, v in sorted(tt.items())}
    rec["torch_ms_malloc_tuned"] = min(tt.values()) if tt else None
    rec["speedup_vs_malloc_tuned"] = rec["torch_ms_malloc_tuned"] / r["ms"] if tt else None
    rec["ms_all_passes"] = all_c_ms[key(r)]
    rec["torch_ms_all_passes"] = {str(th): all_t_ms.get(key(r)[:5] + (th,), [])
                                  for th in sorted(tm)}
    # bf16 rows: the same case's fp32 time (best pass) and fp32 ms / bf16 ms
    if r["precision"] != "fp32":
        f = best_c.get(key(r)[:6] + ("fp32",))
        rec["fp32_ms"] = f["ms"] if f else None
        rec["speedup_vs_fp32"] = f["ms"] / r["ms"] if f else None
    records.append(rec)

# ---- thread scaling: 2 threads must not be slower than 1, with either OpenBLAS build
SCALING = [(16, 64, 128, 4), (1, 2048, 256, 4)]
def readtext(name):
    p = os.path.join(tmp, name)
    return open(p).read().strip() if os.path.exists(p) else None
def best_of(passes_):
    best, every = {}, {}
    for p in passes_:
        for r in p["records"]:
            every.setdefault(key(r), []).append(r["ms"])
            if key(r) not in best or r["ms"] < best[key(r)]["ms"]:
                best[key(r)] = r
    return best, every
def scaling_rows(build, best, every):
    rows = []
    for shape in SCALING:
        for p in sorted({k[4] for k in best if k[:4] == shape} or {0.0, 0.1}):
            r1, r2 = best.get(shape + (p, 1, "fp32")), best.get(shape + (p, 2, "fp32"))
            row = {"build": build, "B": shape[0], "S": shape[1], "D": shape[2], "H": shape[3],
                   "dropout": p, "ms_1_thread": r1["ms"] if r1 else None,
                   "ms_2_threads": r2["ms"] if r2 else None, "ratio_2_to_1": None, "met": None,
                   "ms_all_passes": {"1": every.get(shape + (p, 1, "fp32"), []),
                                     "2": every.get(shape + (p, 2, "fp32"), [])}}
            if r1 and r2:
                row["ratio_2_to_1"] = r2["ms"] / r1["ms"]
                row["met"] = r2["ms"] <= r1["ms"]
            rows.append(row)
    return rows
main_build = c["machine"].get("openblas_parallel", "?")
scaling = {"target": "ms at 2 threads <= ms at 1 thread (issue 11), per shape and dropout",
           "shapes": [list(x) for x in SCALING], "rows": [],
           "pthreads_dir": readtext("pthr_dir"), "pthreads_note": readtext("pthr_note"),
           "pthreads_machine": None, "main_build": main_build}
ps = passes("pthr")
if ps:
    scaling["pthreads_machine"] = ps[0]["machine"]
    got = ps[0]["machine"].get("openblas_parallel")
    if got != "pthreads":
        scaling["pthreads_note"] = ("not measured: LD_LIBRARY_PATH=%s loaded %s (%s build), not "
                                    "the pthreads build" % (scaling["pthreads_dir"],
                                    ps[0]["machine"].get("openblas_library", "?"), got))
    else:
        pb, pe = best_of(ps)
        scaling["rows"] += scaling_rows("pthreads (forced)", pb, pe)
        scaling["pthreads_records"] = [pb[k] for k in sorted(pb)]
scaling["rows"] += scaling_rows("main run (%s)" % main_build, best_c, all_c_ms)

# ---- stored vs recompute mode at S = 4096: best pass per mode
modes = {}
for mode in ("stored", "recompute"):
    runs = passes("mode_%s_" % mode)
    rs = [p["records"][0] for p in runs if p["records"]]
    if rs:
        best = min(rs, key=lambda r: r["ms"])
        modes[mode] = {"ms": best["ms"], "ms_all_passes": [r["ms"] for r in rs],
                       "activation_bytes": best["activation_bytes"],
                       "cache_total_bytes": best["cache_total_bytes"]}
        modes["case"] = {k: best[k] for k in ("B", "S", "D", "H", "threads", "dropout")}
if "stored" in modes and "recompute" in modes:
    modes["time_ratio"] = modes["recompute"]["ms"] / modes["stored"]["ms"]
    modes["activation_ratio"] = (modes["recompute"]["activation_bytes"] /
                                 modes["stored"]["activation_bytes"])

# ---- the issue's targets: p = 0, the all-core rows (2 threads on the 2-core machines the
# issue was written for), PyTorch's best of 1 and all threads, best pass each
def record_at(shape, p, th):
    for r in records:  # the issue's targets: fp32 rows
        if ((r["B"], r["S"], r["D"], r["H"]) == shape and r["dropout"] == p and
                r["threads"] == th and r["precision"] == "fp32"):
            return r
    return None
def target(name, what, value, op, limit, unit):
    met = None if value is None else (value <= limit if op == "<=" else value >= limit)
    return {"name": name, "what": what, "measured": value, "op": op, "target": limit,
            "unit": unit, "met": met}
def shape_name(sh):
    return "(%d,%d,%d,%d)" % sh
SEED_SHAPE = (2, 10, 64, 8)
LARGE = [(16, 64, 128, 4), (8, 256, 256, 8), (1, 2048, 256, 4)]
targets = []
for sh, lim in [(SEED_SHAPE, 15.0), (LARGE[0], 4.5), (LARGE[1], 6.0), (LARGE[2], 8.0)]:
    r = record_at(sh, 0.0, cores)
    targets.append(target("speedup_%d_%d_%d_%d" % sh,
                          "speed-up vs PyTorch %s" % shape_name(sh),
                          r["speedup"] if r else None, ">=", lim, "x"))
for sh in LARGE:
    r = record_at(sh, 0.0, cores)
    targets.append(target("peak_fraction_%d_%d_%d_%d" % sh,
                          "peak fraction %s" % shape_name(sh),
                          r["peak_fraction"] if r else None, ">=", 0.6, ""))
for sh in LARGE:
    r1, r2 = record_at(sh, 0.0, 1), record_at(sh, 0.0, cores)
    targets.append(target("scaling_%d_%d_%d_%d" % sh,
                          "%d threads vs 1, ms(1)/ms(%d) %s" % (cores, cores, shape_name(sh)),
                          r1["ms"] / r2["ms"] if (r1 and r2 and cores > 1) else None, ">=", 1.7,
                          "x"))
targets.append(target("train_steps_per_s", "mha-train defaults, steps/s",
                      tr["mha_steps_per_s"] if tr else None, ">=", 1200.0, "steps/s"))
targets.append(target("recompute_time_ratio",
                      "recompute / stored ms (1,4096,256,4)",
                      modes.get("time_ratio"), "<=", 1.3, "x"))
# "keeps its memory": the memory target of the recompute mode (saved activations
# <= 72 MiB at S = 16384, linear in S) scaled to S = 4096
targets.append(target("recompute_saved_mib",
                      "recompute saved bytes (1,4096,256,4)",
                      modes["recompute"]["activation_bytes"] / 2.0**20 if "recompute" in modes
                      else None, "<=", 18.0, "MiB"))

doc = {"machine": c["machine"], "passes": len(cs), "quick": quick,
       "torch_malloc_tuned": tt_doc["machine"] if tt_doc else None,
       "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
       "flop_count": "causal_half: 3*(8*B*S*D^2 + 2*B*S^2*D) per step; gflops_dense: "
                     "3*(8*B*S*D^2 + 4*B*S^2*D)",
       "peak": {k: v for k, v in (c.get("peak") or {}).items() if k != "gflops"} or None,
       "peak_vector_bits": c.get("peak_vector_bits"),
       "peak_gflops": {str(th): g for th, g in sorted(peak.items())},
       "peak_gflops_all_passes": peak_all, "peak_note": peak_note or None,
       "precisions": precisions, "bf16_note": bf16_note,
       "peak_bf16": {k: v for k, v in (c.get("peak_bf16") or {}).items() if k != "gflops"}
                    or None,
       "peak_bf16_gflops": {str(th): g for th, g in sorted(peak_bf16.items())},
       "peak_bf16_gflops_all_passes": peak_bf16_all,
       "sgemm_1024": c["sgemm_1024"], "torch": t["machine"] if t else None,
       "records": records, "training": tr, "thread_scaling": scaling,
       "memory_modes": modes or None, "targets": targets}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)

print()
def fmt_or_dash(v, fmt):
    return fmt % v if v is not None else "-"
pk = c.get("peak")
if pk:
    print("peak (FMA loop, %s, %d-bit vectors, %d accumulators; highest of %d pass%s): %s" % (
        pk["isa"], pk["vector_bits"], pk["accumulators"], len(cs), "" if len(cs) == 1 else "es",
        ", ".join("%d thread%s %.1f GFLOP/s" % (th, "" if th == 1 else "s", g)
                  for th, g in sorted(peak.items()))))
if peak_bf16:
    print("bf16 peak (_mm512_dpbf16_ps loop, 64 flops an instruction; highest of %d pass%s): %s"
          % (len(cs), "" if len(cs) == 1 else "es",
             ", ".join("%d thread%s %.1f GFLOP/s" % (th, "" if th == 1 else "s", g)
                       for th, g in sorted(peak_bf16.items()))))
if bf16_note:
    print(bf16_note)
print("GFLOP/s count the causal half of the attention scores: 3·(8·B·S·D² + 2·B·S²·D) per step")
print()
print("%-14s %3s %4s %4s %9s %8s %6s %6s %9s %8s %9s %8s %6s %10s %6s" % ("B,S,D,H", "thr", "p",
      "prec", "ms", "GFLOP/s", "%sgemm", "%peak", "torch_ms", "speedup", "tuned_ms", "speedup",
      "act/ref", "act_bytes", "/fp32"))
for r in records:
    print("%-14s %3d %4.2g %4s %9.4f %8.2f %5.1f%% %6s %9s %8s %9s %8s %6.3f %10d %6s" % (
        "%d,%d,%d,%d" % (r["B"], r["S"], r["D"], r["H"]), r["threads"], r["dropout"],
        r["precision"], r["ms"], r["gflops"], 100 * r["sgemm_fraction"],
        fmt_or_dash(None if r["peak_fraction"] is None else 100 * r["peak_fraction"], "%5.1f%%"),
        fmt_or_dash(r["torch_ms"], "%.4f"),
        fmt_or_dash(r["speedup"], "%.1fx"), fmt_or_dash(r["torch_ms_malloc_tuned"], "%.4f"),
        fmt_or_dash(r["speedup_vs_malloc_tuned"], "%.1fx"), r["activation_ratio"], r["activation_bytes"],
        fmt_or_dash(r.get("speedup_vs_fp32"), "%.2fx")))
print("(speedup = PyTorch's best of 1 and %d threads / ours; tuned = the same with glibc malloc "
      "keeping its heap;\n %%sgemm, %%peak = GFLOP/s / the 1024³ sgemm's, / the FMA-loop peak's "
      "(bf16 rows: the bf16 peak's), at the row's thread count;\n /fp32 = the fp32 row's ms / "
      "the bf16 row's; the issue's targets use the fp32 %d-thread rows)" % (cores, cores))
if tr:
    print()
    print("training (%s): mha-train %.1f steps/s, PyTorch %s steps/s, ratio %s; "
          "PyTorch malloc-tuned %s steps/s, ratio %s" % (
        tr.get("model", "reverse"), tr["mha_steps_per_s"],
        fmt_or_dash(tr.get("torch_steps_per_s"), "%.1f"), fmt_or_dash(tr.get("ratio"), "%.1fx"),
        fmt_or_dash(tr.get("torch_steps_per_s_malloc_tuned"), "%.1f"),
        fmt_or_dash(tr.get("ratio_vs_malloc_tuned"), "%.1fx")))
def verdict(row):
    if row["met"] is None:
        return "not measured (no 1- and 2-thread rows)"
    return "met" if row["met"] else "MISSED: 2 threads slower than 1"
print()
print("thread scaling, target: 2 threads <= 1 thread (ms; best of %d pass%s):" % (
    len(cs), "" if len(cs) == 1 else "es"))
print("%-22s %-14s %4s %10s %10s %6s  %s" % ("build (OpenBLAS)", "B,S,D,H", "p", "1 thr ms",
                                             "2 thr ms", "2/1", "target"))
for row in scaling["rows"]:
    print("%-22s %-14s %4.2g %10s %10s %6s  %s" % (
        row["build"], "%d,%d,%d,%d" % (row["B"], row["S"], row["D"], row["H"]), row["dropout"],
        fmt_or_dash(row["ms_1_thread"], "%.4f"), fmt_or_dash(row["ms_2_threads"], "%.4f"),
        fmt_or_dash(row["ratio_2_to_1"], "%.3f"), verdict(row)))
if scaling["pthreads_note"]:
    print("pthreads OpenBLAS: %s" % scaling["pthreads_note"])
missed = sum(1 for row in scaling["rows"] if row["met"] is False)
if missed:
    print("THREAD SCALING MISSED in %d row%s (2 threads slower than 1; on a busy machine, "
          "re-run before believing it)" % (missed, "" if missed == 1 else "s"))
if modes.get("time_ratio") is not None:
    print()
    print("memory modes, (%d,%d,%d,%d), p %g, %d threads (best of %d): stored %.1f ms, %.1f MiB "
          "saved; recompute %.1f ms, %.1f MiB saved; time ratio %.3f" % (
              modes["case"]["B"], modes["case"]["S"], modes["case"]["D"], modes["case"]["H"],
              modes["case"]["dropout"], modes["case"]["threads"],
              len(modes["stored"]["ms_all_passes"]), modes["stored"]["ms"],
              modes["stored"]["activation_bytes"] / 2.0**20, modes["recompute"]["ms"],
              modes["recompute"]["activation_bytes"] / 2.0**20, modes["time_ratio"]))
UNIT_FMT = {"x": "%.2fx", "": "%.3f", "steps/s": "%.0f steps/s", "MiB": "%.1f MiB"}
def met_word(t):
    return {True: "met", False: "MISSED", None: "not measured"}[t["met"]]
print()
print("targets (issue 9): fp32, dropout 0, %d-thread rows, best pass; speed-up = PyTorch's best of 1 "
      "and %d threads / ours;\n peak fraction with the causal count; memory modes at %d threads"
      % (cores, cores, cores))
print("%-44s %12s %18s  %s" % ("target", "measured", "wanted", ""))
for tg in targets:
    print("%-44s %12s %18s  %s" % (tg["what"], fmt_or_dash(tg["measured"], UNIT_FMT[tg["unit"]]),
                                   tg["op"] + " " + UNIT_FMT[tg["unit"]] % tg["target"],
                                   met_word(tg)))
n_missed = sum(1 for tg in targets if tg["met"] is False)
n_met = sum(1 for tg in targets if tg["met"] is True)
print("%d met, %d MISSED, %d not measured%s" % (
    n_met, n_missed, len(targets) - n_met - n_missed,
    " (--quick: a smoke run, not the targets' measurement)" if quick else ""))
if peak_note:
    print(peak_note)
if busy_note:
    print(busy_note)
# the same table in Markdown, for bench/README.md
md = os.path.splitext(out)[0] + ".md"
with open(md, "w") as f:
    if busy_note:
        f.write("**%s**\n\n" % busy_note)
    if peak_note:
        f.write("**%s**\n\n" % peak_note)
    if pk:
        f.write("Peak (FMA loop, %s, %d-bit vectors): %s. GFLOP/s count the causal half of "
                "the attention scores.\n\n" % (
                    pk["isa"], pk["vector_bits"],
                    ", ".join("%.1f GFLOP/s with %d thread%s" % (g, th, "" if th == 1 else "s")
                              for th, g in sorted(peak.items()))))
    if peak_bf16:
        f.write("bf16 peak (`_mm512_dpbf16_ps` loop, 64 flops an instruction): %s; the bf16 "
                "rows' peak fraction is against it, their sgemm fraction against the float32 "
                "sgemm.\n\n" % ", ".join("%.1f GFLOP/s with %d thread%s" % (
                    g, th, "" if th == 1 else "s") for th, g in sorted(peak_bf16.items())))
    if bf16_note:
        f.write("%s\n\n" % bf16_note)
    f.write("| B, S, D, H | threads | dropout | precision | ms | GFLOP/s | sgemm GFLOP/s "
            "| sgemm fraction | peak fraction | PyTorch ms (best) | speed-up "
            "| PyTorch ms, malloc tuned | speed-up | saved bytes | / reference "
            "| fp32 ms / this |\n")
    f.write("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: | ---: | ---: | ---: |\n")
    for r in records:
        f.write("| %d, %d, %d, %d | %d | %g | %s | %.4g | %.1f | %.0f | %.0f %% | %s | %s | %s "
                "| %s | %s | %d | %.3f | %s |\n" % (
            r["B"], r["S"], r["D"], r["H"], r["threads"], r["dropout"], r["precision"], r["ms"],
            r["gflops"],
            r["sgemm_gflops"], 100 * r["sgemm_fraction"],
            fmt_or_dash(None if r["peak_fraction"] is None else 100 * r["peak_fraction"],
                        "%.0f %%"),
            fmt_or_dash(r["torch_ms"], "%.4g"),
            fmt_or_dash(r["speedup"], "%.1f×"), fmt_or_dash(r["torch_ms_malloc_tuned"], "%.4g"),
            fmt_or_dash(r["speedup_vs_malloc_tuned"], "%.1f×"), r["activation_bytes"],
            r["activation_ratio"], fmt_or_dash(r.get("speedup_vs_fp32"), "%.2f×")))
    if tr:
        f.write("\nTraining, `reverse` with mha-train's defaults: mha-train %.1f steps/s, "
                "PyTorch %s steps/s (best of %s threads), ratio %s; PyTorch with malloc "
                "tuned %s steps/s, ratio %s.\n" % (
                    tr["mha_steps_per_s"], fmt_or_dash(tr.get("torch_steps_per_s"), "%.1f"),
                    " and ".join(sorted(tr["torch"]["steps_per_s_by_threads"])) if tr.get("torch") else "-",
                    fmt_or_dash(tr.get("ratio"), "%.1f×"),
                    fmt_or_dash(tr.get("torch_steps_per_s_malloc_tuned"), "%.1f"),
                    fmt_or_dash(tr.get("ratio_vs_malloc_tuned"), "%.1f×")))
    f.write("\nThread scaling, target: 2 threads ≤ 1 thread (ms, best of %d pass%s):\n\n" % (
        len(cs), "" if len(cs) == 1 else "es"))
    f.write("| build (OpenBLAS) | B, S, D, H | dropout | ms, 1 thread | ms, 2 threads | 2 / 1 "
            "| 2 threads ≤ 1 thread? |\n")
    f.write("| --- | --- | ---: | ---: | ---: | ---: | --- |\n")
    for row in scaling["rows"]:
        v = verdict(row)
        f.write("| %s | %d, %d, %d, %d | %g | %s | %s | %s | %s |\n" % (
            row["build"], row["B"], row["S"], row["D"], row["H"], row["dropout"],
            fmt_or_dash(row["ms_1_thread"], "%.4g"), fmt_or_dash(row["ms_2_threads"], "%.4g"),
            fmt_or_dash(row["ratio_2_to_1"], "%.3f"), "**%s**" % v if row["met"] is False else v))
    if scaling["pthreads_note"]:
        f.write("\npthreads OpenBLAS: %s\n" % scaling["pthreads_note"])
    if modes.get("time_ratio") is not None:
        f.write("\nMemory modes, (%d, %d, %d, %d), dropout %g, %d threads: stored %.1f ms "
                "(%.1f MiB saved), recompute %.1f ms (%.1f MiB saved), ratio %.3f.\n" % (
                    modes["case"]["B"], modes["case"]["S"], modes["case"]["D"],
                    modes["case"]["H"], modes["case"]["dropout"], modes["case"]["threads"],
                    modes["stored"]["ms"], modes["stored"]["activation_bytes"] / 2.0**20,
                    modes["recompute"]["ms"], modes["recompute"]["activation_bytes"] / 2.0**20,
                    modes["time_ratio"]))
    f.write("\nTargets (issue 9; fp32, dropout 0, %d-thread rows, best pass; speed-up = PyTorch's "
            "best of 1 and %d threads / ours; peak fraction with the causal count%s):\n\n" % (
                cores, cores, "; --quick: a smoke run" if quick else ""))
    f.write("| target | measured | wanted | met? |\n| --- | ---: | ---: | --- |\n")
    for tg in targets:
        u = UNIT_FMT[tg["unit"]].replace("x", "×")
        f.write("| %s | %s | %s %s | %s |\n" % (
            tg["what"], fmt_or_dash(tg["measured"], u), "≤" if tg["op"] == "<=" else "≥",
            u % tg["target"], "**MISSED**" if tg["met"] is False else met_word(tg)))
print("\nwrote %s and %s" % (out, md))
EOF
