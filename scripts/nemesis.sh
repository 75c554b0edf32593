#!/usr/bin/env bash
# The seeded nemesis by hand (tests/cluster/fault/nemesis_test.cpp): a random schedule of kill -9,
# leader kills, graceful restarts, SIGSTOP pauses and nft cuts (one-way, two-way, isolation, a
# 2/3 split) against five members on five hosts (network namespaces), under the grant audit.
#
#   scripts/nemesis.sh [--minutes M | --seconds S] [--seed N] [--build-dir DIR]
#
# --minutes / --seconds: the schedule's length (default 10 minutes; CTest runs 60 s). --seed N
# replays a seed that a run printed (default: a random one, printed first). --build-dir: a build
# with tests (default build/), whose tests/fault_tests runs the test case "[nemesis]". Needs root.
# Prints the seed, one line per fault and a summary; exit status 0 when every invariant held
# (fault_tests' own status otherwise), 2 on bad usage.
set -u -o pipefail

seconds=600 seed="" build="$(cd "$(dirname "$0")/.." && pwd)/build"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) [[ "${2:-}" =~ ^[0-9]+$ ]] && seconds=$(($2 * 60)) ||
      { echo "nemesis: --minutes takes a whole number" >&2; exit 2; }; shift 2 ;;
    --seconds) [[ "${2:-}" =~ ^[0-9]+$ ]] && seconds=$2 ||
      { echo "nemesis: --seconds takes a whole number" >&2; exit 2; }; shift 2 ;;
    --seed) [[ "${2:-}" =~ ^[0-9]+$ ]] && seed=$2 ||
      { echo "nemesis: --seed takes a whole number" >&2; exit 2; }; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "nemesis: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $seconds -ge 1 ]] || { echo "nemesis: the schedule must last at least 1 s" >&2; exit 2; }
tests="$build/tests/fault_tests"
[[ -x "$tests" ]] || { echo "nemesis: $tests not found (--build-dir DIR, built with tests)" >&2; exit 2; }

export INGRID_NEMESIS_SECONDS=$seconds
[[ -n "$seed" ]] && export INGRID_NEMESIS_SEED=$seed
exec "$tests" "[nemesis]"
