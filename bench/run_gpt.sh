#!/usr/bin/env bash
# bench/run_gpt.sh — the baby GPT's performance goals in one run: builds mha-gpt-bench
# and mha-gpt, times our training step beside PyTorch's, generation, and the whole
# 2,000-step baby run; writes bench-gpt.json (+ bench-gpt.md) and prints the table.
#
#   bench/run_gpt.sh [--out FILE] [--build-dir DIR] [--passes N] [--quick]
#                    [--no-full | --full] [--torch-full] [--no-torch] [--wait-idle SEC]
#                    [--precision LIST]
#
#   --out FILE       results (default: bench-gpt.json in the current directory; the
#                    Markdown table goes beside it, FILE with .md)
#   --build-dir DIR  CMake build directory (default: ${TMPDIR:-/tmp}/mha-gpt-bench-build)
#   --passes N       time the training step N times, alternating C and PyTorch, and
#                    keep, per side and thread count, the fastest pass (default 2)
#   --quick          a smoke run: 10 timed steps, one pass (unless --passes), no
#                    full run (unless --full); the targets' met/missed mean nothing
#   --no-full        skip the full 2,000-step baby run of mha-gpt train
#   --full           do the full run even with --quick (then 100 steps, 10 eval batches)
#   --torch-full     also train PyTorch's model for the whole schedule (2 threads) for
#                    its validation loss and wall time (~75 s; off by default)
#   --no-torch       skip PyTorch even if /usr/bin/python3 imports torch
#   --wait-idle SEC  first wait up to SEC seconds for the CPUs to be >= 90 % idle
#                    over 3 s; default 0 = do not wait
#   --precision LIST the precisions of our step and baby run: default fp32,bf16 where
#                    the CPU runs bf16 (mha-gpt-bench --check-precision bf16), else
#                    fp32 with a printed note; a list given here is used as it is
#                    (bf16 on a CPU without AVX512_BF16: exit status 2)
#
# Measured: mha-gpt-bench --threads 1,2 --precision fp32,bf16 (median ms of a training
# step = zero_grad, forward, backward, clipping, AdamW, per precision and thread count;
# tokens/s; an evaluation forward; generation chars/s with and without the key/value
# cache, one thread, float32) and bench/torch_gpt.py --threads 1, then 2 (the same
# model, optimizer and step in PyTorch, float32); then `mha-gpt train` with the baby
# config, once per precision, under /usr/bin/time (wall seconds, peak RSS, final
# validation loss from summary.json, the evaluations' share of the wall time).
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the environment sets them.
# The machine has 2 cores: run nothing else meanwhile.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="bench-gpt.json"
BUILD="${TMPDIR:-/tmp}/mha-gpt-bench-build"
PASSES=""        # empty: the default (2, 1 with --quick)
QUICK=0
FULL=""          # empty: the default (on, off with --quick)
TORCH_FULL=0
TORCH=1
WAIT_IDLE=0
PRECISION=""     # empty: fp32,bf16 where the CPU runs bf16, else fp32
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --precision) PRECISION="$2"; shift 2 ;;
    --build-dir) BUILD="$2"; shift 2 ;;
    --passes) PASSES="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --no-full) FULL=0; shift ;;
    --full) FULL=1; shift ;;
    --torch-full) TORCH_FULL=1; shift ;;
    --no-torch) TORCH=0; shift ;;
    --wait-idle) WAIT_IDLE="$2"; shift 2 ;;
    -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_gpt.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$PASSES" ] || PASSES=$(( QUICK ? 1 : 2 ))
for v in "$PASSES" "$WAIT_IDLE"; do
  case "$v" in ''|*[!0-9]*) echo "run_gpt.sh: expected a number, got '$v'" >&2; exit 2 ;; esac
