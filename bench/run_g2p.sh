#!/usr/bin/env bash
# bench/run_g2p.sh — the G2P encoder–decoder (mha-g2p) in one run: builds mha-g2p-bench
# and mha-g2p, times our training step beside PyTorch's (bench/torch_g2p.py, the same
# model, step and batch shapes), decoding speed, and — when a trained model exists — the
# real decoding rate, WER and PER of `mha-g2p eval` and the peak memory of `mha-g2p
# train` and `mha-g2p pronounce`; writes bench-g2p.json (+ bench-g2p.md) and prints the
# table.
#
#   bench/run_g2p.sh [--out FILE] [--build-dir DIR] [--model FILE] [--data FILE]
#                    [--passes N] [--quick] [--steps N] [--warmup N] [--decode-words N]
#                    [--train-steps N] [--no-torch] [--no-model] [--wait-idle SEC]
#                    [--precision LIST]
#
#   --out FILE       results (default: bench-g2p.json in the repository's root; the
#                    Markdown table goes beside it, FILE with .md)
#   --build-dir DIR  CMake build directory (default: ${TMPDIR:-/tmp}/mha-g2p-bench-build,
#                    Release, as run_gpt.sh: a developer's build/ is left alone)
#   --model FILE     the trained model for eval / pronounce (default: $G2P_MODEL, else
#                    models/g2p-cmudict.safetensors); skipped when it does not exist
#   --data FILE      the dictionary `mha-g2p train` reads for the memory run, and whose
#                    test words (FNV-1a split 0-1) `pronounce` reads (default: $G2P_DATA,
#                    else data/cmudict.dict)
#   --passes N       time the training step N times, alternating C and PyTorch, and keep,
#                    per side and thread count, the pass with the lowest median (default 2);
#                    decoding is timed in the first pass only
#   --quick          a smoke run: 5 timed steps after 2, one pass, 256 decoded words, eval
#                    and pronounce on the first 500 test words, a 5-step training run
#   --steps N, --warmup N, --decode-words N, --train-steps N
#                    override the timed / untimed steps of the step benchmark (30 / 5),
#                    the words decoded (2000) and the steps of the memory run (20)
#   --no-torch       skip PyTorch even if /usr/bin/python3 imports torch
#   --no-model       skip eval / pronounce even if the model exists
#   --wait-idle SEC  first wait up to SEC seconds for the CPUs to be >= 90 % idle over
#                    3 s; default 0 = do not wait
#   --precision LIST the precisions of our training step (mha-g2p-bench --precision):
#                    default fp32,bf16 where the CPU runs bf16 (mha-g2p-bench
#                    --check-precision bf16), else fp32 with a printed note; a list given
#                    here is used as it is (bf16 without AVX512_BF16: exit status 2).
#                    Decoding, eval, pronounce and the memory run stay float32
#
# Measured (one after the other, never two at once; ~10 min on 2 cores):
#  1. mha-g2p-bench --threads 1,2 and torch_g2p.py --threads 1, then 2, same config:
#     mha-g2p's default model: Le 3 Ld 3 H 4 C 192 F 640, Vs 28 Vt 72, contexts 36,
#     dropout 0.1, label smoothing 0.1, B 128 synthetic pairs of padded widths S = T = 10
#     (lengths uniform in [5, 10]; CMUdict's mean is 7.5 letters, 6.4 phones + 1),
#     AdamW (lr 1.5e-3, wd 0.01 on matmul weights, β 0.9/0.99), clip 1.0; median ms of a step
#     (zero_grad + forward + backward + clip + AdamW) over 30 timed steps after 5; words/s
#     = B / ms; the ratio PyTorch best / ours best (each the best of its thread counts),
#     per precision of ours (fp32, and bf16 where the CPU runs it; PyTorch is float32).
#  2. mha-g2p-bench's decoding of 2,000 random words with an UNTRAINED model (greedy and
#     beam 4, batches of 256): worst case, every hypothesis runs to max length.
#  3. with a trained model: `mha-g2p eval --model M --threads 2 --beam 4` on the model's
#     test words (eval runs the greedy pass, then the beam pass; eval.json gives each
#     one's words/s, WER and PER), under /usr/bin/time -v (peak RSS).
#  4. peak RSS (/usr/bin/time -v) of `mha-g2p train` (the model below, 20 steps, no
#     evaluation but one word at the end, 2 threads) and, with a model, of `mha-g2p
#     pronounce --threads 2` reading every test word of --data on stdin.
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are left as the environment sets them. The machine
# has 2 cores: run nothing else meanwhile (the script warns when mha programs are running).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$REPO/bench-g2p.json"
BUILD="${TMPDIR:-/tmp}/mha-g2p-bench-build"
MODEL="${G2P_MODEL:-$REPO/models/g2p-cmudict.safetensors}"
DATA="${G2P_DATA:-$REPO/data/cmudict.dict}"
PASSES=""        # empty: the default (2, 1 with --quick)
QUICK=0
TORCH=1
USE_MODEL=1
WAIT_IDLE=0
PRECISION=""     # empty: fp32,bf16 where the CPU runs bf16, else fp32
O_STEPS=""; O_WARMUP=""; O_WORDS=""; O_TRAIN=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --build-dir) BUILD="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --passes) PASSES="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --steps) O_STEPS="$2"; shift 2 ;;
    --warmup) O_WARMUP="$2"; shift 2 ;;
    --decode-words) O_WORDS="$2"; shift 2 ;;
    --train-steps) O_TRAIN="$2"; shift 2 ;;
    --no-torch) TORCH=0; shift ;;
    --no-model) USE_MODEL=0; shift ;;
    --wait-idle) WAIT_IDLE="$2"; shift 2 ;;
    --precision) PRECISION="$2"; shift 2 ;;
    -h|--help) sed -n '2,57p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_g2p.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$PASSES" ] || PASSES=$(( QUICK ? 1 : 2 ))
