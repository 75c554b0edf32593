#!/usr/bin/env bash
# The Debian package as a user gets it: `cpack -G DEB` in this build folder, then the package's
# contents extracted (dpkg-deb -x) into a scratch root: its ingrid-node answers --version, its
# unit is there, and the consumer (tests/install/consumer) builds against the extracted
# /usr with find_package(ingrid), and again with `pkg-config --cflags --libs ingrid`, and runs;
# so does its test with the test kit (ingrid::testing, and pkg-config's ingrid-testing): three
# nodes, a crash and a partition, every key granted exactly its capacity.
#
# Usage: run_deb_test.sh BUILD_DIR CONSUMER_SOURCE WORK_DIR
set -euo pipefail
BUILD=${1:?usage: $0 BUILD_DIR CONSUMER_SOURCE WORK_DIR}
CONSUMER=${2:?}
WORK=${3:?}
rm -rf "$WORK"
mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || fail "dpkg-deb is not installed"

(cd "$BUILD" && cpack -G DEB -B "$WORK/package" >"$WORK/cpack.log" 2>&1) ||
  fail "cpack failed: $(tail -n 20 "$WORK/cpack.log")"
DEB=$(ls "$WORK"/package/*.deb 2>/dev/null | head -n 1)
[[ -n "$DEB" ]] || fail "cpack made no .deb: $(tail -n 20 "$WORK/cpack.log")"
dpkg-deb --info "$DEB" >"$WORK/info.txt" || fail "dpkg-deb cannot read $DEB"
grep -q "Package: ingrid" "$WORK/info.txt" || fail "not the ingrid package: $(cat "$WORK/info.txt")"
grep -q "Depends:.*libraft-dev" "$WORK/info.txt" || fail "no dependencies listed"

ROOT="$WORK/root"
dpkg-deb -x "$DEB" "$ROOT" || fail "dpkg-deb -x failed"
for f in usr/bin/ingrid-node usr/bin/ingrid-cli usr/lib/systemd/system/ingrid-node.service \
         usr/include/ingrid/node.h usr/include/ingrid/testing/cluster.h \
         usr/include/ingrid/testing/grant_audit.h; do
  [[ -e "$ROOT/$f" ]] || fail "the package lacks /$f"
done
ls "$ROOT"/usr/lib*/*/cmake/ingrid/ingridConfig.cmake "$ROOT"/usr/lib/cmake/ingrid/ingridConfig.cmake \
  >/dev/null 2>&1 || true
"$ROOT/usr/bin/ingrid-node" --version | grep -q "^ingrid-node " || fail "ingrid-node --version"
"$ROOT/usr/bin/ingrid-cli" --version | grep -q "^ingrid-cli " || fail "ingrid-cli --version"

cmake -S "$CONSUMER" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$ROOT/usr" >"$WORK/consumer.log" 2>&1 ||
  fail "the consumer does not configure against the package: $(tail -n 20 "$WORK/consumer.log")"
cmake --build "$WORK/consumer" -j 2 >>"$WORK/consumer.log" 2>&1 ||
  fail "the consumer does not build against the package: $(tail -n 20 "$WORK/consumer.log")"
"$WORK/consumer/consumer" | grep -q "consumer: granted" || fail "the consumer did not run"
"$WORK/consumer/consumer_testing" >"$WORK/consumer-testing.log" 2>&1 ||
  fail "the test kit's consumer failed: $(tail -n 20 "$WORK/consumer-testing.log")"
grep -q "consumer-testing: exact" "$WORK/consumer-testing.log" ||
  fail "the test kit's consumer did not report exact grants: $(cat "$WORK/consumer-testing.log")"

# The same consumer built with pkg-config alone (no CMake): the package's ingrid.pc.
PC=$(find "$ROOT/usr/lib" -path "*/pkgconfig/ingrid.pc" | head -n 1)
[[ -n "$PC" ]] || fail "the package lacks ingrid.pc"
command -v pkg-config >/dev/null || fail "pkg-config is not installed"
FLAGS=$(PKG_CONFIG_PATH="$(dirname "$PC")" pkg-config --cflags --libs ingrid) ||
  fail "pkg-config cannot read $PC"
# shellcheck disable=SC2086  # the flags are words
g++ -std=c++20 -o "$WORK/consumer-pc" "$CONSUMER/main.cpp" $FLAGS >"$WORK/consumer-pc.log" 2>&1 ||
  fail "the consumer does not build with pkg-config: $(tail -n 20 "$WORK/consumer-pc.log")"
"$WORK/consumer-pc" | grep -q "consumer: granted" || fail "the pkg-config consumer did not run"
FLAGS=$(PKG_CONFIG_PATH="$(dirname "$PC")" pkg-config --cflags --libs ingrid-testing) ||
  fail "pkg-config cannot read ingrid-testing.pc beside $PC"
# shellcheck disable=SC2086  # the flags are words
g++ -std=c++20 -Wall -Wextra -Wpedantic -Werror -o "$WORK/consumer-testing-pc" \
  "$CONSUMER/testing_main.cpp" $FLAGS >"$WORK/consumer-testing-pc.log" 2>&1 ||
  fail "the test kit's consumer does not build with pkg-config: $(tail -n 20 "$WORK/consumer-testing-pc.log")"
"$WORK/consumer-testing-pc" | grep -q "consumer-testing: exact" ||
  fail "the pkg-config test kit consumer did not report exact grants"
echo "[package] $(basename "$DEB"): $(dpkg-deb -c "$DEB" | wc -l) entries; consumer built with" \
  "find_package and with pkg-config, and ran; $(grep "consumer-testing: ok" "$WORK/consumer-testing.log")"
