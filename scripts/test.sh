#!/usr/bin/env bash
# The test command: install missing packages, configure and build in build/ (or
# $MHA_BUILD_DIR; from scratch when it does not exist — CI always starts from a fresh
# clone — incrementally otherwise) and run every test with ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MHA_BUILD_DIR:-$root/build}
bash "$root/scripts/deps.sh" --with-mpi
# MHA_WITH_MPI=ON: mha-gpt-mpi and its test (tests/test_gpt_mpi.c) are built, not skipped
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMHA_WERROR=ON -DMHA_WITH_MPI=ON \
  "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
