# bench/common.sh — shell functions the benchmark drivers share (bench/run.sh,
# bench/run_gpt.sh, bench/run_g2p.sh source it; it runs nothing by itself).
#
#   idle_percent      print the percent of CPU time idle over the next 3 s
#   wait_idle SEC     wait up to SEC seconds (0 = not at all) for >= 90 % idle
#   choose_precisions EXE DIR   set PRECISION (bf16 beside fp32 where EXE, a benchmark
#                     program, says the CPU runs it; a list already in PRECISION is
#                     checked, exit 2 when it cannot run); DIR/bf16_note gets the reason
#                     bf16 was skipped (empty otherwise)
#   machine_header    print the machine, its load and the OpenBLAS environment, warn
#                     on stderr when the 1-minute load average is above 0.5; sets
#                     MACHINE_IDLE (percent) and MACHINE_LOAD (the three averages)

# Percent of CPU time idle over the next 3 s, from /proc/stat (idle + iowait).
idle_percent() {
  local a b
  a=($(head -1 /proc/stat)); sleep 3; b=($(head -1 /proc/stat))
  local tot=0 i
  for i in 1 2 3 4 5 6 7 8; do tot=$(( tot + b[i] - a[i] )); done
  echo $(( tot > 0 ? 100 * (b[4] - a[4] + b[5] - a[5]) / tot : 100 ))
}

# Other jobs on a 2-core machine ruin the 2-thread numbers: wait for a quiet one.
wait_idle() {
  local end
  if [ "$1" -gt 0 ]; then
    end=$(( $(date +%s) + $1 ))
    while [ "$(idle_percent)" -lt 90 ] && [ "$(date +%s)" -lt "$end" ]; do :; done
  fi
}

machine_header() {
  MACHINE_LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
  MACHINE_IDLE="$(idle_percent)"
  echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load average $MACHINE_LOAD, $MACHINE_IDLE% idle"
  echo "   OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
  # busy: under 90% idle over 3 s (the load average still counts the build just done)
  if [ "$MACHINE_IDLE" -lt 90 ]; then
    echo "   warning: the machine is busy ($MACHINE_IDLE% idle); numbers will be noisy" >&2
  fi
}

# PRECISION: bf16 beside fp32 where the CPU runs it ($1 --check-precision), or the list the
# caller set, checked; $2/bf16_note: why bf16 was skipped, or empty.
choose_precisions() {
  local exe=$1 dir=$2
  : >"$dir/bf16_note"
  if [ -z "$PRECISION" ]; then
    if "$exe" --check-precision bf16 >"$dir/bf16_check" 2>&1; then
      PRECISION=fp32,bf16
    else
      PRECISION=fp32
      echo "bf16 skipped: $(sed 's/^bf16: not available: //' "$dir/bf16_check")" \
        | tee "$dir/bf16_note"
    fi
  else
    "$exe" --check-precision "$PRECISION" >"$dir/bf16_check" 2>&1 \
      || { cat "$dir/bf16_check" >&2; exit 2; }
  fi
}
