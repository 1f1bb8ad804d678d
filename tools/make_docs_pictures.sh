#!/usr/bin/env bash
# Regenerate the pictures of docs/ that README.md shows, by running again the commands that
# made them (as README.md gives them) into a temporary directory and copying the pictures
# into docs/. Each run is one NAME:
#
#   NAME       command (README.md)                        pictures (docs/)                    time*
#   reverse    build/mha-train                            reverse_loss.svg,                  ~3 s
#              (the toy task's defaults, 1 thread)        reverse_attention_layer0.svg
#   gpt        build/mha-gpt train                        gpt_loss.svg,                      ~2 min
#              (the baby GPT's defaults, 2 threads)       gpt_attention_layer0.svg
#   gpt-large  build/mha-gpt train --layers 6 --heads 6   gpt_large_loss.svg                 ~13 min
#              --dim 192 --context 128 --batch 16 --steps 2400 --lr 2e-3 --min-lr 2e-4
#              --warmup 100 --eval-every 600
#   g2p        build/mha-g2p train                        g2p_curves.svg,                    ~30 min
#              (defaults, data/cmudict.dict, 2 threads)   g2p_alignment_layer1.svg (ABDICATED)
#
#   * on the 2-core machine of README.md's measurements, otherwise idle.
#
# Usage: tools/make_docs_pictures.sh [--only NAME[,NAME...] | --all] [--try] [--dest DIR] [--keep]
#   (none)      the quick one: reverse
#   --only L    the runs named in the comma-separated list L
#   --all       all four (about 50 minutes)
#   --try       check the commands quickly: each run shortened (20 steps, small evaluations,
#               a short warm-up), the pictures left in the temporary directory (kept) rather
#               than docs/; about 1.5 minutes for --all
#   --dest DIR  copy the pictures into DIR instead of docs/
#   --keep      keep the run directories (their logs, summaries, checkpoints)
# The programs are built first (Release) in $MHA_BUILD_DIR, default build/. Only the
# reverse run at 1 thread repeats bit for bit; the others use 2 threads, so their curves
# differ slightly from run to run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MHA_BUILD_DIR:-$root/build}

usage() { sed -n '/^# Usage:/,/^# differ/p' "$0" | sed 's/^# \{0,1\}//'; }

names=reverse dest="" try=0 keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --only) [ $# -ge 2 ] || { usage >&2; exit 2; }; names=${2//,/ }; shift 2 ;;
    --only=*) names=${1#--only=}; names=${names//,/ }; shift ;;
    --all) names="reverse gpt gpt-large g2p"; shift ;;
    --try) try=1; shift ;;
    --dest) [ $# -ge 2 ] || { usage >&2; exit 2; }; dest=$2; shift 2 ;;
    --dest=*) dest=${1#--dest=}; shift ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "make_docs_pictures: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
for n in $names; do
  case $n in
    reverse|gpt|gpt-large|g2p) ;;
    *) echo "make_docs_pictures: unknown run '$n' (reverse, gpt, gpt-large, g2p)" >&2; exit 2 ;;
  esac
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mha-docs-pictures.XXXXXX")
if [ "$try" = 1 ]; then
  keep=1
  [ -n "$dest" ] || dest=$tmp/pictures
fi
[ -n "$dest" ] || dest=$root/docs
[ "$keep" = 1 ] || trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dest"

targets=()
for n in $names; do
  case $n in
    reverse) targets+=(mha-train) ;;
    gpt|gpt-large) targets+=(mha-gpt) ;;
    g2p) targets+=(mha-g2p) ;;
  esac
done
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" >/dev/null
cd "$root" # the programs find data/ from here

# run NAME ARGS...: the command of NAME into $tmp/NAME (shortened with --try: a later
# option overrides an earlier one).
run() {
  local name=$1 prog=$2
  shift 2
  local quick=()
  if [ "$try" = 1 ]; then
    case $name in
      reverse) quick=(--steps 20) ;;
      gpt|gpt-large) quick=(--steps 20 --warmup 2 --eval-every 10 --eval-batches 2
                            --sample-chars 20) ;;
      g2p) quick=(--steps 20 --warmup 2 --eval-every 10 --eval-words 50) ;;
    esac
  fi
  echo "== $name: $prog $* ${quick[*]} --out $tmp/$name"
  local t0=$SECONDS
  "$build/$prog" "$@" "${quick[@]}" --out "$tmp/$name"
  echo "== $name: $((SECONDS - t0)) s"
}

# put FROM TO: copy run picture FROM ($tmp/...) to $dest/TO.
put() {
  cp "$tmp/$1" "$dest/$2"
  echo "wrote $dest/$2"
}

for n in $names; do
  case $n in
    reverse)
      run reverse mha-train
      put reverse/loss.svg reverse_loss.svg
      put reverse/attention_layer0.svg reverse_attention_layer0.svg ;;
    gpt)
      run gpt mha-gpt train
      put gpt/loss.svg gpt_loss.svg
      put gpt/attention_layer0.svg gpt_attention_layer0.svg ;;
    gpt-large)
      run gpt-large mha-gpt train --layers 6 --heads 6 --dim 192 --context 128 --batch 16 \
        --steps 2400 --lr 2e-3 --min-lr 2e-4 --warmup 100 --eval-every 600
      put gpt-large/loss.svg gpt_large_loss.svg ;;
    g2p)
      run g2p mha-g2p train
      put g2p/curves.svg g2p_curves.svg
      # the second validation word of 7 to 10 letters, ABDICATED (see write_alignments)
      put g2p/alignment_1_layer1.svg g2p_alignment_layer1.svg ;;
  esac
done
[ "$keep" = 0 ] || echo "runs kept in $tmp"
