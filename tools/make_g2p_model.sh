#!/usr/bin/env bash
# Make the committed pronunciation model from a finished long run (development tool):
#
#   bash tools/make_g2p_model.sh RUN_DIR K BEAM ALPHA COMMAND...
#
# RUN_DIR holds the run of `mha-g2p train ... --keep-checkpoints K' (or more); the mean of its
# last K kept checkpoints (mha-g2p average) becomes models/g2p-cmudict.safetensors, and
# models/g2p-cmudict.json gets the command that trained it (COMMAND...), this commit, the
# run's numbers and the test-set WER/PER of the model: greedy, beam 4 and beam 8 with length
# normalisation ALPHA (choose K, BEAM and ALPHA on the validation words first:
# `mha-g2p eval --words validation`). BEAM is the width the README recommends.
# MHA_TRAIN_COMMIT names the commit whose mha-g2p trained the run (default: this one);
# MHA_G2P_MODEL_NAME the file name in models/ (default g2p-cmudict: a second model of an
# ensemble is g2p-cmudict-2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
g2p=${MHA_G2P:-$root/build/mha-g2p}
run=$1 k=$2 beam=$3 alpha=$4
name=${MHA_G2P_MODEL_NAME:-g2p-cmudict}
shift 4
command="$*"
mapfile -t kept < <(ls "$run"/checkpoint-*.safetensors | sort -V | tail -n "$k")
[ "${#kept[@]}" -eq "$k" ] || { echo "make_g2p_model: fewer than $k kept checkpoints in $run" >&2; exit 2; }
"$g2p" average "${kept[@]}" --out "$run/averaged.safetensors" --force
"$g2p" eval --model "$run/averaged.safetensors" --words validation --out "$run/eval-valid"
for b in 4 8; do
  "$g2p" eval --model "$run/averaged.safetensors" --beam "$b" --alpha "$alpha" --threads 2 \
    --out "$run/eval-test-beam$b"
done
cp "$run/averaged.safetensors" "$root/models/$name.safetensors.tmp"
mv "$root/models/$name.safetensors.tmp" "$root/models/$name.safetensors"
python3 - "$run" "$root/models/$name.json" "$command" "${MHA_TRAIN_COMMIT:-$(git -C "$root" rev-parse --short HEAD)}" \
  "$beam" "$alpha" "${kept[@]}" <<'EOF'
import json, os, platform, sys
run, out, command, commit, beam, alpha = sys.argv[1:7]
kept = sys.argv[7:]
s = json.load(open(os.path.join(run, "summary.json")))
ev = lambda d: json.load(open(os.path.join(run, d, "eval.json")))
def nums(o):
    return {k: o[k] for k in ("words", "wer", "per", "wer_stress", "per_stress", "words_per_second")}
b4, b8 = ev("eval-test-beam4"), ev("eval-test-beam8")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
doc = {
    "format": "mha-g2p-model 1",
    "model": "%s (weights only, float32, with checksums; the mean of the "
             "last %d checkpoints of the run: mha-g2p average)" % (os.path.basename(out)[:-5] +
                                                                  ".safetensors", len(kept)),
    "command": command,
    "averaged": [os.path.basename(p) for p in kept],
    "commit": commit,
    "machine": "%s, %d cores" % (cpu, os.cpu_count()),
    "parameters": s["parameters"],
    "steps": s["steps_done"],
    "epochs": round(s["epochs"], 2),
    "train_wall_seconds": round(s["wall_seconds"], 1),
    "validation_last_checkpoint": s["last_validation"],
    "validation_averaged": nums(ev("eval-valid")["greedy"]),
    "decoding": {"recommended_beam": int(beam), "alpha": float(alpha)},
    "test": {"greedy": nums(b4["greedy"]), "beam4": nums(b4["beam"]), "beam8": nums(b8["beam"])},
    "config": s["config"],
}
json.dump(doc, open(out + ".tmp", "w"), indent=2)
open(out + ".tmp", "a").write("\n")
os.replace(out + ".tmp", out)
print(json.dumps(doc["test"], indent=1))
EOF
