#!/usr/bin/env bash
# Installs dependencies, builds ingrid with warnings as errors, and runs every test with CTest.
#   INGRID_SANITIZE=address|thread  run the tests of an ASan+UBSan or TSan build instead
#   INGRID_TEST_LABELS=REGEX        only the tests whose CTest label matches (ctest -L REGEX);
#                                   tests without a label (the scripted ops tests) are left out
#   INGRID_TEST_EXCLUDE=REGEX       leave out the tests whose name matches (ctest -E REGEX)
#   INGRID_BUILD_TARGETS="T..."     build only these targets (and what they need), not all; give
#                                   INGRID_TEST_LABELS with it, naming only the suites these
#                                   targets hold (a suite whose executable was not built fails)
#   INGRID_TEST_JOBS=N              tests run at once (default: twice the cores in the plain build,
#                                   whose suites mostly wait on real timeouts: 2 cores stayed 71%
#                                   busy at 4 at once; the cores in a sanitizer build, which is
#                                   CPU-bound)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
dir=$("$root/scripts/build.sh")
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
select=()
[ -z "${INGRID_TEST_LABELS:-}" ] || select=(-L "$INGRID_TEST_LABELS")
[ -z "${INGRID_TEST_EXCLUDE:-}" ] || select+=(-E "$INGRID_TEST_EXCLUDE")
jobs=$(nproc)
[ -n "${INGRID_SANITIZE:-}" ] || jobs=$((2 * jobs))
jobs=${INGRID_TEST_JOBS:-$jobs}
ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 300 "${select[@]}"