for v in "$PASSES" "$WAIT_IDLE" ${O_STEPS:+"$O_STEPS"} ${O_WARMUP:+"$O_WARMUP"} \
         ${O_WORDS:+"$O_WORDS"} ${O_TRAIN:+"$O_TRAIN"}; do
  case "$v" in ''|*[!0-9]*) echo "run_g2p.sh: expected a number, got '$v'" >&2; exit 2 ;; esac
done
[ "$PASSES" -ge 1 ] || { echo "run_g2p.sh: --passes must be >= 1" >&2; exit 2; }
# absolute paths: the mha-g2p commands run in the repository (for its relative defaults)
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
OUT="$(abspath "$OUT")"; BUILD="$(abspath "$BUILD")"
MODEL="$(abspath "$MODEL")"; DATA="$(abspath "$DATA")"
[ -f "$DATA" ] || { echo "run_g2p.sh: $DATA is missing (--data)" >&2; exit 1; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mha-g2p-bench.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "run_g2p.sh: $PY is missing (the merge needs it)" >&2; exit 1; }

# /usr/bin/time (Debian package "time") for the peak-memory runs, installed as
# scripts/deps.sh installs the build's packages when it is missing
if [ ! -x /usr/bin/time ]; then
  echo "run_g2p.sh: installing the 'time' package for /usr/bin/time" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends time >/dev/null
fi