done
[ "$PASSES" -ge 1 ] || { echo "run_gpt.sh: --passes must be >= 1" >&2; exit 2; }
[ -n "$FULL" ] || FULL=$(( 1 - QUICK ))

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mha-gpt-bench.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
DATA="$REPO/data/tinyshakespeare.txt"
[ -f "$DATA" ] || { echo "run_gpt.sh: $DATA is missing" >&2; exit 1; }
if [ "$FULL" = 1 ] && [ ! -x /usr/bin/time ]; then
  echo "run_gpt.sh: the full run needs /usr/bin/time (Debian: apt-get install time), or --no-full" >&2
  exit 1
fi

# ---- build ----------------------------------------------------------------------
echo "== build ($BUILD)"
cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DMHA_BUILD_EXAMPLES=OFF -DMHA_BUILD_BENCH=ON >"$TMP/cmake.log" 2>&1 \
  || { cat "$TMP/cmake.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target mha-gpt-bench mha-gpt >"$TMP/build.log" 2>&1 \
  || { cat "$TMP/build.log"; exit 1; }

# ---- machine (after the build: the compile must not be part of the idle wait) ------
. "$REPO/bench/common.sh"   # idle_percent, wait_idle, machine_header
wait_idle "$WAIT_IDLE"
machine_header
echo "   CPU flags: $(for f in avx512f avx512_bf16 amx_bf16; do
  grep -m1 '^flags' /proc/cpuinfo | grep -qw "$f" && printf '%s ' "$f" || printf 'no-%s ' "$f"; done)"

# ---- precisions: bf16 beside fp32 where the CPU runs it ------------------------------
choose_precisions "$BUILD/mha-gpt-bench" "$TMP"
echo "== precisions: $PRECISION"
echo "$PRECISION" >"$TMP/precisions"

C_ARGS=(); T_ARGS=(); T_FULL=(); STEPS=2000; WARMUP=100; EVAL=()
if [ "$QUICK" = 1 ]; then
  C_ARGS=(--steps 10 --warmup 3 --gen-chars 300); T_ARGS=(--steps 10 --warmup 3)
  STEPS=100; WARMUP=10; EVAL=(--eval-every 100 --eval-batches 10)
  T_FULL=(--total 100 --lr-warmup 10)
fi
# The baby config of the issue (mha-gpt train's defaults, given explicitly).
BABY=(--layers 4 --heads 4 --dim 128 --context 64 --batch 12 --steps "$STEPS" --lr 1e-3
      --min-lr 1e-4 --warmup "$WARMUP" --dropout 0 --threads 2 "${EVAL[@]}")
HAVE_TORCH=0
if [ "$TORCH" = 1 ] && [ -x "$PY" ] && "$PY" -c 'import torch' >/dev/null 2>&1; then
  HAVE_TORCH=1
fi

# ---- training step and generation: C and PyTorch, alternating, PASSES times -------
# Each pass is a whole measurement (its own warm-up and medians); the merge keeps, per
# side and thread count, the pass with the lowest median, so that a burst of someone
# else's work spoils one pass rather than the result.
for pass in $(seq 1 "$PASSES"); do
  echo "== mha-gpt-bench (pass $pass of $PASSES)"
  "$BUILD/mha-gpt-bench" --data "$DATA" --threads 1,2 --precision "$PRECISION" "${C_ARGS[@]}" \
                         --json "$TMP/c$pass.json"
  if [ "$HAVE_TORCH" = 1 ]; then
    echo "== PyTorch, bench/torch_gpt.py (pass $pass of $PASSES)"
    for th in 1 2; do
      "$PY" "$REPO/bench/torch_gpt.py" --data "$DATA" --threads "$th" "${T_ARGS[@]}" --json \
            >"$TMP/torch${pass}_$th.json"
      "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1]))
print("torch_gpt: %d thread%s: step %.2f ms (median of %d)" % (d["threads"],
      "" if d["threads"] == 1 else "s", d["ms_per_step"], d["steps"]))' "$TMP/torch${pass}_$th.json"
    done
  fi
done
[ "$HAVE_TORCH" = 1 ] || echo "== PyTorch: skipped (no /usr/bin/python3 with torch, or --no-torch)"

