#!/usr/bin/env bash
# Mutation check of the table of gradient cases (development tool):
#
#   bash tools/mutants.sh
#
# Copies the tree (the files git tracks, as they are in the working tree) to a temporary
# directory, builds test_grad_table there, checks that it passes, then applies each
# deliberate bug below alone, rebuilds and runs the test again: every bug must make it fail
# (a test that passes a bug would not be checking what it claims). Each line printed says
# which bug, which of the runner's checks it is meant for, and FAILS (as it must) or PASSES.
# Exit status 0 when every bug is caught. Takes a few minutes on two cores; run it alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree=$work/tree build=$work/build
mkdir -p "$tree"
(cd "$root" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$tree"
cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target test_grad_table >/dev/null
if ! "$build/test_grad_table" >"$work/log" 2>&1; then
  echo "mutants: test_grad_table fails on the tree itself"; tail -n 20 "$work/log"; exit 1
fi

# mutant NAME FILE FROM TO: replace the one occurrence of FROM in FILE by TO, rebuild, run.
caught=0 total=0
mutant() {
  local name=$1 file=$tree/$2 from=$3 to=$4
  total=$((total + 1))
  cp "$file" "$file.orig"
  python3 - "$file" "$from" "$to" <<'EOF'
import sys
path, old, new = sys.argv[1:4]
s = open(path).read()
if s.count(old) != 1:
    sys.exit("mutants: %r occurs %d times in %s" % (old, s.count(old), path))
open(path, "w").write(s.replace(old, new))
EOF
  cmake --build "$build" -j"$(nproc)" --target test_grad_table >/dev/null 2>&1
  if "$build/test_grad_table" >"$work/log" 2>&1; then
    echo "PASSES (not caught): $name"
  else
    caught=$((caught + 1))
    echo "FAILS, as it must: $name — $(grep -oE '^\[  FAILED  \] grad_[a-z0-9_]+' "$work/log" | sort -u | wc -l) rows," \
      "first $(grep -m1 -oE '^\[  FAILED  \] grad_[a-z0-9_]+' "$work/log" | cut -c14-)"
  fi
  mv "$file.orig" "$file"
  touch "$file" # newer than the mutant's objects: the next build compiles it again
}

mutant "the decoder's cross-attention gives mem no gradient (finite differences)" \
  src/s2s_block.inc "blk->n2, mem, dca, g3, dmem)" "blk->n2, mem, dca, g3, NULL)"
mutant "the block's LN2 backward reads LN1's saved statistics (finite differences)" \
  src/gpt_block.inc "P + blk->off[OWN_LN2_W], blk->mean2,
                                    blk->rstd2, g3" "P + blk->off[OWN_LN2_W], blk->mean1,
                                    blk->rstd1, g3"
mutant "the decoder block overwrites dx instead of adding to it (accumulation)" \
  src/s2s_block.inc "PRIV(add)(n, dx, g1, dx);" "memcpy(dx, g1, n * sizeof(REAL));"
mutant "attention dropout masks depend on the thread count (threads)" \
  src/mha_core.c "mha_pcg32_seed(&m->drop0, cfg->seed, MHA_PCG32_STREAM_DROPOUT);" \
  "mha_pcg32_seed(&m->drop0, cfg->seed + (uint64_t)m->threads, MHA_PCG32_STREAM_DROPOUT);"
mutant "float32's LayerNorm output is 0.1% off (float32 against float64)" \
  src/layers_core.c "        rstd[r] = (REAL)rs;
    }" "        rstd[r] = (REAL)rs;
#ifndef MHA_DOUBLE
        for (c = 0; c < C; c++)
            yr[c] *= 1.001f;
#endif
    }"
echo "mutants: $caught of $total caught"
[ "$caught" -eq "$total" ]
