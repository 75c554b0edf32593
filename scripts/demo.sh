#!/usr/bin/env bash
# The demo: three processes that each embed an ingrid node (examples/http_rate_limit_server) serve
# HTTP with one token bucket per key shared by all three; examples/http_load_driver sends them
# load round robin; one of them is killed with kill -9 mid-run. Prints a summary (grants per key
# against the bucket's capacity, how long the killed process's keys were unavailable, topology
# versions before and after) and draws a timeline with gnuplot.
#
#   scripts/demo.sh               install the Debian packages, build, run (about 25 s after the
#                                 build) and draw docs/demo.png
#   --build-dir DIR               no install, no build: the programs already built in DIR
#   --short                       a shorter run (about 15 s), drawing nothing unless --png
#   --png FILE                    where the timeline goes (default: docs/demo.png, none for --short)
# The test runs `demo.sh --short --build-dir DIR`.
#
# The buckets hold CAPACITY tokens and refill CAPACITY per day: no token comes back during the
# run, so every key must be granted exactly CAPACITY times, before and after the kill.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

short=0 dir="" png=""
while [ $# -gt 0 ]; do
  case "$1" in
    --short) short=1; shift ;;
    --build-dir) dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --png) png=${2:?--png needs a file}; shift 2 ;;
    *) echo "usage: demo.sh [--short] [--build-dir DIR] [--png FILE]" >&2; exit 2 ;;
  esac
done
if [ "$short" -eq 1 ]; then
  keys=16 rate=50 seconds=10 kill_at=2 capacity=150
else
  keys=24 rate=100 seconds=20 kill_at=6 capacity=1000
  png=${png:-$root/docs/demo.png}
fi
# A token comes back every 86400 / capacity seconds: later than the driver's last request (it runs
# at most 2 x seconds), so the exact count is the capacity.
[ $((86400 / capacity)) -gt $((2 * seconds + 5)) ] || { echo "demo: capacity too large" >&2; exit 2; }
if [ -z "$dir" ]; then
  # --bench: gnuplot-nox, which draws the timeline (redis-server comes with it).
  "$root/scripts/install-deps.sh" --bench
  dir=$("$root/scripts/build.sh")
