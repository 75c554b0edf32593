#!/usr/bin/env bash
# A fleet on one machine: N ingrid-node members, each on a host of its own (a network namespace
# with a private address on a bridge, as tests/support/hosts.h makes them), all started at the
# same instant through a few seeds; then a rolling restart of every member under load
# (scripts/rolling-restart.sh, which waits for `ingrid-cli wait cluster-safe` between stops) with
# every grant audited (build/tests/fleet_audit: buckets that never refill).
#
#   scripts/fleet.sh [--members N] [--seeds K] [--build-dir DIR] [--steady-ms MS] [--keep DIR]
#                    [--idle-seconds S] [--idle-only] [--node PATH] [--cli PATH] [--audit PATH]
#
# --idle-seconds S (default 0: not measured): once the cluster is safe and before any load, each
# member's CPU time over S seconds (every thread's, from /proc/PID/task/*/schedstat), printed as
# the mean and the largest share of one core per member; --idle-only stops there (no load, no
# restart). --members (default 32) hosts 10.77.0.2 ... on a bridge at 10.77.0.1/16, every member listening
# on 0.0.0.0:7400 and advertising its host's address; members 2..N join through the first K
# (default 1). --steady-ms (default 10000): the load's steady window before the restart. --keep
# DIR: copy the members' and the load's logs there. Needs root (namespaces), iproute2, nftables,
# python3 and a build with tests (DIR/cluster/ingrid-node, DIR/client/ingrid-cli,
# DIR/tests/fleet_audit; --node, --cli and --audit name them one by one).
#
# Prints the time from the start until all N are members (`ingrid-cli status --json`) and until
# the cluster is safe, the rolling restart's duration, and the load's figures: steady state beside
# the restart (calls, failed, p99 and maximum latency) and the audit's lost and doubled grants.
# Exit status: 0 when all N joined, every member was restarted, and no request failed and no
# grant was lost or doubled; 1 otherwise; 2 on bad usage; 77 when skipped (not root, CI unset).
set -u -o pipefail

members=32 seeds=1 steady_ms=10000 keep="" NODE="" CLI="" AUDIT="" idle_s=0 idle_only=0
build="$(cd "$(dirname "$0")/.." && pwd)/build"
roll="$(cd "$(dirname "$0")" && pwd)/rolling-restart.sh"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --members) members="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --steady-ms) steady_ms="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --idle-seconds) idle_s="$2"; shift 2 ;;
    --idle-only) idle_only=1; shift ;;
    --node) NODE="$2"; shift 2 ;;
    --cli) CLI="$2"; shift 2 ;;
    --audit) AUDIT="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fleet: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$members" =~ ^[0-9]+$ && $members -ge 2 && $members -le 250 ]] ||
  { echo "fleet: --members must be in [2, 250]" >&2; exit 2; }
[[ "$seeds" =~ ^[0-9]+$ && $seeds -ge 1 && $seeds -lt $members ]] ||
  { echo "fleet: --seeds must be in [1, members)" >&2; exit 2; }
[[ "$idle_s" =~ ^[0-9]+$ && $idle_s -le 3600 ]] ||
  { echo "fleet: --idle-seconds must be in [0, 3600]" >&2; exit 2; }
if [[ $(id -u) -ne 0 ]]; then
  # As the fault tests do: skipped visibly on a developer's machine, a failure in CI.
  if [[ -n "${CI:-}" ]]; then echo "fleet: FAIL: needs root (CI is set)" >&2; exit 1; fi
  echo "fleet: skipped: network namespaces need root" >&2
  exit 77
fi
NODE=${NODE:-$build/cluster/ingrid-node} CLI=${CLI:-$build/client/ingrid-cli}
AUDIT=${AUDIT:-$build/tests/fleet_audit}
for b in "$NODE" "$CLI" "$AUDIT"; do
  [[ -x "$b" ]] || { echo "fleet: $b not found (--build-dir DIR, built with tests)" >&2; exit 2; }
done

PORT=7400
LAB="ighost-$$"  # the prefix of tests/support/hosts.h: a lab whose process is gone is swept
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ingrid-fleet.XXXXXX") || { echo "fleet: mktemp failed" >&2; exit 1; }
export TMP NODE LAB PORT

