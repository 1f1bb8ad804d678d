#!/usr/bin/env bash
# The numbers of the committed ensemble (development tool):
#
#   bash tools/make_g2p_ensemble.sh BEAM ALPHA [WEIGHT]
#
# decodes with models/g2p-cmudict.safetensors and the models MHA_G2P_ENSEMBLE names (files
# of models/, colon-separated; default: the committed ensemble's, the models after the first in
# models/g2p-cmudict-ensemble.json) as one
# (`mha-g2p eval --ensemble`: their log-probabilities averaged at each step): the validation
# words (greedy and beam BEAM, to choose the decoding without the test words), then the test
# words greedy, with beam 4 and beam 8 (length normalisation ALPHA), at 2 threads; with
# WEIGHT, the same beams again with their lists rescored by the right-to-left model
# models/g2p-cmudict-r2l.safetensors (`--rescore ... --rescore-weight WEIGHT`); writes
# models/g2p-cmudict-ensemble.json. Run it on an otherwise idle machine (words/s are in it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g2p=${MHA_G2P:-$root/build/mha-g2p}
beam=$1 alpha=$2 weight=${3:-}
names=${MHA_G2P_ENSEMBLE:-$(python3 -c 'import json,sys; print(":".join(json.load(open(sys.argv[1]))["models"][1:]))' "$root/models/g2p-cmudict-ensemble.json")}
a=$root/models/g2p-cmudict.safetensors
b=$(echo "$names" | tr ':' '\n' | sed "s|^|$root/models/|" | paste -sd:)
r=$root/models/g2p-cmudict-r2l.safetensors
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$g2p" eval --model "$a" --ensemble "$b" --words validation --beam "$beam" --alpha "$alpha" \
  --threads 2 --out "$out/valid"
for k in 4 8; do
  "$g2p" eval --model "$a" --ensemble "$b" --beam "$k" --alpha "$alpha" --threads 2 \
    --out "$out/test$k"
done
if [ -n "$weight" ]; then
  "$g2p" eval --model "$a" --ensemble "$b" --rescore "$r" --rescore-weight "$weight" \
    --words validation --beam "$beam" --alpha "$alpha" --threads 2 --out "$out/rvalid"
  for k in 4 8; do
    "$g2p" eval --model "$a" --ensemble "$b" --rescore "$r" --rescore-weight "$weight" \
      --beam "$k" --alpha "$alpha" --threads 2 --out "$out/rtest$k"
  done
fi
python3 - "$out" "$root/models/g2p-cmudict-ensemble.json" "$beam" "$alpha" \
  "$(git -C "$root" rev-parse --short HEAD)" "$weight" "$names" <<'PY'
import json, os, sys
out, dst, beam, alpha, commit, weight, names = sys.argv[1:8]
others = names.split(":")
ev = lambda d: json.load(open(os.path.join(out, d, "eval.json")))
def nums(o):
    return {k: o[k] for k in ("words", "wer", "per", "wer_stress", "per_stress", "words_per_second")}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
v, t4, t8 = ev("valid"), ev("test4"), ev("test8")
doc = {
    "format": "mha-g2p-ensemble 1",
    "models": ["g2p-cmudict.safetensors"] + others,
    "how": "mha-g2p eval|pronounce --model models/g2p-cmudict.safetensors --ensemble "
           "%s: the %d models' log-probabilities averaged at each step" % (
               ":".join("models/" + n for n in others), 1 + len(others)),
    "commit": commit,
    "machine": "%s, %d cores, 2 threads" % (cpu, os.cpu_count()),
    "decoding": {"recommended_beam": int(beam), "alpha": float(alpha)},
    "validation": {"greedy": nums(v["greedy"]), "beam%s" % beam: nums(v["beam"])},
    "test": {"greedy": nums(t4["greedy"]), "beam4": nums(t4["beam"]), "beam8": nums(t8["beam"])},
}
if weight:
    rv, r4, r8 = ev("rvalid"), ev("rtest4"), ev("rtest8")
    doc["rescored"] = {
        "how": "the same, with --rescore models/g2p-cmudict-r2l.safetensors --rescore-weight "
               "%s: each word's beam list ranked by (logprob + %s x the right-to-left model's "
               "logprob) / (length + 1)^alpha" % (weight, weight),
        "model": "g2p-cmudict-r2l.safetensors",
        "weight": float(weight),
        "validation": {"beam%s" % beam: nums(rv["beam"])},
        "test": {"beam4": nums(r4["beam"]), "beam8": nums(r8["beam"])},
    }
json.dump(doc, open(dst + ".tmp", "w"), indent=2)
open(dst + ".tmp", "a").write("\n")
os.replace(dst + ".tmp", dst)
print(json.dumps({k: doc[k] for k in ("test", "rescored") if k in doc}, indent=1))
PY
