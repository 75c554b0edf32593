#!/usr/bin/env bash
# Runs seeded simulations of a whole cluster (cluster/sim/README.md): builds ingrid-sim if needed,
# then passes every argument to it. Examples:
#   scripts/simulate.sh --seeds 200               seeds 1..200, one line each and a summary
#   scripts/simulate.sh --seed 17 --trace         replays seed 17, printing every event and log line
#   scripts/simulate.sh --seed 17 --check-replay  runs it twice and compares the traces
#   INGRID_BUILD_DIR=DIR                          the build directory (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(INGRID_BUILD_TARGETS=ingrid-sim "$root/scripts/build.sh")
exec "$dir/cluster/sim/ingrid-sim" "$@"