cleanup() {
  local f i
  [[ -n "${AUDIT_PID:-}" ]] && kill -KILL "$AUDIT_PID" 2>/dev/null
  for f in "$TMP"/member-*.pid; do
    [[ -f "$f" ]] && kill -KILL "$(cat "$f")" 2>/dev/null
  done
  { wait; } 2>/dev/null
  for ((i = members - 1; i >= 0; i--)); do ip netns del "$LAB-$i" 2>/dev/null; done
  ip netns del "$LAB" 2>/dev/null
  if [[ -n "$keep" ]]; then mkdir -p "$keep" && cp "$TMP"/*.log "$keep"/ 2>/dev/null; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "fleet: FAIL: $*" >&2
  exit 1
}
# Milliseconds since the epoch.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
addr() { echo "10.77.$((($1 + 2) / 256)).$((($1 + 2) % 256))"; }
export -f addr

# Labs left by a run that was killed (its process is gone): deleted.
while read -r ns _; do
  [[ "$ns" == ighost-* ]] || continue
  owner=${ns#ighost-}; owner=${owner%%-*}
  [[ "$owner" =~ ^[0-9]+$ ]] && ! kill -0 "$owner" 2>/dev/null && ip netns del "$ns" 2>/dev/null
done < <(ip netns list)

# The lab: a bridge in a namespace of its own (10.77.0.1); host i's eth0 at addr(i) on it. As in
# tests/support/hosts.h, MACs follow addresses and neighbours are static (permanent ARP entries):
# the kernel's neighbour table, shared by every namespace, holds at most gc_thresh3 (default 1024)
# learnt entries, which a full mesh of 32 hosts overflows ("No route to host"); permanent entries
# do not count.
mac() { printf '02:77:00:00:%02x:%02x' $((($1 + 2) / 256)) $((($1 + 2) % 256)); }
neighbour() { echo "neigh replace $(addr "$1") lladdr $(mac "$1") dev $2 nud permanent"; }
ip netns add "$LAB" || fail "cannot make the lab namespace $LAB"
for ((i = 0; i < members; i++)); do ip netns add "$LAB-$i" || fail "cannot make host $i"; done
{
  echo "link set lo up"
  echo "link add br0 type bridge"
  echo "link set br0 address $(mac -1)"
  echo "addr add 10.77.0.1/16 dev br0"
  echo "link set br0 up"
  for ((i = 0; i < members; i++)); do
    echo "link add h$i type veth peer name eth0 netns $LAB-$i"
    echo "link set h$i master br0 up"
    neighbour "$i" br0
  done
} | ip -n "$LAB" -batch - || fail "cannot make the bridge"
for ((i = 0; i < members; i++)); do
  {
    echo "link set lo up"
    echo "link set eth0 address $(mac "$i")"
    echo "addr add $(addr "$i")/16 dev eth0"
    echo "link set eth0 up"
    neighbour -1 eth0
    for ((j = 0; j < members; j++)); do if [[ $j -ne $i ]]; then neighbour "$j" eth0; fi; done
  } | ip -n "$LAB-$i" -batch - || fail "cannot make host $i"
done

# ingrid-cli in the lab namespace (rolling-restart.sh calls it through --cli).
cat >"$TMP/cli" <<EOF
#!/bin/sh
exec ip netns exec "$LAB" "$CLI" "\$@"
EOF
chmod +x "$TMP/cli"
CLI_LAB="$TMP/cli"
SEED="$(addr 0):$PORT"

# member_args I SEEDS...: ingrid-node's arguments for host I joining through SEEDS (none: the
# first member, which starts the cluster).
member_args() {
  local i=$1 s
  shift
  echo "--listen 0.0.0.0:$PORT --advertise $(addr "$i"):$PORT --workers 1"
  for s in "$@"; do echo "--seed $s"; done
}
export -f member_args

# start_member I SEEDS...: ingrid-node on host I, now; returns once it listens (bounded: 60 s).
start_member() {
  local i=$1 log="$TMP/member-$1.log" before n
  shift
  before=$(grep -c "listening on" "$log" 2>/dev/null)
  # shellcheck disable=SC2046
  ip netns exec "$LAB-$i" "$NODE" $(member_args "$i" "$@") >>"$log" 2>&1 &
  echo $! >"$TMP/member-$i.pid"
  for ((n = 0; n < 600; n++)); do
    [[ $(grep -c "listening on" "$log" 2>/dev/null) -gt ${before:-0} ]] && return 0
    kill -0 "$(cat "$TMP/member-$i.pid")" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
export -f start_member

# The restart command rolling-restart.sh runs: SIGTERM (a graceful leave), the exit awaited
# (bounded: 60 s), then a new process on the same host, joining through two other members.
restart_member() {
  local address=${INGRID_MEMBER_ADDRESS%:*} i pid n others=()
  for ((i = 0; i < FLEET_MEMBERS; i++)); do [[ "$(addr "$i")" == "$address" ]] && break; done
  [[ $i -lt $FLEET_MEMBERS ]] || { echo "no host has address $address" >&2; return 1; }
  pid=$(cat "$TMP/member-$i.pid")
  kill -TERM "$pid" || return 1
  for ((n = 0; n < 600; n++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && { echo "member on host $i did not exit" >&2; return 1; }
  others=("$(addr $(((i + 1) % FLEET_MEMBERS))):$PORT" "$(addr $(((i + 2) % FLEET_MEMBERS))):$PORT")
  start_member "$i" "${others[@]}"
}
export -f restart_member
export FLEET_MEMBERS=$members

# 1. Every member at the same instant: each waits on a shared lock that this script holds, and
# starts once it is released.
exec 9>"$TMP/go.lock"
flock -x 9
join_seeds=()
for ((s = 0; s < seeds; s++)); do join_seeds+=("$(addr "$s"):$PORT"); done
for ((i = 0; i < members; i++)); do
  args=()
  if [[ $i -gt 0 ]]; then
    for s in "${join_seeds[@]}"; do [[ "$s" != "$(addr "$i"):$PORT" ]] && args+=("$s"); done
  fi
  # shellcheck disable=SC2046
  (
    exec 9>&-
    touch "$TMP/ready-$i"
    flock -s "$TMP/go.lock" true
    exec ip netns exec "$LAB-$i" "$NODE" $(member_args "$i" "${args[@]}")
  ) >>"$TMP/member-$i.log" 2>&1 &
  echo $! >"$TMP/member-$i.pid"
done
for ((n = 0; n < 600; n++)); do
  [[ $(find "$TMP" -name 'ready-*' | wc -l) -eq $members ]] && break
  sleep 0.05
done
[[ $(find "$TMP" -name 'ready-*' | wc -l) -eq $members ]] || fail "the members were not ready to start"
T0=$(now_ms)
flock -u 9
exec 9>&-
echo "fleet: $members members started at once on $members hosts, joining through $seeds seed(s)"

# 2. Time until all of them are members, then until the cluster is safe (bounded: 180 s).
count_members() {
  "$CLI_LAB" status --json --seed "$SEED" --timeout-ms 2000 2>/dev/null |
    python3 -c 'import json,sys
try: print(len(json.load(sys.stdin)["members"]))
except Exception: print(0)'
}
formed=0
while (($(now_ms) - T0 < 180000)); do
  n=$(count_members)
  [[ "$n" -eq $members ]] && { formed=$(now_ms); break; }
  sleep 0.1
done
exited=0
for ((i = 0; i < members; i++)); do
  kill -0 "$(cat "$TMP/member-$i.pid")" 2>/dev/null || {
    exited=$((exited + 1))
    echo "fleet: the member of host $i exited: $(tail -n 2 "$TMP/member-$i.log" | tr '\n' ' ')" >&2
  }
done
[[ $formed -gt 0 ]] || fail "only $(count_members) of $members became members in 180 s ($exited exited)"
[[ $exited -eq 0 ]] || fail "$exited members exited"
FORM_MS=$((formed - T0))
"$CLI_LAB" wait cluster-safe --seed "$SEED" --timeout-ms 180000 >/dev/null ||
  fail "all $members are members, but the cluster was not safe within 180 s"
SAFE_MS=$(($(now_ms) - T0))
echo "fleet: all $members members in ${FORM_MS} ms; cluster safe in ${SAFE_MS} ms"

# 2b. Idle cost: CPU nanoseconds of every member's threads (schedstat's first field), over
# --idle-seconds of nothing but the members themselves.
cpu_ns() {
  local pid=$1 total=0 t v
  for t in /proc/"$pid"/task/*/schedstat; do
    read -r v _ <"$t" 2>/dev/null && total=$((total + v))
  done
  echo "$total"
}
if [[ $idle_s -gt 0 ]]; then
  declare -a before_ns
  for ((i = 0; i < members; i++)); do before_ns[i]=$(cpu_ns "$(cat "$TMP/member-$i.pid")"); done
  IDLE_T0=$(date +%s%N)
  sleep "$idle_s"  # the measurement's window, not a wait for a condition
  IDLE_NS=$(($(date +%s%N) - IDLE_T0))
  sum=0 max=0 all=""
  for ((i = 0; i < members; i++)); do
    used=$(($(cpu_ns "$(cat "$TMP/member-$i.pid")") - before_ns[i]))
    sum=$((sum + used))
    ((used > max)) && max=$used
    all+="$used,"
  done
  # Shares of one core in percent, to 3 decimals; the median is a member that does not vote (the
  # voters, 5 by default, and the leader among them are the dearest).
  printf 'fleet: idle: members=%d seconds=%d mean_core_pct=%s median_core_pct=%s max_core_pct=%s\n' \
    "$members" "$idle_s" "$(python3 -c "print(f'{100*$sum/$members/$IDLE_NS:.3f}')")" \
    "$(python3 -c "import statistics; print(f'{100*statistics.median([$all])/$IDLE_NS:.3f}')")" \
    "$(python3 -c "print(f'{100*$max/$IDLE_NS:.3f}')")"
  if [[ $idle_only -eq 1 ]]; then
    echo "fleet: PASS (idle only)"
    exit 0
  fi
