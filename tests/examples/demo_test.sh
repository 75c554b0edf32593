#!/usr/bin/env bash
# The README's demo in its short form (scripts/demo.sh --short --build-dir BUILD_DIR): three HTTP
# processes embedding nodes under load, one killed with kill -9. Passes when the summary says
# every key was granted exactly its bucket's capacity and every key answers again after the kill;
# checks the timeline too when gnuplot is installed (the demo's full form installs it).
#
# Usage: demo_test.sh PATH/TO/scripts/demo.sh BUILD_DIR
set -euo pipefail

DEMO=${1:?usage: $0 DEMO_SCRIPT BUILD_DIR}
BUILD=${2:?usage: $0 DEMO_SCRIPT BUILD_DIR}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ingrid-demo-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

args=(--short --build-dir "$BUILD")
if command -v gnuplot >/dev/null; then args+=(--png "$TMP/demo.png"); fi
status=0
bash "$DEMO" "${args[@]}" >"$TMP/out.txt" 2>&1 || status=$?
cat "$TMP/out.txt"
[ "$status" -eq 0 ] || { echo "FAIL: the demo exited with status $status"; exit 1; }

summary=$(grep "^summary: " "$TMP/out.txt") || { echo "FAIL: no summary line"; exit 1; }
# "grants C of capacity C on K of K keys (exact)": the same C, the same K.
[[ $summary =~ grants\ ([0-9]+)\ of\ capacity\ ([0-9]+)\ on\ ([0-9]+)\ of\ ([0-9]+)\ keys\ \(exact\) ]] ||
  { echo "FAIL: grants are not exact: $summary"; exit 1; }
[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[3]}" = "${BASH_REMATCH[4]}" ] ||
  { echo "FAIL: grants are not exact: $summary"; exit 1; }
[[ $summary == *"every key answers again"* ]] || { echo "FAIL: a key never came back"; exit 1; }
if [[ " ${args[*]} " == *" --png "* ]]; then
  [ "$(head -c 4 "$TMP/demo.png" | tail -c 3)" = "PNG" ] || { echo "FAIL: no PNG timeline"; exit 1; }
fi
echo "PASS"
