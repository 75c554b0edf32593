#!/usr/bin/env bash
# A rolling restart under load: scripts/rolling-restart.sh restarts every member of a 5-member
# cluster (SIGTERM, then a new process at the same address), waiting for `ingrid-cli wait
# cluster-safe` between two stops, while `ingrid-cli load` runs through it: 0 requests failed.
#
# Usage: rolling_restart_test.sh PATH/TO/ingrid-node PATH/TO/ingrid-cli PATH/TO/rolling-restart.sh
set -u -o pipefail

NODE=${1:?usage: $0 INGRID_NODE INGRID_CLI ROLLING_RESTART}
CLI=${2:?usage: $0 INGRID_NODE INGRID_CLI ROLLING_RESTART}
ROLL=${3:?usage: $0 INGRID_NODE INGRID_CLI ROLLING_RESTART}
MEMBERS=5

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ingrid-roll.XXXXXX") || { echo "FAIL: mktemp" >&2; exit 1; }
export TMP NODE

cleanup() {
  local f pid
  for f in "$TMP"/*.pid; do
    [[ -f "$f" ]] || continue
    pid=$(cat "$f")
    kill -KILL "$pid" 2>/dev/null
  done
  [[ -n "${LOAD_PID:-}" ]] && kill -KILL "$LOAD_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$TMP"/*.log; do
    [[ -f "$f" ]] || continue
    echo "---- last lines of $(basename "$f") ----" >&2
    tail -n 15 "$f" >&2
  done
  exit 1
}

# A free loopback port below the kernel's ephemeral range (so no outgoing connection, and no test
# binding port 0, takes it while its member is down for a restart); a member that finds it taken
# anyway at its first start is given another (start_new).
pick_port() {
  python3 -c '
import random, socket, sys
low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
# Below the ephemeral range if there is room there, else above it (else anywhere unprivileged).
if low - 1024 >= 2000:
    span = (max(1024, low - 12000), low)
elif 65535 - high >= 2000:
    span = (high + 1, 65536)
else:
    span = (1024, 65536)
for _ in range(200):
    port = random.randrange(*span)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit(1)
'
}

# start_member PORT [SEED]: starts ingrid-node at 127.0.0.1:PORT; waits (bounded) until it listens.
start_member() {
  local port=$1 seed=${2:-} log="$TMP/member-$1.log" i
  if [[ -n "$seed" ]]; then
    "$NODE" --listen "127.0.0.1:$port" --seed "$seed" --failure-timeout-ms 2000 >>"$log" 2>&1 &
  else
    "$NODE" --listen "127.0.0.1:$port" --failure-timeout-ms 2000 >>"$log" 2>&1 &
  fi
  local pid=$!
  echo "$pid" >"$TMP/member-$port.pid"
  for ((i = 0; i < 300; i++)); do
    [[ $(grep -c "listening on" "$log" 2>/dev/null) -ge $(cat "$TMP/member-$port.starts" 2>/dev/null || echo 1) ]] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
export -f start_member

# The restart command rolling-restart.sh runs: SIGTERM (a graceful leave), wait for the exit
# (bounded), then a new process at the same address, joining through another member.
restart_member() {
  local port=${INGRID_MEMBER_ADDRESS##*:} pid i other
  pid=$(cat "$TMP/member-$port.pid")
  kill -TERM "$pid" || return 1
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && { echo "member at port $port did not exit" >&2; return 1; }
  for f in "$TMP"/member-*.pid; do
    other=${f##*/member-}; other=${other%.pid}
    [[ "$other" != "$port" ]] && break
  done
  echo $(( $(cat "$TMP/member-$port.starts" 2>/dev/null || echo 1) + 1 )) >"$TMP/member-$port.starts"
  start_member "$port" "127.0.0.1:$other"
}
export -f restart_member

# start_new INDEX [SEED]: starts member INDEX on a port of its own (PORTS[INDEX]), picking another
# if another process bound the picked one first (bounded).
PORTS=()
start_new() {
  local m=$1 seed=${2:-} try port
  for ((try = 0; try < 5; try++)); do
    port=$(pick_port) || return 1
    PORTS[m]=$port
    start_member "$port" "$seed" && return 0
    grep -q "Address already in use" "$TMP/member-$port.log" 2>/dev/null || return 1
    rm -f "$TMP/member-$port.pid"  # not a member: restart_member must not pick it as a seed
    echo "member $((m + 1)): port $port was taken before it bound it; another port" >&2
  done
  return 1
}

start_new 0 || fail "member 1 did not start"
SEED="127.0.0.1:${PORTS[0]}"
export SEED
for ((m = 1; m < MEMBERS; m++)); do
  start_new "$m" "$SEED" || fail "member $((m + 1)) did not start"
done
"$CLI" wait cluster-safe --seed "$SEED" --timeout-ms 30000 || fail "the new cluster was not safe"

SEEDS=()
for p in "${PORTS[@]}"; do SEEDS+=(--seed "127.0.0.1:$p"); done
"$CLI" load "${SEEDS[@]}" --seconds 45 --keys 1000 --concurrency 8 >"$TMP/load.log" 2>&1 &
LOAD_PID=$!
# Load that really ran before the first stop: the load prints nothing until it ends, so ask the
# cluster for a granted request's trace instead (an acquire of our own succeeds).
"$CLI" acquire warm 1 --seed "$SEED" >/dev/null || fail "no request succeeded before the restart"

START=$(date +%s)
"$ROLL" --seed "$SEED" --restart restart_member --cli "$CLI" --timeout-ms 60000 \
  >"$TMP/roll.log" 2>&1 || fail "rolling-restart.sh failed: $(tail -n 3 "$TMP/roll.log")"
ROLLED=$(( $(date +%s) - START ))
# The load ran around the whole restart: it is still running now.
kill -0 "$LOAD_PID" 2>/dev/null || fail "the load ended before the rolling restart did (${ROLLED}s)"
RESTARTS=$(grep -c "restarting member" "$TMP/roll.log")
[[ $RESTARTS -eq $MEMBERS ]] || fail "rolling-restart.sh restarted $RESTARTS of $MEMBERS members"
"$CLI" status --seed "$SEED" >"$TMP/status.log" 2>&1 || fail "not healthy after the restart"

# The load ends on its own (bounded: 45 s of load, then its summary).
for ((i = 0; i < 900; i++)); do
  kill -0 "$LOAD_PID" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$LOAD_PID" 2>/dev/null && fail "the load did not end"
wait "$LOAD_PID" || fail "ingrid-cli load exited with an error: $(tail -n 3 "$TMP/load.log")"
LINE=$(grep -m1 "granted" "$TMP/load.log")
[[ -n "$LINE" ]] || fail "no summary from the load: $(cat "$TMP/load.log")"
GRANTED=$(echo "$LINE" | sed -E 's/.*: ([0-9]+) granted.*/\1/')
FAILED=$(echo "$LINE" | sed -E 's/.* ([0-9]+) failed.*/\1/')
echo "[rolling-restart] members=$MEMBERS restarted=$RESTARTS in ${ROLLED}s load: granted=$GRANTED failed=$FAILED"
[[ "$GRANTED" -gt 0 ]] || fail "the load granted nothing"
[[ "$FAILED" -eq 0 ]] || fail "$FAILED requests failed during the rolling restart: $LINE"
echo "PASS"