# ---- build ----------------------------------------------------------------------
echo "== build ($BUILD)"
cmake -S "$REPO" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DMHA_BUILD_EXAMPLES=OFF -DMHA_BUILD_BENCH=ON -DMHA_WITH_MPI=OFF >"$TMP/cmake.log" 2>&1 \
  || { cat "$TMP/cmake.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target mha-g2p-bench mha-g2p >"$TMP/build.log" 2>&1 \
  || { cat "$TMP/build.log"; exit 1; }
G2P="$BUILD/mha-g2p"

# ---- machine (after the build: the compile must not be part of the idle wait) ------
. "$REPO/bench/common.sh"   # idle_percent, wait_idle, machine_header
wait_idle "$WAIT_IDLE"
machine_header
# other mha programs running now (a training run in the background ruins every number)
OTHERS="$(ps -eo pid=,comm= | awk -v me=$$ '$1 != me && $2 ~ /^mha-/ {print $1 ":" $2}' | tr '\n' ' ')"
if [ -n "$OTHERS" ]; then
  echo "   warning: other mha programs are running ($OTHERS); numbers will be noisy" >&2
fi

# the committed models' size on CMUdict (28 source, 72 target symbols): 3 + 3 blocks, the
# model these rows have always measured (mha-g2p train's default is now 2 + 2 blocks)
CFG=(--src-vocab 28 --tgt-vocab 72 --src-context 36 --tgt-context 36 --enc-layers 3
     --dec-layers 3 --heads 4 --dim 192 --mlp-dim 640 --dropout 0.1 --label-smoothing 0.1
     --batch 128 --src-len 10 --tgt-len 10 --lr 1.5e-3 --weight-decay 0.01)
STEPS=30; WARMUP=5; DECODE_WORDS=2000; TRAIN_STEPS=20; EVAL_LIMIT=0
if [ "$QUICK" = 1 ]; then
  STEPS=5; WARMUP=2; DECODE_WORDS=256; TRAIN_STEPS=5; EVAL_LIMIT=500
fi
STEPS="${O_STEPS:-$STEPS}"; WARMUP="${O_WARMUP:-$WARMUP}"
DECODE_WORDS="${O_WORDS:-$DECODE_WORDS}"; TRAIN_STEPS="${O_TRAIN:-$TRAIN_STEPS}"
{ [ "$STEPS" -ge 1 ] && [ "$TRAIN_STEPS" -ge 1 ]; } \
  || { echo "run_g2p.sh: --steps and --train-steps must be >= 1" >&2; exit 2; }
# precisions of our step: bf16 beside fp32 where the CPU runs it
choose_precisions "$BUILD/mha-g2p-bench" "$TMP"
echo "== precisions of the training step: $PRECISION"
HAVE_TORCH=0
if [ "$TORCH" = 1 ] && "$PY" -c 'import torch' >/dev/null 2>&1; then
  HAVE_TORCH=1
fi

# ---- training step (and, in pass 1, decoding): C and PyTorch, alternating ---------
for pass in $(seq 1 "$PASSES"); do
  words=0; [ "$pass" = 1 ] && words="$DECODE_WORDS"
  echo "== mha-g2p-bench (pass $pass of $PASSES)"
  "$BUILD/mha-g2p-bench" "${CFG[@]}" --steps "$STEPS" --warmup "$WARMUP" --threads 1,2 \
                         --precision "$PRECISION" --decode-words "$words" \
                         --json "$TMP/c$pass.json"
  if [ "$HAVE_TORCH" = 1 ]; then
    echo "== PyTorch, bench/torch_g2p.py (pass $pass of $PASSES)"
    for th in 1 2; do
      "$PY" "$REPO/bench/torch_g2p.py" "${CFG[@]}" --steps "$STEPS" --warmup-steps "$WARMUP" \
            --threads "$th" --json "$TMP/torch${pass}_$th.json"
    done
  fi
done
[ "$HAVE_TORCH" = 1 ] || echo "== PyTorch: skipped (no /usr/bin/python3 with torch, or --no-torch)"

# ---- the test words of --data (FNV-1a 64 of the word mod 20 in {0, 1}, as mha-g2p) ----
# test_words.txt: one word a line (pronounce); test.dict: their CMUdict lines (--quick's
# eval: the first EVAL_LIMIT words)
"$PY" - "$DATA" "$TMP" "$EVAL_LIMIT" <<'EOF'
import os, re, sys
data, tmp, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
def fnv(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
words, lines = [], {}
with open(data, encoding="latin-1") as f:
    for line in f:
        line = line.rstrip("\r\n ")
        if not line or line.startswith(";;;") or "  " not in line:
            continue
        w = re.sub(r"\(\d+\)$", "", line.split("  ", 1)[0])
        if not re.fullmatch(r"[A-Z][A-Z']*", w) or fnv(w) % 20 > 1:
            continue
        if w not in lines:
            words.append(w)
            lines[w] = []
        lines[w].append(line)
with open(os.path.join(tmp, "test_words.txt"), "w") as f:
    f.writelines(w + "\n" for w in words)
with open(os.path.join(tmp, "test.dict"), "w") as f:
    for w in words[:limit] if limit else words:
        f.writelines(l + "\n" for l in lines[w])
print("   %d test words in %s" % (len(words), data))
EOF

# ---- peak memory of a short training run --------------------------------------------
TRAIN_ARGS=(--data "$DATA" --enc-layers 3 --dec-layers 3 --steps "$TRAIN_STEPS"
            --eval-every 1000000 --eval-words 1 --threads 2 --precision fp32
            --out "$TMP/train")
echo "== mha-g2p train ${TRAIN_ARGS[*]} (peak memory)"
(cd "$REPO" && /usr/bin/time -v -o "$TMP/train.time" "$G2P" train "${TRAIN_ARGS[@]}" \
   >"$TMP/train.log" 2>&1) || { tail -20 "$TMP/train.log"; exit 1; }
grep -m1 '^finished' "$TMP/train.log" || true

# ---- a trained model: eval (words/s, WER, PER) and pronounce (peak memory) -----------
HAVE_MODEL=0
if [ "$USE_MODEL" = 1 ] && [ -f "$MODEL" ]; then
  HAVE_MODEL=1
  EVAL_ARGS=(--model "$MODEL" --threads 2 --beam 4 --out "$TMP/eval")
  [ "$EVAL_LIMIT" = 0 ] || EVAL_ARGS+=(--dict "$TMP/test.dict")
  echo "== mha-g2p eval ${EVAL_ARGS[*]}"
  (cd "$REPO" && /usr/bin/time -v -o "$TMP/eval.time" "$G2P" eval "${EVAL_ARGS[@]}" \
     >"$TMP/eval.log" 2>&1) || { tail -20 "$TMP/eval.log"; exit 1; }
  grep -E '^  (greedy|beam):' "$TMP/eval.log" || true
  PRON_WORDS="$TMP/test_words.txt"
  if [ "$EVAL_LIMIT" != 0 ]; then
    head -n "$EVAL_LIMIT" "$TMP/test_words.txt" >"$TMP/test_words_quick.txt"
    PRON_WORDS="$TMP/test_words_quick.txt"
  fi
  echo "== mha-g2p pronounce --model $MODEL --threads 2 < $(wc -l <"$PRON_WORDS") test words"
  # exit status 2: some words were not spellable or too long (reported, the rest printed)
  rc=0
  (cd "$REPO" && /usr/bin/time -v -o "$TMP/pron.time" "$G2P" pronounce --model "$MODEL" \
     --threads 2 <"$PRON_WORDS" >"$TMP/pron.out" 2>"$TMP/pron.err") || rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 2 ]; then cat "$TMP/pron.err"; exit 1; fi
  echo "$rc" >"$TMP/pron.rc"
  echo "   $(wc -l <"$TMP/pron.out") pronunciations (exit status $rc)"
else
  echo "== trained model: skipped ($([ "$USE_MODEL" = 1 ] && echo "$MODEL does not exist" || echo "--no-model"))"
fi

# ---- merge, table ---------------------------------------------------------------------
"$PY" - "$TMP" "$OUT" "$QUICK" "$MACHINE_IDLE" "$MACHINE_LOAD" "$HAVE_MODEL" "$MODEL" \
      "$OTHERS" "${TRAIN_ARGS[@]}" <<'EOF'
import json, os, re, sys
tmp, out, quick, idle, load, have_model, model, others = sys.argv[1:9]
train_args = sys.argv[9:]
quick, have_model = quick == "1", have_model == "1"

def load_json(name):
    p = os.path.join(tmp, name)
    return json.load(open(p)) if os.path.exists(p) else None

def passes(fmt):
    res, k = [], 1
    while os.path.exists(os.path.join(tmp, fmt % k)):
        res.append(load_json(fmt % k))
        k += 1
    return res

def gnu_time(name):
    """wall seconds and peak RSS (MiB) from /usr/bin/time -v's report."""
    p = os.path.join(tmp, name)
    if not os.path.exists(p):
        return None
    txt = open(p).read()
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", txt)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", txt)
    secs = 0.0
    for part in wall.group(1).split(":") if wall else []:
        secs = 60 * secs + float(part)
    return {"wall_s": secs if wall else None,
            "peak_rss_mib": int(rss.group(1)) / 1024.0 if rss else None}

