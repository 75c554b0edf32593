#!/usr/bin/env bash
# `ingrid-cli top` in a real terminal (tmux): two members with --metrics under `ingrid-cli load`;
# the pane shows both members answering, with requests per second above zero, and the header.
#
# Usage: top_tmux_test.sh PATH/TO/ingrid-node PATH/TO/ingrid-cli
set -u -o pipefail

NODE=${1:?usage: $0 INGRID_NODE INGRID_CLI}
CLI=${2:?usage: $0 INGRID_NODE INGRID_CLI}
command -v tmux >/dev/null || { echo "FAIL: tmux is not installed" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ingrid-top.XXXXXX") || { echo "FAIL: mktemp" >&2; exit 1; }
SESSION="ingrid-top-$$"
PIDS=()
cleanup() {
  tmux kill-session -t "$SESSION" 2>/dev/null
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*" >&2
  [[ -f "$TMP/pane.txt" ]] && { echo "---- pane ----" >&2; cat "$TMP/pane.txt" >&2; }
  exit 1
}

# wait_line FILE TEXT: the last word of the first line holding TEXT, within 20 s.
wait_line() {
  local i line
  for ((i = 0; i < 200; i++)); do
    line=$(grep -m1 -F "$2" "$1" 2>/dev/null) && { echo "${line##* }"; return 0; }
    sleep 0.1
  done
  return 1
}

"$NODE" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 >"$TMP/n1.log" 2>&1 &
PIDS+=($!)
SEED=$(wait_line "$TMP/n1.log" "listening on") || fail "member 1 did not start"
M1=$(wait_line "$TMP/n1.log" "metrics on") || fail "member 1 has no metrics"
"$NODE" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 --seed "$SEED" >"$TMP/n2.log" 2>&1 &
PIDS+=($!)
wait_line "$TMP/n2.log" "listening on" >/dev/null || fail "member 2 did not start"
M2=$(wait_line "$TMP/n2.log" "metrics on") || fail "member 2 has no metrics"
"$CLI" wait cluster-safe --seed "$SEED" --timeout-ms 30000 >/dev/null || fail "not safe"

tmux new-session -d -s "$SESSION" -x 132 -y 12 \
  "$CLI top --metrics $M1 --metrics $M2 --iterations 60" || fail "tmux could not start"
# The load runs until the view has shown it (killed by the cleanup), at most 60 s: on a loaded
# machine the view may take a while to show both members busy.
"$CLI" load --seed "$SEED" --seconds 60 --keys 1000 --concurrency 8 >"$TMP/load.log" 2>&1 &
LOAD=$!
PIDS+=($LOAD)

# Bounded: until both members show requests per second above zero, or 40 s.
seen=0
for ((i = 0; i < 200; i++)); do
  tmux capture-pane -p -t "$SESSION" >"$TMP/pane.txt" 2>/dev/null
  busy=$(awk -v a="$M1" -v b="$M2" '($1 == a || $1 == b) && $2 + 0 > 0 { n++ } END { print n + 0 }' \
    "$TMP/pane.txt")
  if [[ "$busy" -eq 2 ]] && grep -q "2 of 2 members answering" "$TMP/pane.txt"; then
    seen=1
    break
  fi
  sleep 0.2
done
kill -0 "$LOAD" 2>/dev/null || fail "the load ended before the view showed it: $(tail -n 5 "$TMP/load.log")"
[[ $seen -eq 1 ]] || fail "the view never showed both members serving"
grep -q "ops/s" "$TMP/pane.txt" || fail "no header"
grep -q "p99" "$TMP/pane.txt" || fail "no p99 column"
echo "[top] pane:"
cat "$TMP/pane.txt"
echo "PASS"