fi

# 3. The load, then a rolling restart under it, then load after it.
audit_seeds=()
for ((i = 0; i < members; i++)); do audit_seeds+=(--seed "$(addr "$i"):$PORT"); done
ip netns exec "$LAB" "$AUDIT" "${audit_seeds[@]}" --steady-ms "$steady_ms" \
  --max-fault-ms 1800000 >"$TMP/audit.log" 2>&1 &
AUDIT_PID=$!
for ((n = 0; n < steady_ms / 100 + 1200; n++)); do
  grep -q "steady done" "$TMP/audit.log" && break
  kill -0 "$AUDIT_PID" 2>/dev/null || break
  sleep 0.1
done
grep -q "steady done" "$TMP/audit.log" || fail "the load did not run: $(tail -n 3 "$TMP/audit.log")"
ROLL_T0=$(now_ms)
"$roll" --seed "$SEED" --restart restart_member --cli "$CLI_LAB" --timeout-ms 180000 \
  >"$TMP/roll.log" 2>&1 || fail "rolling-restart.sh failed: $(tail -n 3 "$TMP/roll.log")"
ROLL_MS=$(($(now_ms) - ROLL_T0))
kill -0 "$AUDIT_PID" 2>/dev/null || fail "the load ended before the restart did: $(tail -n 3 "$TMP/audit.log")"
kill -USR1 "$AUDIT_PID"
for ((n = 0; n < 1800; n++)); do
  kill -0 "$AUDIT_PID" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$AUDIT_PID" 2>/dev/null && fail "the load did not end"
