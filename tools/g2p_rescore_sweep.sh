#!/usr/bin/env bash
# Choose the rescoring weight on the validation words (development tool):
#
#   bash tools/g2p_rescore_sweep.sh R2L_MODEL BEAM "W1 W2 ..." [THREADS]
#
# scores the committed ensemble (models/g2p-cmudict.safetensors with
# models/g2p-cmudict-2.safetensors) with beam BEAM on the 6,152 validation words, its list
# rescored by R2L_MODEL with each weight W (`mha-g2p eval --rescore R2L_MODEL
# --rescore-weight W --words validation`; W = 0 is the beam alone), and prints a Markdown
# table of WER and PER with and without stress. The test words are never decoded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g2p=${MHA_G2P:-$root/build/mha-g2p}
r2l=$1 beam=$2 weights=$3 threads=${4:-2}
a=$root/models/g2p-cmudict.safetensors b=$root/models/g2p-cmudict-2.safetensors
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| weight | WER | PER | WER with stress | PER with stress |"
echo "| --- | --- | --- | --- | --- |"
for w in $weights; do
  "$g2p" eval --model "$a" --ensemble "$b" --rescore "$r2l" --rescore-weight "$w" \
    --words validation --beam "$beam" --threads "$threads" --out "$out/$w" >/dev/null
  python3 - "$out/$w/eval.json" "$w" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))["beam"]
print("| %s | %.2f%% | %.2f%% | %.2f%% | %.2f%% |" % (sys.argv[2], 100 * b["wer"], 100 * b["per"],
      100 * b["wer_stress"], 100 * b["per_stress"]))
PY
done
