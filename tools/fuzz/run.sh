#!/usr/bin/env bash
# tools/fuzz/run.sh — coverage-guided fuzzing (libFuzzer, with AddressSanitizer and
# UndefinedBehaviorSanitizer) of the parsers that read users' files:
#   st    mha_st_load (safetensors: every model and checkpoint), then every accessor and
#         conversion on what it accepts                                    (fuzz_st.c)
#   dict  g2p_dict_parse (CMUdict and two-column dictionaries, the lexicons of mha-g2p and
#         libmha_g2p), then the vocabularies and the encoded training set      (fuzz_dict.c)
#   text  text_from_memory (mha-gpt's corpora, bytes and UTF-8), the vocabulary's string form
#         and its parse, prompts encoded and the text decoded back to the byte (fuzz_text.c)
#   model damaged copies of the committed G2P model (metadata and tensors changed, checksums
#         dropped) opened and asked for words by libmha_g2p               (fuzz_model.c)
# Each harness asserts what the headers promise of an accepted input (a round trip, sorted
# symbols, lookups that find every word, finite scores); a refusal is a status, never a crash.
#
#   bash tools/fuzz/run.sh [SECONDS] [TARGET...]   (default: 120 seconds each, all four)
#
# st, dict and text need clang with libFuzzer (Debian: apt-get install clang, whose
# compiler-rt has it); model builds the library with AddressSanitizer and
# UndefinedBehaviorSanitizer (cmake -DMHA_SANITIZE=ON, GCC: the library's kernels need it)
# and runs a mutation loop instead. Builds in ${TMPDIR:-/tmp}/mha-fuzz, seeds each corpus
# from the repository's own files (data/, tests/fixtures/, models/), and keeps the corpora
# there between runs. A crash leaves its input there (crash-*) and the status is 1. Not part
# of the test suite: one core for minutes, and a compiler the build does not need.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-120}
[ $# -gt 0 ] && shift
targets=${*:-st dict text model}
work=${TMPDIR:-/tmp}/mha-fuzz
mkdir -p "$work"
case " $targets " in
  *" st "*|*" dict "*|*" text "*)
    if ! command -v clang >/dev/null; then
      echo "run.sh: clang is not installed (apt-get install clang)" >&2
      exit 2
    fi ;;
esac
cflags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -I"$root/include" -I"$root/src" -I"$root/train/common" -I"$root/train/g2p"
        -I/usr/include/cjson)
common=("$root/tools/fuzz/stub.c" "$root/src/status.c")
status=0
for t in $targets; do
  if [ "$t" = model ]; then   # the sanitizer build of the library, then the loop
    cmake -S "$root" -B "$work/asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMHA_SANITIZE=ON \
          -DBUILD_TESTING=OFF -DMHA_BUILD_EXAMPLES=OFF -DMHA_BUILD_BENCH=OFF \
          -DMHA_BUILD_SHARED=OFF > "$work/asan.log" 2>&1
    cmake --build "$work/asan" -j2 --target mha_g2p >> "$work/asan.log" 2>&1
    gcc -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -fsanitize=address,undefined \
        -fno-sanitize-recover=all -fopenmp -I"$root/include" "$root/tools/fuzz/fuzz_model.c" \
        "$work/asan/libmha_g2p.a" "$work/asan/libmha.a" -o "$work/fuzz_model" \
        $(pkg-config --libs openblas libcjson) -lxsmm -lm -ldl -lpthread
    echo "== model: $secs s"
    if ! "$work/fuzz_model" "$root/models/g2p-cmudict.safetensors" "$secs" "$RANDOM" \
         > "$work/model.log" 2>&1; then
      echo "   FAILED: see $work/model.log" >&2
      status=1
    fi
    tail -1 "$work/model.log" | sed 's/^/   /'
    continue
  fi
  case $t in
    st) src=("$root/src/st_read.c" "$root/src/st_header.c" "$root/src/st_convert.c"
             "$root/src/bf16.c") ;;
    dict) src=("$root/train/g2p/g2p_dict.c" "$root/train/g2p/g2p_data.c"
               "$root/train/common/util.c") ;;
    text) src=("$root/train/common/text.c" "$root/train/common/util.c" "$root/src/pcg32.c") ;;
    *) echo "run.sh: unknown target '$t' (st, dict, text, model)" >&2; exit 2 ;;
  esac
  bin=$work/fuzz_$t corpus=$work/corpus_$t
  clang "${cflags[@]}" "$root/tools/fuzz/fuzz_$t.c" "${common[@]}" "${src[@]}" -o "$bin" -lcjson -lm
  if [ ! -d "$corpus" ]; then   # seeds: the first byte of dict/text inputs selects the mode
    mkdir -p "$corpus"
    case $t in
      st) cp "$root/tests/fixtures/st_half.safetensors" \
             "$root/tests/fixtures/s2s_parity_untied.safetensors" "$corpus/" ;;
      dict) { printf '\001'; head -c 3000 "$root/data/cmudict.dict"; } > "$corpus/cmudict"
            printf '\002hello\th e l o\nworld\tw o r l d\n' > "$corpus/tsv" ;;
      text) { printf '\001'; head -c 2000 "$root/data/tinyshakespeare.txt"; } > "$corpus/utf8"
            { printf '\000'; head -c 2000 "$root/data/tinyshakespeare.txt"; } > "$corpus/bytes" ;;
    esac
  fi
  echo "== $t: $secs s"
  if ! (cd "$work" && "$bin" "$corpus" -max_total_time="$secs" -max_len=131072 \
          -print_final_stats=1 > "$work/$t.log" 2>&1); then
    echo "   FAILED: see $work/$t.log and $work/crash-*" >&2
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$work/$t.log" | sed 's/^/   /'
done
exit $status
