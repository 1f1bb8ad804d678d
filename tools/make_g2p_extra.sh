#!/usr/bin/env bash
# Extra training pronunciations for the long G2P recipe (development tool): words that
# CMUdict does not list, pronounced by the committed ensemble — sequence-level knowledge
# distillation (Kim & Rush, 2016; for G2P with unlabelled words, Sun et al., 2019):
#
#   bash tools/make_g2p_extra.sh [WORDLIST] [OUT]
#
# Needs python3 (the word filter) and a build of mha-g2p (MHA_G2P, default build/mha-g2p).
# WORDLIST: one word a line (default /usr/share/dict/american-english, Debian's package
# wamerican). OUT: the dictionary written (default runs/g2p-extra.dict), in CMUdict's
# format, one pronunciation a word, with stress. Train on CMUdict with it by appending it:
#   cat data/cmudict.dict runs/g2p-extra.dict > runs/cmudict-extra.dict
#   build/mha-g2p train --data runs/cmudict-extra.dict ...
# (measured with the long recipe in docs/g2p_sweep.md: no gain; so no committed model uses it).
#
# A word is kept when, upper-cased, it matches ^[A-Z][A-Z']*$ (the words of data/README),
# does not end in 'S (possessives: CMUdict's own teach them), is not a word of
# data/cmudict.dict (any split), and falls in the TRAINING split by data/README's rule
# (FNV-1a 64 of its bytes mod 20 >= 3) — so appended to data/cmudict.dict it joins the
# training words and leaves the validation and test words exactly as they were. Its
# pronunciation is the committed ensemble's (models/g2p-cmudict.safetensors with the other
# models of models/g2p-cmudict-ensemble.json, beam 4, the README's most accurate setting),
# trained on the training words only: no validation or test pronunciation reaches the file.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g2p=${MHA_G2P:-$root/build/mha-g2p}
list=${1:-/usr/share/dict/american-english}
out=${2:-$root/runs/g2p-extra.dict}
[ -r "$list" ] || { echo "make_g2p_extra: cannot read $list (apt-get install wamerican)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$root/data/cmudict.dict" "$list" > "$tmp/words" <<'PY'
import re, sys
def fnv1a64(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h
known = set()
with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
    for line in f:
        known.add(re.sub(r"\(\d+\)$", "", line.split(" ", 1)[0]))
word = re.compile(r"^[A-Z][A-Z']*$")
keep = set()
with open(sys.argv[2], encoding="utf-8", errors="replace") as f:
    for line in f:
        w = line.strip().upper()
        if (word.match(w) and not w.endswith("'S") and w not in known
                and fnv1a64(w.encode()) % 20 >= 3):
            keep.add(w)
sys.stdout.write("".join(w + "\n" for w in sorted(keep)))
PY
others=$(python3 -c 'import json,sys; print(":".join(sys.argv[2] + "/" + m for m in json.load(open(sys.argv[1]))["models"][1:]))' \
  "$root/models/g2p-cmudict-ensemble.json" "$root/models")
"$g2p" pronounce --model "$root/models/g2p-cmudict.safetensors" \
  --ensemble "$others" --beam 4 --threads 2 \
  < "$tmp/words" > "$tmp/extra.dict"
[ "$(wc -l < "$tmp/extra.dict")" = "$(wc -l < "$tmp/words")" ] ||
  { echo "make_g2p_extra: pronounce did not answer every word" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
cp "$tmp/extra.dict" "$out.tmp.$$" && mv "$out.tmp.$$" "$out"   # atomic in OUT's directory
echo "make_g2p_extra: $(wc -l < "$out") pronunciations in $out"