# ---- mha-gpt train's own step against mha-gpt-bench's, side by side ------------------
# The machine's speed drifts over minutes, so the two are compared in alternating short
# runs of the same model at 2 threads: the trainer with evaluations every 100 steps and
# its checkpoints (its summary.json's step_ms: the mean step without the evaluations),
# then the bench (its mean step). Twice per precision; the merge takes the median ratio.
GAP_STEPS=300; [ "$QUICK" = 1 ] && GAP_STEPS=30
for prec in ${PRECISION//,/ }; do
  for r in 1 2; do
    echo "== trainer against bench, $prec, pair $r of 2 ($GAP_STEPS steps each)"
    "$BUILD/mha-gpt" train --data "$DATA" --layers 4 --heads 4 --dim 128 --context 64       --batch 12 --steps "$GAP_STEPS" --warmup 10 --eval-every 100 --eval-batches 20       --ckpt-every 100 --sample-chars 0 --threads 2 --precision "$prec"       --out "$TMP/gap_${prec}_$r" >"$TMP/gap_${prec}_$r.log" 2>&1       || { tail -20 "$TMP/gap_${prec}_$r.log"; exit 1; }
    "$BUILD/mha-gpt-bench" --data "$DATA" --threads 2 --precision "$prec"       --steps "$GAP_STEPS" --warmup 10 --gen-chars 1 --json "$TMP/gapb_${prec}_$r.json"       | grep "threads 2"
  done
done

# ---- the whole baby run, once per precision ------------------------------------------
# /usr/bin/time: %e = wall seconds of the whole process (start-up, 2,000 steps, the
# evaluations every 250 steps, checkpoints, pictures, the 500-character sample),
# %M = peak resident set in KiB.
if [ "$FULL" = 1 ]; then
  for prec in ${PRECISION//,/ }; do
    echo "== full run: mha-gpt train ${BABY[*]} --precision $prec"
    /usr/bin/time -o "$TMP/full_$prec.time" -f '%e %M' \
      "$BUILD/mha-gpt" train --data "$DATA" "${BABY[@]}" --precision "$prec" \
      --out "$TMP/full_$prec" >"$TMP/full_$prec.log" 2>&1 \
      || { tail -20 "$TMP/full_$prec.log"; exit 1; }
    grep -m1 '^validation loss' "$TMP/full_$prec.log" || true
    printf '%s\n' "${BABY[@]}" --precision "$prec" >"$TMP/full_$prec.args"
  done
else
  echo "== full run: skipped (--no-full or --quick)"
fi
if [ "$TORCH_FULL" = 1 ] && [ "$HAVE_TORCH" = 1 ]; then
  echo "== full run, PyTorch: torch_gpt.py --full --threads 2 ${T_FULL[*]}"
  "$PY" "$REPO/bench/torch_gpt.py" --data "$DATA" --full --threads 2 "${T_FULL[@]}" --json \
        >"$TMP/torch_full.json"
fi

# ---- merge, targets, table ----------------------------------------------------------
"$PY" - "$TMP" "$OUT" "$QUICK" "$MACHINE_IDLE" "$MACHINE_LOAD" <<'EOF'
import json, os, sys
tmp, out, quick, idle, load = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4], sys.argv[5]

def load_json(name):
    p = os.path.join(tmp, name)
    return json.load(open(p)) if os.path.exists(p) else None

def passes(fmt):
    res, k = [], 1
    while os.path.exists(os.path.join(tmp, fmt % k)):
        res.append(load_json(fmt % k))
        k += 1
    return res

def readtext(name):
    p = os.path.join(tmp, name)
    return (open(p).read().strip() or None) if os.path.exists(p) else None

cs = passes("c%d.json")
c0 = cs[0]
B, T = c0["batch"], c0["context"]
precisions = c0.get("precisions", ["fp32"])
bf16_note = readtext("bf16_note")

# training step: per side, precision and thread count, the pass with the lowest median
mha, mha_all = {}, {}   # precision -> threads -> record / every pass's ms
for p in cs:
    for r in p["train"]:
        pr, th = r.get("precision", "fp32"), str(r["threads"])
        mha_all.setdefault(pr, {}).setdefault(th, []).append(r["ms"])
        d = mha.setdefault(pr, {})
        if th not in d or r["ms"] < d[th]["ms"]:
            d[th] = r
torch, torch_all = {}, {}
for th in ("1", "2"):
    for p in passes("torch%%d_%s.json" % th):
        torch_all.setdefault(th, []).append(p["ms_per_step"])
        if th not in torch or p["ms_per_step"] < torch[th]["ms_per_step"]:
            torch[th] = p
def mha_rows(pr):
    return {th: dict(r, ms_all_passes=mha_all[pr][th]) for th, r in sorted(mha.get(pr, {}).items())}
# "mha" stays the float32 rows (as before bf16); "mha_bf16" the bf16 ones
step = {"mha": mha_rows("fp32"), "mha_bf16": mha_rows("bf16") or None,
        "torch": {th: {"ms": r["ms_per_step"], "ms_mean": r["ms_per_step_mean"],
                       "steps": r["steps"], "tokens_per_s": B * T / (1e-3 * r["ms_per_step"]),
                       "ms_all_passes": torch_all[th]} for th, r in sorted(torch.items())}}
torch_best = min((r["ms_per_step"], th) for th, r in torch.items()) if torch else None
def ms2(pr):
    r = mha.get(pr, {}).get("2")
    return r["ms"] if r else None
def speedup(pr):
    return torch_best[0] / ms2(pr) if torch_best and ms2(pr) else None
step["torch_best_ms"] = torch_best[0] if torch_best else None
step["torch_best_threads"] = int(torch_best[1]) if torch_best else None
step["speedup_2_threads"] = speedup("fp32")
step["speedup_2_threads_bf16"] = speedup("bf16")
step["bf16_vs_fp32_2_threads"] = (ms2("fp32") / ms2("bf16")) if ms2("fp32") and ms2("bf16") else None

# generation (float32, as mha-gpt sample): the best pass
gen = {"chars_per_s": max(p["gen_chars_per_s"] for p in cs),
       "chars_per_s_no_cache": max(p["gen_chars_per_s_no_cache"] for p in cs),
       "chars_per_s_all_passes": [p["gen_chars_per_s"] for p in cs], "threads": 1,
       "precision": c0.get("gen_precision", "fp32")}

# the full baby runs, one per precision
def full_run(pr):
    if not os.path.exists(os.path.join(tmp, "full_%s.time" % pr)):
        return None
    wall, rss_kib = open(os.path.join(tmp, "full_%s.time" % pr)).read().split()[-2:]
    s = load_json(os.path.join("full_%s" % pr, "summary.json"))
    cfg = s.get("config") or {}
    run = {"precision": pr, "args": open(os.path.join(tmp, "full_%s.args" % pr)).read().split(),
           "wall_s": float(wall), "peak_rss_mib": int(rss_kib) / 1024.0,
           "val_loss": s["val_loss"], "train_loss": s["train_loss"],
           "best_val_loss": s["best_val_loss"], "best_val_step": s["best_val_step"],
           "steps": s["steps"], "loop_wall_s": s["wall_seconds"],
           "train_step_ms": s.get("step_ms"),
           "tokens_per_s": s["tokens_per_second"], "parameters": s["parameters"],
           "config": s.get("config")}
    # The evaluations' share of the wall time. summary.json has no evaluation time (mha-gpt
    # train measures it for its "left" estimate but does not write it): use it when a later
    # version writes "eval_seconds", else estimate it as evaluations x 2 splits x
    # eval-batches x the median evaluation forward mha-gpt-bench measured (same precision,
    # the run's threads, best pass).
    every, nb = cfg.get("eval-every"), cfg.get("eval-batches")
    n_eval = (s["steps"] // every + (1 if s["steps"] % every else 0)) if every else None
    run["evaluations"] = n_eval
    measured = next((s[k] for k in ("eval_seconds", "eval_wall_seconds") if k in s), None)
    if measured is not None:
        run["eval_s"], run["eval_s_source"] = float(measured), "summary.json"
    else:
        th = str(cfg.get("threads", 2))
        fwd = [r.get("eval_fwd_ms") for p in cs for r in p["train"]
               if r.get("precision", "fp32") == pr and str(r["threads"]) == th
               and r.get("eval_fwd_ms")]
        if fwd and n_eval and nb:
            run["eval_s"] = n_eval * 2 * nb * min(fwd) * 1e-3
            run["eval_s_source"] = ("estimated: %d evaluations x 2 splits x %d batches x %.3f ms "
                                    "(mha-gpt-bench's evaluation forward, %s threads)"
                                    % (n_eval, nb, min(fwd), th))
        else:
            run["eval_s"], run["eval_s_source"] = None, "not available"
    run["eval_share"] = run["eval_s"] / run["wall_s"] if run["eval_s"] is not None else None
    return run
full = full_run("fp32")
full_bf16 = full_run("bf16")
val_delta = (full_bf16["val_loss"] - full["val_loss"]) if full and full_bf16 else None
tf = load_json("torch_full.json")
torch_full = None
if tf:
    torch_full = {k: tf.get(k) for k in ("val_loss", "wall_s", "train_wall_s", "eval_s",
                                         "ms_per_step", "steps", "threads", "val_batches")}

def target(name, what, value, op, limit, unit):
    met = None if value is None else (value <= limit if op == "<=" else value >= limit)
    return {"name": name, "what": what, "measured": value, "op": op, "target": limit,
            "unit": unit, "met": met}

def steps_txt(f):
    return "{:,}".format(f["steps"]) if f else "2,000"
def gap(pr):
    """Median over the alternating pairs of mha-gpt train's step_ms / mha-gpt-bench's mean."""
    ratios = []
    for r in (1, 2):
        t = load_json(os.path.join("gap_%s_%d" % (pr, r), "summary.json"))
        b = load_json("gapb_%s_%d.json" % (pr, r))
        if t and b and t.get("step_ms") and b["train"] and b["train"][0].get("mean_ms"):
            ratios.append(t["step_ms"] / b["train"][0]["mean_ms"])
    ratios.sort()
    return (ratios[0] + ratios[-1]) / 2 if ratios else None
targets = [
    target("step_ms", "training step, 2 threads (median, best pass)", ms2("fp32"), "<=", 22.0,
           "ms"),
    target("step_ms_bf16", "bf16 training step, 2 threads (median, best pass)", ms2("bf16"),
           "<=", 13.0, "ms"),
    target("speedup", "PyTorch's best of 1 and 2 threads / ours at 2 threads",
           speedup("fp32"), ">=", 3.0, "x"),
    target("speedup_bf16", "PyTorch's best of 1 and 2 threads / ours in bf16 at 2 threads",
           speedup("bf16"), ">=", 5.0, "x"),
    target("run_wall_s", "whole baby run with evaluation, wall (/usr/bin/time)",
           full["wall_s"] if full else None, "<=", 60.0, "s"),
    target("run_wall_s_bf16", "whole bf16 baby run with evaluation, wall (/usr/bin/time)",
           full_bf16["wall_s"] if full_bf16 else None, "<=", 35.0, "s"),
    target("eval_share", "evaluations' share of the baby run's wall time",
           full["eval_share"] if full else None, "<=", 0.10, ""),
    target("eval_share_bf16", "evaluations' share of the bf16 baby run's wall time",
           full_bf16["eval_share"] if full_bf16 else None, "<=", 0.10, ""),
    target("val_loss", "validation loss after the baby run (mha-gpt train, %s steps)"
           % steps_txt(full), full["val_loss"] if full else None, "<=", 1.89, "nats"),
    target("val_loss_bf16", "validation loss after the bf16 baby run (%s steps)"
           % steps_txt(full_bf16), full_bf16["val_loss"] if full_bf16 else None, "<=", 1.89,
           "nats"),
    target("val_loss_bf16_delta", "bf16 baby run's validation loss − fp32's, absolute",
           abs(val_delta) if val_delta is not None else None, "<=", 0.01, "nats"),
    target("train_vs_bench", "mha-gpt train's own mean step / mha-gpt-bench's mean step "
           "(alternating runs, 2 threads)", gap("fp32"), "<=", 1.05, "x"),
    target("train_vs_bench_bf16", "the same in bf16", gap("bf16"), "<=", 1.05, "x"),
    target("gen_chars_per_s", "generation with the key/value cache, 1 thread",
           gen["chars_per_s"], ">=", 2000.0, "chars/s"),
]

cpu, flags = "?", []
for l in open("/proc/cpuinfo"):
    if l.startswith("model name") and cpu == "?":
        cpu = l.split(":", 1)[1].strip()
    if l.startswith("flags") and not flags:
        flags = l.split(":", 1)[1].split()
cpu_flags = {f: f in flags for f in ("avx512f", "avx512_bf16", "amx_bf16")}
doc = {"machine": {"cores": os.cpu_count(), "cpu": cpu, "cpu_flags": cpu_flags,
                   "idle_percent_at_start": int(idle),
                   "loadavg_at_start": load.split(), "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
                   "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
                   "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
                   "MHA_DISABLE_BF16": os.environ.get("MHA_DISABLE_BF16"),
                   "torch": next(iter(torch.values()))["torch"] if torch else None,
                   "torch_openblas": next(iter(torch.values()))["openblas"] if torch else None},
       "quick": quick, "passes": len(cs), "precisions": precisions, "bf16_note": bf16_note,
       "model": {k: c0[k] for k in ("layers", "heads", "dim", "context", "batch", "vocab")},
       "targets": targets, "train_step": step, "generation": gen, "full_run": full,
       "full_run_bf16": full_bf16, "val_loss_bf16_minus_fp32": val_delta,
       "torch_full_run": torch_full}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)

def fmt(v, f):
    return f % v if v is not None else "-"
def met(t):
    return {True: "yes", False: "NO", None: "-"}[t["met"]]
units = {"nats": "%.4f", "ms": "%.2f", "x": "%.2f", "s": "%.1f", "chars/s": "%.0f", "MiB": "%.1f",
         "": "%.2f"}
machine_line = ("%s, %d cores; avx512f %s, avx512_bf16 %s, amx_bf16 %s; OPENBLAS_CORETYPE=%s" % (
    cpu, os.cpu_count(), *("yes" if cpu_flags[k] else "no" for k in ("avx512f", "avx512_bf16",
                                                                    "amx_bf16")),
    os.environ.get("OPENBLAS_CORETYPE", "unset")))
print()
print("machine: " + machine_line)
if bf16_note:
    print(bf16_note)
rows = []   # (side, precision, threads, record) for both tables
for pr in precisions:
    for th, r in sorted(mha.get(pr, {}).items()):
        rows.append(("mha", pr, th, dict(r, ms_all_passes=mha_all[pr][th])))
for th, r in sorted(step["torch"].items()):
    rows.append(("torch", "fp32", th, r))
print("%-6s %4s %7s %9s %11s %9s" % ("side", "prec", "threads", "ms/step", "tokens/s", "speed-up"))
for side, pr, th, r in rows:
    sp = torch_best[0] / r["ms"] if torch_best and side == "mha" else None
    print("%-6s %4s %7s %9.2f %11.0f %9s   (passes: %s)" % (
        side, pr, th, r["ms"], r["tokens_per_s"], fmt(sp, "%.2fx"),
        ", ".join("%.2f" % x for x in r["ms_all_passes"])))
print("(speed-up: PyTorch's best of 1 and 2 threads, %s ms, / the row's ms)" % fmt(
    torch_best[0] if torch_best else None, "%.2f"))
print("generation, fp32, 1 thread: %.0f chars/s with the cache, %.0f without" % (
    gen["chars_per_s"], gen["chars_per_s_no_cache"]))
for fr in (full, full_bf16):
    if fr:
        print("baby run, %s: val loss %.4f (best %.4f at step %d), %.1f s wall (training loop "
              "%.1f s), evaluations %s of the wall (%s), peak RSS %.1f MiB" % (
                  fr["precision"], fr["val_loss"], fr["best_val_loss"], fr["best_val_step"],
                  fr["wall_s"], fr["loop_wall_s"], fmt(None if fr["eval_share"] is None else
                                                       100 * fr["eval_share"], "%.0f%%"),
                  fr["eval_s_source"], fr["peak_rss_mib"]))
if val_delta is not None:
    print("bf16 − fp32 validation loss: %+.4f (target: within 0.01)" % val_delta)
if torch_full:
    print("PyTorch full run (2 threads): val loss %.4f, %.1f s wall" % (
        torch_full["val_loss"], torch_full["wall_s"]))
print()
print("%-20s %10s %11s  %s" % ("target", "measured", "target", "met"))
for t in targets:
    print("%-20s %10s %3s %7g  %s" % (t["name"], fmt(t["measured"], units[t["unit"]]),
                                       t["op"], t["target"], met(t)))
if quick:
    print("(--quick: a smoke run; these numbers are not the targets' measurement)")

busy_note = ("warning: the machine was busy at the start (%s%% idle): these numbers are noisy"
             % idle) if int(idle) < 90 else ""
if busy_note:
    print(busy_note)
md = os.path.splitext(out)[0] + ".md"
with open(md, "w") as f:
    if busy_note:
        f.write("**%s**\n\n" % busy_note)
    f.write("Machine: %s.%s\n\n" % (machine_line, " " + bf16_note if bf16_note else ""))
    f.write("| side | precision | threads | ms/step (best pass's median) | tokens/s "
            "| PyTorch best / this |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
    for side, pr, th, r in rows:
        sp = torch_best[0] / r["ms"] if torch_best and side == "mha" else None
        f.write("| %s | %s | %s | %.2f | %s | %s |\n" % (
            "mha" if side == "mha" else "PyTorch", pr, th, r["ms"],
            "{:,.0f}".format(r["tokens_per_s"]), fmt(sp, "%.2f×")))
    if full or full_bf16:
        f.write("\n| baby run | wall s | evaluations' share of the wall | validation loss "
                "| peak RSS MiB |\n| --- | ---: | ---: | ---: | ---: |\n")
        for fr in (full, full_bf16):
            if fr:
                f.write("| mha-gpt train, %s, %s steps | %.1f | %s | %.4f | %.1f |\n" % (
                    fr["precision"], "{:,}".format(fr["steps"]), fr["wall_s"],
                    fmt(None if fr["eval_share"] is None else 100 * fr["eval_share"],
                        "%.0f %%") + ("" if fr["eval_s_source"] == "summary.json"
                                      or fr["eval_share"] is None else " (estimated)"),
                    fr["val_loss"], fr["peak_rss_mib"]))
    f.write("\n| target | measured | target | met? |\n| --- | ---: | ---: | --- |\n")
    for t in targets:
        u = "×" if t["unit"] == "x" else " " + t["unit"]
        f.write("| %s | %s%s | %s %g%s | %s |\n" % (
            t["what"], fmt(t["measured"], units[t["unit"]]), u if t["measured"] is not None else "",
            "≤" if t["op"] == "<=" else "≥", t["target"], u, met(t).lower()))
    if quick:
        f.write("\n(--quick: a smoke run, not the targets' measurement)\n")
print("\nwrote %s and %s" % (out, md))
EOF