cs = passes("c%d.json")
c0 = cs[0]
B = c0["config"]["batch"]

# training step: per side, precision and thread count, the pass with the lowest median
precisions = c0.get("precisions", ["fp32"])
bf16_note = open(os.path.join(tmp, "bf16_note")).read().strip() or None
mha_p, mha_all = {}, {}   # precision -> threads -> record / every pass's ms
for p in cs:
    for r in p["train"]:
        pr, th = r.get("precision", "fp32"), str(r["threads"])
        mha_all.setdefault(pr, {}).setdefault(th, []).append(r["ms"])
        d = mha_p.setdefault(pr, {})
        if th not in d or r["ms"] < d[th]["ms"]:
            d[th] = r
torch, torch_all, torch_meta = {}, {}, None
for th in ("1", "2"):
    for p in passes("torch%%d_%s.json" % th):
        r = p["by_threads"][0]
        torch_meta = p
        torch_all.setdefault(th, []).append(r["ms_per_step"])
        if th not in torch or r["ms_per_step"] < torch[th]["ms_per_step"]:
            torch[th] = r
def mha_rows(pr):
    return {th: dict(r, ms_all_passes=mha_all[pr][th])
            for th, r in sorted(mha_p.get(pr, {}).items())}
# "mha" stays the float32 rows (as before bf16); "mha_bf16" the bf16 ones
step = {"mha": mha_rows("fp32"), "mha_bf16": mha_rows("bf16") or None,
        "torch": {th: {"ms": r["ms_per_step"], "ms_mean": r["ms_per_step_mean"],
                       "min_ms": r["ms_per_step_min"], "steps": r["steps"],
                       "words_per_s": B / (1e-3 * r["ms_per_step"]),
                       "last_loss": r["last_train_loss"], "ms_all_passes": torch_all[th]}
                  for th, r in sorted(torch.items())}}
