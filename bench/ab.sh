#!/usr/bin/env bash
# bench/ab.sh — one change against the build before it: the training step of two builds,
# run in alternating pairs (A, B, A, B, ...) so that both sides meet the same states of a
# shared machine, and the median of each side's per-run medians.
#
#   bash bench/ab.sh BUILD_A BUILD_B [--model gpt|g2p] [--precision fp32|bf16]
#                    [--threads N] [--pairs N] [--steps N]
#
#   BUILD_A, BUILD_B  CMake build directories holding mha-gpt-bench and mha-g2p-bench
#                     (e.g. a `git worktree` of the commit before, built Release)
#   --model M         gpt: the baby GPT (mha-gpt-bench on data/tinyshakespeare.txt,
#                     default); g2p: the G2P encoder-decoder of bench/run_g2p.sh (3 + 3
#                     blocks, MLP 640, batch 128, dropout 0.1)
#   --precision P     fp32 (default) or bf16 (needs AVX512_BF16)
#   --threads N       default 2
#   --pairs N         default 10
#   --steps N         timed steps per run (default 150 for gpt, 30 for g2p)
#
# Prints one line per run (the run's median step in ms, its fastest step, and for gpt the
# median evaluation forward), then per side the median over the runs of each column and
# B/A. The machine has 2 cores: run nothing else meanwhile.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$REPO/bench/common.sh"
usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
for d in "$1" "$2"; do
  [ -d "$d" ] || { echo "ab.sh: $d is not a directory" >&2; exit 2; }
done
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
shift 2
MODEL=gpt PRECISION=fp32 THREADS=2 PAIRS=10 STEPS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --precision) PRECISION="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --pairs) PAIRS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    *) echo "ab.sh: unknown option '$1'" >&2; usage ;;
  esac
done
case "$MODEL" in gpt|g2p) ;; *) echo "ab.sh: --model gpt or g2p" >&2; exit 2 ;; esac
case "$PRECISION" in fp32|bf16) ;; *) echo "ab.sh: --precision fp32 or bf16" >&2; exit 2 ;; esac
for d in "$A" "$B"; do
  [ -x "$d/mha-gpt-bench" ] && [ -x "$d/mha-g2p-bench" ] ||
    { echo "ab.sh: $d has no mha-gpt-bench and mha-g2p-bench" >&2; exit 2; }
done

# one run: "median min [eval]" in ms
one() {
  local out
  if [ "$MODEL" = gpt ]; then
    out=$(cd "$REPO" && "$1/mha-gpt-bench" --threads "$THREADS" --precision "$PRECISION" \
            --steps "${STEPS:-150}" --gen-chars 1)
    echo "$out" | sed -n "s/^$PRECISION, threads $THREADS: step \([0-9.]*\) ms (min \([0-9.]*\),.*evaluation forward \([0-9.]*\) ms\$/\1 \2 \3/p"
  else
    out=$("$1/mha-g2p-bench" --threads "$THREADS" --precision "$PRECISION" \
            --steps "${STEPS:-30}" --mlp-dim 640 --decode-words 1)
    echo "$out" | sed -n "s/^$PRECISION, threads $THREADS: step \([0-9.]*\) ms (min \([0-9.]*\);.*/\1 \2/p"
  fi
}

machine_header
echo "== A $A"
echo "== B $B"
echo "== $MODEL $PRECISION, $THREADS threads, $PAIRS pairs"
res=$(mktemp)
trap 'rm -f "$res"' EXIT
for i in $(seq "$PAIRS"); do
  for side in A B; do
    if [ $side = A ]; then dir=$A; else dir=$B; fi
    r=$(one "$dir")
    [ -n "$r" ] || { echo "ab.sh: no step time from $dir" >&2; exit 1; }
    echo "$side $r" | tee -a "$res"
  done
done
# medians per side and column, then B/A
awk '
  function median(s,   a, n, t, i, j) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { for (c = 2; c <= NF; c++) col[$1, c] = col[$1, c] " " $c; nf = NF }
  END {
    split("step min eval", name, " ")
    for (c = 2; c <= nf; c++) {
      a = median(col["A", c]); b = median(col["B", c])
      printf "%-5s median over the runs: A %.2f ms, B %.2f ms, B/A %.3f\n", name[c - 1], a, b, b / a
    }
  }' "$res"
