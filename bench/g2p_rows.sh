#!/usr/bin/env bash
# bench/g2p_rows.sh — how the two sizes that set libmha_g2p's decoding memory trade memory
# for speed: MHA_G2P_DECODE_ROWS (hypotheses decoded at once: the key/value caches' rows)
# and MHA_G2P_ENCODE_BATCH (words through the encoder at once: its activations). Builds
# mha-g2p once per pair (in BUILD_ROOT/rows-R-E, Release, the compile flags
# -DMHA_G2P_DECODE_ROWS=R -DMHA_G2P_ENCODE_BATCH=E) and runs bench/g2p_pronounce.sh on each
# (the whole process on the 12,362 test words; median of RUNS runs). Builds first, then
# measures, so nothing compiles while it times.
#
#   bench/g2p_rows.sh [BUILD_ROOT] [THREADS] [R:E ...]
#       (default: /tmp/mha-g2p-rows, 2, 128:16 64:8 32:16 32:8)
#
# Run it on an otherwise idle machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
broot=${1:-/tmp/mha-g2p-rows}
threads=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
pairs=("$@")
[ ${#pairs[@]} -gt 0 ] || pairs=(128:16 64:8 32:16 32:8)
for p in "${pairs[@]}"; do
  r=${p%%:*} e=${p##*:}
  d=$broot/rows-$r-$e
  cmake -S "$root" -B "$d" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="-DMHA_G2P_DECODE_ROWS=$r -DMHA_G2P_ENCODE_BATCH=$e" >/dev/null
  cmake --build "$d" -j"$(nproc)" --target mha-g2p >/dev/null
done
for p in "${pairs[@]}"; do
  r=${p%%:*} e=${p##*:}
  echo "## decode rows $r, encoder batch $e"
  echo
  bash "$root/bench/g2p_pronounce.sh" "$broot/rows-$r-$e" "$threads"
  echo
done