t_best = min((r["ms_per_step"], th) for th, r in torch.items()) if torch else None
step["torch_best_ms"] = t_best[0] if t_best else None
step["torch_best_threads"] = int(t_best[1]) if t_best else None
for pr in ("fp32", "bf16"):   # the fp32 keys as before bf16; bf16's with a _bf16 suffix
    sfx = "" if pr == "fp32" else "_bf16"
    b = min((r["ms"], th) for th, r in mha_p[pr].items()) if mha_p.get(pr) else None
    step["mha_best_ms" + sfx] = b[0] if b else None
    step["mha_best_threads" + sfx] = int(b[1]) if b else None
    step["ratio_torch_best_to_mha_best" + sfx] = t_best[0] / b[0] if t_best and b else None

notes = []
params_torch = torch_meta["params"] if torch_meta else None
if params_torch is not None and params_torch != c0["params"]:
    notes.append("parameter counts differ: ours %d, PyTorch's %d (not the same model?)"
                 % (c0["params"], params_torch))

decode = c0.get("decode")
if decode and not decode.get("runs"):
    decode = None

trained = None
if have_model:
    ev = load_json(os.path.join("eval", "eval.json"))
    pr = gnu_time("pron.time")
    n_pron = sum(1 for _ in open(os.path.join(tmp, "pron.out")))
    trained = {"model": model, "eval_set": ev.get("words"), "eval_dictionary": ev.get("dictionary"),
               "greedy": {k: ev["greedy"].get(k) for k in
                          ("words", "words_per_second", "wer", "per", "wer_stress",
                           "per_stress", "seconds")},
               "beam": {k: ev["beam"].get(k) for k in
                        ("width", "alpha", "words", "words_per_second", "wer", "per",
                         "wer_stress", "per_stress", "seconds")} if "beam" in ev else None,
               "eval_process": gnu_time("eval.time"),
               "pronounce": dict(pr, pronunciations=n_pron,
                                 words=sum(1 for _ in open(os.path.join(tmp, "test_words_quick.txt"
                                           if quick else "test_words.txt"))),
                                 exit_status=int(open(os.path.join(tmp, "pron.rc")).read()),
                                 threads=2)}

