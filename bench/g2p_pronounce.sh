#!/usr/bin/env bash
# bench/g2p_pronounce.sh — what a user of `mha-g2p pronounce` waits for and pays in memory:
# the whole process (loading included) pronouncing the 12,362 test words of CMUdict, by
# the model alone (greedy and beam 4) and with the dictionary looked up first, and the
# first word of a fresh process. Median of RUNS runs (default 3) of each; peak RSS from
# GNU time. Prints a Markdown table; records the load at the start.
#
#   bench/g2p_pronounce.sh [BUILD_DIR] [THREADS]      (default: build, 2)
#
# Run it on an otherwise idle machine: it times whole processes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
threads=${2:-2}
runs=${RUNS:-3}
g2p=$build/mha-g2p
[ -x "$g2p" ] || { echo "no $g2p: build first (cmake --build build)"; exit 2; }
[ -x /usr/bin/time ] || { echo "needs GNU time (Debian: apt-get install time)"; exit 2; }
words=$(mktemp)
trap 'rm -f "$words" "$words".out "$words".time' EXIT
# the test words: FNV-1a 64 of the word mod 20 in {0, 1} (data/README.md), each word once
python3 - "$root/data/cmudict.dict" >"$words" <<'PY'
import re, sys
seen = set()
for line in open(sys.argv[1], encoding="latin-1"):
    m = re.match(r"^([A-Z][A-Z']*)(\(\d+\))?  \S", line)
    if not m or m.group(1) in seen:
        continue
    w = m.group(1); seen.add(w)
    h = 0xcbf29ce484222325
    for b in w.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    if h % 20 < 2:
        print(w)
PY
n=$(wc -l <"$words")
echo "# mha-g2p pronounce, $n words, $threads threads — $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
echo
echo "| run | median s | words/s | peak RSS MiB |"
echo "| --- | --- | --- | --- |"
one() { # label, then the pronounce options; words on stdin unless FIRST=1
  local label=$1; shift
  local secs=() rss=()
  for ((r = 0; r < runs; r++)); do
    if [ "${FIRST:-0}" = 1 ]; then
      /usr/bin/time -f '%e %M' -o "$words.time" "$g2p" pronounce --threads "$threads" "$@" \
        hello >"$words.out"
    else
      /usr/bin/time -f '%e %M' -o "$words.time" "$g2p" pronounce --threads "$threads" "$@" \
        <"$words" >"$words.out"
    fi
    read -r s m <"$words.time"
    secs+=("$s"); rss+=("$m")
  done
  local ms mm
  ms=$(printf '%s\n' "${secs[@]}" | sort -g | sed -n "$(((runs + 1) / 2))p")
  mm=$(printf '%s\n' "${rss[@]}" | sort -g | sed -n "$(((runs + 1) / 2))p")
  if [ "${FIRST:-0}" = 1 ]; then
    printf '| %s | %.3f | — | %.0f |\n' "$label" "$ms" "$(echo "$mm / 1024" | bc -l)"
  else
    printf '| %s | %.2f | %.0f | %.0f |\n' "$label" "$ms" "$(echo "$n / $ms" | bc -l)" \
      "$(echo "$mm / 1024" | bc -l)"
  fi
}
one "model, greedy (--no-lexicon)" --no-lexicon
one "model, beam 4 (--no-lexicon --beam 4)" --no-lexicon --beam 4
one "dictionary first (default)"
FIRST=1 one "first word, fresh process (HELLO, dictionary)"
FIRST=1 one "first word, fresh process (--no-lexicon)" --no-lexicon
