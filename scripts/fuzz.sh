#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang 14 into build-fuzz and runs each for a bounded
# time over a copy of its seed corpus; fails if any harness reports a crash, a leak, a sanitizer
# report, a timeout or running out of memory. Needs clang-14, libclang-rt-14-dev and
# libfuzzer-14-dev (scripts/install-deps.sh --fuzz). Downloads nothing, and writes nothing into
# the source tree except with --write-corpus.
#   scripts/fuzz.sh [SECONDS [HARNESS...]]  each harness SECONDS (default $INGRID_FUZZ_SECONDS or
#                                           20), all harnesses unless some are named
#   scripts/fuzz.sh --write-corpus          regenerate fuzz/corpus/ from fuzz_write_corpus
#   INGRID_BUILD_DIR=DIR                    build directory (default: build-fuzz)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${INGRID_BUILD_DIR:-$root/build-fuzz}
harnesses=(fuzz_frame_header fuzz_messages fuzz_raft fuzz_processors fuzz_resp
           fuzz_gubernator_json fuzz_rls)

write_corpus=0
seconds=${INGRID_FUZZ_SECONDS:-20}
if [ "${1:-}" = "--write-corpus" ]; then
  write_corpus=1
elif [ $# -gt 0 ]; then
  seconds=$1
  shift
  [ $# -eq 0 ] || harnesses=("$@")
fi
case "$seconds" in
  '' | *[!0-9]* | 0)
    echo "fuzz.sh: SECONDS must be a positive whole number, not '$seconds'" >&2
    exit 2
    ;;
esac
if ! command -v clang++-14 >/dev/null; then
  echo "fuzz.sh: clang++-14 not found (run scripts/install-deps.sh --fuzz)" >&2
  exit 1
fi

# Only what the harnesses link is built (ingrid_fuzzers); tests, examples and benchmarks are off.
# Build type "Fuzz": optimized, with line tables for the stacks, and with assertions (no NDEBUG).
cmake -S "$root" -B "$dir" -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Fuzz \
  -DCMAKE_CXX_FLAGS_FUZZ="-O1 -gline-tables-only" \
  -DINGRID_BUILD_FUZZERS=ON -DINGRID_WARNINGS_AS_ERRORS=ON -DINGRID_BUILD_TESTS=OFF \
  -DINGRID_BUILD_EXAMPLES=OFF -DINGRID_BUILD_BENCHMARKS=OFF -DINGRID_INSTALL=OFF >/dev/null
cmake --build "$dir" --target ingrid_fuzzers -j "$(nproc)"

# Leaks are findings. UBSan's settings are built into the harnesses (fuzz/sanitizer_options.cpp).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

if [ "$write_corpus" = 1 ]; then
  for h in "${harnesses[@]}"; do rm -rf "${root:?}/fuzz/corpus/$h"; done
  "$dir/fuzz/fuzz_write_corpus" "$root/fuzz/corpus"
  exit 0
fi

# Each harness mutates a fresh copy of its seeds (new inputs stay in the build directory), with
# a bound on time per input, on memory, and on any single allocation (a decoder that allocates
# by an unchecked length is caught by the last). libFuzzer stops itself after SECONDS; the outer
# timeout only guards against a harness that hangs outside an input.
work="$dir/fuzz-run"
failed=()
# Runs one harness; its verdict is its exit status, its report goes to $work/$h/log.
run_one() {
  local h=$1
  timeout --kill-after=10 $((seconds + 120)) "$dir/fuzz/$h" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=64 -print_final_stats=1 \
    -artifact_prefix="$work/$h/artifacts/" "$work/$h/corpus" >"$work/$h/log" 2>&1
}
for h in "${harnesses[@]}"; do
  [ -d "$root/fuzz/corpus/$h" ] || { echo "fuzz.sh: no corpus fuzz/corpus/$h" >&2; exit 2; }
  rm -rf "${work:?}/$h"
  mkdir -p "$work/$h/corpus" "$work/$h/artifacts"
  cp "$root/fuzz/corpus/$h"/* "$work/$h/corpus/"
done
# As many harnesses at once as there are cores (each one process on one core), each for its
# full SECONDS; the results are printed in the harnesses' order.
jobs=$(nproc)
for ((i = 0; i < ${#harnesses[@]}; i += jobs)); do
  batch=("${harnesses[@]:i:jobs}")
  pids=()
  for h in "${batch[@]}"; do
    run_one "$h" &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    h=${batch[$k]}
    echo "== $h: ${seconds} s =="
    if wait "${pids[$k]}"; then
      grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done)' "$work/$h/log" || true
    else
      tail -n 60 "$work/$h/log"
      echo "fuzz.sh: $h FAILED; input in $work/$h/artifacts/, log $work/$h/log" >&2
      failed+=("$h")
    fi
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: ${#harnesses[@]} harnesses, ${seconds} s each, ${jobs} at a time, no findings"