summ = load_json(os.path.join("train", "summary.json"))
train_mem = dict(gnu_time("train.time"), args=train_args,
                 steps=summ.get("steps_done") if summ else None,
                 parameters=summ.get("parameters") if summ else None,
                 config=summ.get("config") if summ else None)

cpu, flags = "?", []
for l in open("/proc/cpuinfo"):
    if l.startswith("model name") and cpu == "?":
        cpu = l.split(":", 1)[1].strip()
    if l.startswith("flags") and not flags:
        flags = l.split(":", 1)[1].split()
simd = [f for f in flags if re.match(r"(sse|ssse|avx|fma|f16c|amx|vnni)", f)]
doc = {"machine": {"cores": os.cpu_count(), "cpu": cpu, "cpu_flags_simd": simd,
                   "cpu_has": {f: f in flags for f in ("avx512f", "avx512_bf16", "amx_bf16")},
                   "cpu_flags": " ".join(flags), "idle_percent_at_start": int(idle),
                   "loadavg_at_start": load.split(),
                   "loadavg_at_end": open("/proc/loadavg").read().split()[:3],
                   "other_mha_programs_at_start": others.split() or None,
                   "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
                   "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
                   "torch": torch_meta["torch"] if torch_meta else None,
                   "torch_openblas": torch_meta["openblas"] if torch_meta else None,
                   "torch_openblas_core": torch_meta["openblas_core"] if torch_meta else None},
       "quick": quick, "passes": len(cs), "precisions": precisions, "bf16_note": bf16_note,
       "config": c0["config"], "params": c0["params"], "params_torch": params_torch,
       "steps": c0["steps"], "train_step": step,
       "decode_untrained": decode, "trained_model": trained, "train_memory": train_mem,
       "notes": notes}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")

def f2(v, fmt="%.2f"):
    return fmt % v if v is not None else "-"
md = []
busy = []
if int(idle) < 90:
    busy.append("the machine was busy at the start (%s%% idle)" % idle)
if others.strip():
    busy.append("other mha programs were running at the start (%s)" % others.strip())
if busy:
    md += ["**warning: %s: these numbers are noisy**" % "; ".join(busy), ""]