wait "$AUDIT_PID" || fail "fleet_audit failed: $(tail -n 5 "$TMP/audit.log")"
AUDIT_PID=""
RESTARTS=$(grep -c "restarting member" "$TMP/roll.log")
echo "fleet: rolling restart of $RESTARTS members in ${ROLL_MS} ms"

# 4. The figures. "window NAME: S s, C calls, G granted, D denied, F failed, U unknown" and
# "latency NAME: ... p99 X us ... max Y us" per window; "audit: lost=L doubled=D ...".
field() { sed -nE "s/.*window $1: .* ([0-9]+) $2.*/\\1/p" "$TMP/audit.log"; }
latency() { sed -nE "s/.*latency $1 .* $2 +([0-9.]+) us.*/\\1/p" "$TMP/audit.log"; }
audit() { sed -nE "s/^fleet-audit: audit: .*$1=([0-9]+).*/\\1/p" "$TMP/audit.log"; }
grep "fleet-audit: window\|fleet-audit: latency" "$TMP/audit.log"
STEADY_FAILED=$(field steady failed) FAILED=$(field fault failed)
LOST=$(audit lost) DOUBLED=$(audit doubled)
printf 'fleet: members=%d seeds=%d formed_ms=%d safe_ms=%d restarted=%d restart_ms=%d\n' \
  "$members" "$seeds" "$FORM_MS" "$SAFE_MS" "$RESTARTS" "$ROLL_MS"
printf 'fleet: steady: calls=%s failed=%s p99_us=%s max_us=%s\n' "$(field steady calls)" \
  "$STEADY_FAILED" "$(latency steady p99)" "$(latency steady max)"
printf 'fleet: restart: calls=%s failed=%s p99_us=%s max_us=%s\n' "$(field fault calls)" \
  "$FAILED" "$(latency fault p99)" "$(latency fault max)"
printf 'fleet: grants: acked=%s lost=%s doubled=%s failed_total=%s\n' "$(audit acked)" "$LOST" \
  "$DOUBLED" "$(audit failed)"
[[ $RESTARTS -eq $members ]] || fail "rolling-restart.sh restarted $RESTARTS of $members members"
[[ -n "$LOST" && -n "$DOUBLED" && -n "$FAILED" ]] || fail "no audit figures: $(tail -n 5 "$TMP/audit.log")"
[[ "$(field fault granted)" -gt 0 ]] || fail "no grant during the restart"
[[ "$(audit failed)" -eq 0 ]] || fail "$(audit failed) requests failed"
[[ "$LOST" -eq 0 && "$DOUBLED" -eq 0 ]] || fail "$LOST grants lost, $DOUBLED doubled"
echo "fleet: PASS"
