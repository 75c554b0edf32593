#!/usr/bin/env bash
# Configures and builds ingrid into a build directory; prints that directory's path last.
#   INGRID_SANITIZE=address|thread  sanitizer build (build-asan / build-tsan)
#   INGRID_BUILD_DIR=DIR           build directory (default: build, build-asan, build-tsan)
#   INGRID_BUILD_TARGETS="T..."    build only these targets (and what they need), not all
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=${INGRID_SANITIZE:-}
case "$sanitize" in
  "") dir=build ;;
  address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  *) echo "INGRID_SANITIZE must be empty, 'address' or 'thread'" >&2; exit 2 ;;
esac
dir=${INGRID_BUILD_DIR:-$root/$dir}
# A sanitizer build runs the tests only: the benchmarks (which no test runs) are left out.
benchmarks=ON
[ -z "$sanitize" ] || benchmarks=OFF
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINGRID_WARNINGS_AS_ERRORS=ON \
  -DINGRID_SANITIZE="$sanitize" -DINGRID_BUILD_BENCHMARKS="$benchmarks" >&2
targets=()
for t in ${INGRID_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j "$(nproc)" "${targets[@]}" >&2
echo "$dir"