cfg = c0["config"]
md += ["Training step (zero_grad + forward + backward + clip + AdamW), Le %d Ld %d H %d C %d "
       "F %d, B %d, S = T = %d/%d padded (lengths in [S/2, S]), %d timed steps, median of "
       "the best of %d pass%s; %.2f M parameters:" % (
           cfg["enc_layers"], cfg["dec_layers"], cfg["heads"], cfg["dim"], cfg["mlp_dim"],
           cfg["batch"], cfg["src_len"], cfg["tgt_len"], c0["steps"], len(cs),
           "" if len(cs) == 1 else "es", c0["params"] / 1e6), "",
       "| side | precision | threads | ms/step | min | forward | backward | optimizer | words/s |",
       "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
for pr in precisions:
    for th, r in sorted(mha_p.get(pr, {}).items()):
        md.append("| mha | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f |" % (
            pr, th, r["ms"], r["min_ms"], r["fwd_ms"], r["bwd_ms"], r["opt_ms"],
            r["words_per_s"]))
for th, r in step["torch"].items():
    md.append("| PyTorch | fp32 | %s | %.2f | %.2f | - | - | - | %.0f |" % (
        th, r["ms"], r["min_ms"], r["words_per_s"]))
md.append("")
if bf16_note:
    md += [bf16_note, ""]
if t_best:
    for pr in precisions:
        sfx = "" if pr == "fp32" else "_bf16"
        if step.get("ratio_torch_best_to_mha_best" + sfx) is None:
            continue
        md.append("PyTorch best (%d thread%s) / ours best in %s (%d thread%s): **%.2f×**" % (
            step["torch_best_threads"], "" if step["torch_best_threads"] == 1 else "s", pr,
            step["mha_best_threads" + sfx], "" if step["mha_best_threads" + sfx] == 1 else "s",
            step["ratio_torch_best_to_mha_best" + sfx]))
        md.append("")
    md.pop()
else:
    md.append("PyTorch: not run")
if decode:
    md += ["", "Decoding (float32), untrained model — **worst case: every hypothesis runs to max length** "
           "(%d random words, batches of %d, max_len %d):" % (decode["words"], decode["batch"],
                                                              decode["max_len"]), "",
           "| decoder | threads | words/s | mean output length | ended with EOS |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for r in decode["runs"]:
        md.append("| %s | %d | %.0f | %.1f | %.0f%% |" % (
            "greedy" if r["beam"] == 1 else "beam %d" % r["beam"], r["threads"],
            r["words_per_s"], r["mean_out_len"], 100 * r["eos_fraction"]))
md += ["", "| run | wall s | peak RSS MiB | words/s | WER | PER |",
       "| --- | ---: | ---: | ---: | ---: | ---: |",
       "| mha-g2p train, %s steps, 2 threads | %s | %s | - | - | - |" % (
           train_mem["steps"], f2(train_mem["wall_s"], "%.1f"),
           f2(train_mem["peak_rss_mib"], "%.1f"))]
if trained:
    for name in ("greedy", "beam"):
        e = trained[name]
        if e:
            md.append("| mha-g2p eval, %s, 2 threads, %d words | - | - | %.0f | %.2f%% | %.2f%% |"
                      % ("greedy" if name == "greedy" else "beam %d" % e["width"], e["words"],
                         e["words_per_second"], 100 * e["wer"], 100 * e["per"]))
    ep, p = trained["eval_process"], trained["pronounce"]
    md.append("| mha-g2p eval process (both passes) | %s | %s | - | - | - |" % (
        f2(ep["wall_s"], "%.1f"), f2(ep["peak_rss_mib"], "%.1f")))
    md.append("| mha-g2p pronounce, 2 threads, %d test words (words/s: whole process) "
              "| %s | %s | %s | - | - |" % (
        p["words"], f2(p["wall_s"], "%.1f"), f2(p["peak_rss_mib"], "%.1f"),
        f2(p["words"] / p["wall_s"] if p["wall_s"] else None, "%.0f")))
else:
    md.append("| mha-g2p eval / pronounce | no trained model (%s) | | | | |" % model)
for n in notes:
    md += ["", "note: " + n]
if quick:
    md += ["", "(--quick: a smoke run, not a measurement)"]
text = "\n".join(md) + "\n"
print()
print(text, end="")
with open(os.path.splitext(out)[0] + ".md", "w") as f:
    f.write(text)
print("\nwrote %s and %s" % (out, os.path.splitext(out)[0] + ".md"))
EOF