fi
server=$dir/examples/http_rate_limit_server
driver=$dir/examples/http_load_driver
cli=$dir/client/ingrid-cli
for program in "$server" "$driver" "$cli"; do
  [ -x "$program" ] || { echo "demo: $program is not built" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ingrid-demo.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "demo: FAILED: $*" >&2
  for log in "$tmp"/*.log; do echo "---- $log" >&2; tail -5 "$log" >&2; done
  exit 1
}

# wait_line FILE TEXT SECONDS: the first line of FILE holding TEXT, within SECONDS.
wait_line() {
  local i
  for ((i = 0; i < $3 * 20; i++)); do
    grep -m1 -F -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
# topology SEED: "version V, N members" from ingrid-cli status --json (exit status 3: degraded).
topology() {
  local json
  json=$("$cli" status --json --seed "$1" 2>/dev/null) || [ $? -eq 3 ] || return 1
  echo "version $(grep -o '"topologyVersion":[0-9]*' <<<"$json" | head -1 | cut -d: -f2)," \
    "$(grep -o '"address":' <<<"$json" | wc -l) members," \
    "healthy $(grep -o '"healthy":[a-z]*' <<<"$json" | tail -1 | cut -d: -f2)"
}

echo "ingrid demo: 3 processes each embedding a node; $keys keys, each bucket $capacity tokens"
echo "  (refill $capacity per day: none during the run), $rate requests/s per key for ${seconds} s"
seed="" http=()
for i in 1 2 3; do
  args=(--limit "$capacity" --window 86400)
  [ -z "$seed" ] || args+=(--seed "$seed")
  "$server" "${args[@]}" >"$tmp/server$i.log" 2>&1 &
  pids+=($!)
  node=$(wait_line "$tmp/server$i.log" "node " 30) || fail "process $i did not start"
  address=$(wait_line "$tmp/server$i.log" "http " 5) || fail "process $i has no HTTP port"
  [ -n "$seed" ] || seed=${node##* }
  http+=("${address##* }")
  echo "  process $i (pid ${pids[-1]}): node ${node##* }, http ${address##* }"
done
victim=2 victim_pid=${pids[1]}
"$cli" wait cluster-safe --seed "$seed" --timeout-ms 30000 >/dev/null ||
  fail "the cluster did not settle"
before=$(topology "$seed") || fail "ingrid-cli status failed"
echo "  topology before: $before"

"$driver" --target "${http[0]}" --target "${http[1]}" --target "${http[2]}" --keys "$keys" \
  --rate "$rate" --seconds "$seconds" --capacity "$capacity" --hold "$((victim - 1))@$kill_at" \
  --csv "$tmp/timeline.csv" >"$tmp/driver.log" 2>&1 &
driver_pid=$!
pids+=($driver_pid)
start_ms=$(wait_line "$tmp/driver.log" "start_epoch_ms" 5) || fail "the driver did not start"
start_ms=${start_ms##* }
# The driver holds back the victim's share at kill_at and says so once its answers are in.
wait_line "$tmp/driver.log" "held " $((kill_at + 15)) >/dev/null || fail "the driver did not hold"
kill -KILL "$victim_pid"
killed_ms=$(date +%s%3N)
wait "$victim_pid" 2>/dev/null || true  # reaped here, so bash does not report it as "Killed"
kill -USR2 "$driver_pid"
kill_s=$(awk -v k="$killed_ms" -v s="$start_ms" 'BEGIN { printf "%.2f", (k - s) / 1000 }')
echo "  kill -9 process $victim (pid $victim_pid) at ${kill_s} s"
for ((i = 0; i < (2 * seconds + 30) * 10; i++)); do
  kill -0 "$driver_pid" 2>/dev/null || break
  sleep 0.1
done
wait "$driver_pid" || fail "the driver failed"
after=$(topology "$seed") || fail "ingrid-cli status failed after the kill"
echo "  topology after:  $after"

result=$(grep "^result " "$tmp/driver.log") || fail "the driver wrote no result"
field() { awk -v f="$1" '{ for (i = 1; i < NF; i++) if ($i == f) print $(i + 1) }' <<<"$result"; }
exact=$(field exact_keys) outage_keys=$(field outage_keys) unresolved=$(field unresolved_keys)
outage_s=$(awk -v m="$(field max_outage_ms)" 'BEGIN { printf "%.1f", m / 1000 }')
echo "  driver: $(field grants) grants, $(field failed_attempts) failed attempts sent again" \
  "elsewhere, $(field cut_off) cut off, $(field seconds) s of load"
if [ "$exact" -eq "$keys" ]; then
  grants="grants $capacity of capacity $capacity on $exact of $keys keys (exact)"
else
  grants="grants NOT EXACT: $exact of $keys keys got capacity $capacity"
  grep "^key " "$tmp/driver.log" | awk -v c="$capacity" '$4 != c' | sed 's/^/    /'
fi
if [ "$unresolved" -eq 0 ]; then back="every key answers again"; else back="$unresolved keys never came back"; fi
# A key stalls when the killed process held its primary or its backup (a write waits for its
# backup): until the others declare it failed (NodeOptions::failureTimeout, 3 s) and move on.
echo "summary: $grants; the keys whose primary or backup the killed process held" \
  "($outage_keys) were unavailable for at most ${outage_s} s, $back;" \
  "topology ${before%%,*} -> ${after%%,*}"

if [ -n "$png" ]; then
  command -v gnuplot >/dev/null || fail "gnuplot is not installed (apt-get install gnuplot-nox)"
  gnuplot <<EOF || fail "gnuplot could not draw $png"
set terminal pngcairo size 960,440 font "sans,10"
set output "$png"
set datafile separator ","
set title "3 processes, $keys keys x $capacity tokens, $rate requests/s per key: kill -9 of one process at ${kill_s} s"
set xlabel "seconds since the load started"
set ylabel "per second (100 ms steps)"
set key below horizontal
set yrange [0:*]
set arrow from $kill_s, graph 0 to $kill_s, graph 1 nohead lw 2 lc rgb "#cc0000"
set label "kill -9" at $kill_s, graph 0.96 offset 0.5, 0 textcolor rgb "#cc0000"
plot "$tmp/timeline.csv" every ::1 using (\$1 + 0.05):((\$2 + \$3) * 10) with lines lw 2 title "answered (200 + 429)", \
     "" every ::1 using (\$1 + 0.05):(\$3 * 10) with lines lw 2 title "429", \
     "" every ::1 using (\$1 + 0.05):(\$4 * 10) with lines title "failed attempts (sent again elsewhere)"
EOF
  echo "timeline: $png"
fi
[ "$exact" -eq "$keys" ] && [ "$unresolved" -eq 0 ]
