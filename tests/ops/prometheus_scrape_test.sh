#!/usr/bin/env bash
# A real Prometheus scrapes a 3-member ingrid cluster under load.
#
# Usage: prometheus_scrape_test.sh PATH/TO/ingrid-node PATH/TO/ingrid-cli
#
# Starts three members with --metrics, checks their health endpoints, lints each
# /metrics page with promtool, points a real Prometheus (scrape_interval 1s) at them,
# runs a known load with `ingrid-cli load`, and checks that (a) the members' own
# ingrid_requests_total grew by the number of requests the load reports, and (b) the
# sum Prometheus scraped equals the sum read directly from the members.
set -u -o pipefail

NODE=${1:?usage: $0 INGRID_NODE INGRID_CLI}
CLI=${2:?usage: $0 INGRID_NODE INGRID_CLI}
PROMETHEUS=${PROMETHEUS:-prometheus}
PROMTOOL=${PROMTOOL:-promtool}

for tool in "$PROMETHEUS" "$PROMTOOL" curl python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "FAIL: required tool '$tool' not found" >&2; exit 1; }
done
[[ -x "$NODE" ]] || { echo "FAIL: ingrid-node not executable: $NODE" >&2; exit 1; }
[[ -x "$CLI" ]] || { echo "FAIL: ingrid-cli not executable: $CLI" >&2; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ingrid-prom.XXXXXX") || { echo "FAIL: mktemp" >&2; exit 1; }
PIDS=()

cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${PIDS[@]}"; do
    # bounded wait for a graceful exit, then SIGKILL
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$TMP"/node*.log "$TMP"/prometheus.log; do
    [[ -f "$f" ]] || continue
    echo "---- last lines of $(basename "$f") ----" >&2
    tail -n 20 "$f" >&2
  done
  exit 1
}

# wait_for_line FILE REGEX SECONDS PID: prints the last word of the first matching line
wait_for_line() {
  local file=$1 regex=$2 secs=$3 pid=$4 line i
  for ((i = 0; i < secs * 10; i++)); do
    line=$(grep -m1 -E "$regex" "$file" 2>/dev/null)
    if [[ -n "$line" ]]; then
      echo "${line##* }"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# http_code URL: prints the HTTP status (000 if unreachable)
http_code() {
  curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null || true
}

# sum_requests MPORT...: the sum of every ingrid_requests_total sample on those members
sum_requests() {
  local addr
  {
    for addr in "$@"; do
      curl -sf -m 5 "http://$addr/metrics" || { echo "SCRAPE_FAILED $addr"; }
    done
  } | python3 -c '
import sys
total = 0.0
for line in sys.stdin:
    if line.startswith("SCRAPE_FAILED"):
        sys.exit("cannot read /metrics of " + line.split()[1])
    if line.startswith("ingrid_requests_total{"):
        total += float(line.rsplit(None, 1)[1])
print(int(total) if total == int(total) else total)
'
}

# prom_query EXPR: prints the scalar value of an instant query's single result, or "none"
prom_query() {
  curl -s -m 5 "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    print("none"); sys.exit(0)
r = d.get("data", {}).get("result", []) if d.get("status") == "success" else []
if len(r) != 1:
    print("none")
else:
    v = float(r[0]["value"][1])
    print(int(v) if v == int(v) else v)
'
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# within_pct A B PCT: true if |A-B| <= PCT% of max(|B|,1)
within_pct() {
  python3 -c 'import sys; a,b,p=map(float,sys.argv[1:]); sys.exit(0 if abs(a-b) <= p/100*max(abs(b),1) else 1)' "$1" "$2" "$3"
}

# ---- 1. three members --------------------------------------------------------
ADDR=() MADDR=()
for i in 1 2 3; do
  log="$TMP/node$i.log"
  if [[ $i -eq 1 ]]; then
    "$NODE" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 >"$log" 2>&1 &
  else
    "$NODE" --listen 127.0.0.1:0 --metrics 127.0.0.1:0 --seed "${ADDR[0]}" >"$log" 2>&1 &
  fi
  pid=$!
  PIDS+=("$pid")
  m=$(wait_for_line "$log" '^ingrid-node: metrics on ' 20 "$pid") ||
    fail "member $i printed no 'metrics on' line within 20 s (or exited)"
  a=$(wait_for_line "$log" '^ingrid-node: member [0-9]+ listening on ' 20 "$pid") ||
    fail "member $i printed no 'listening on' line within 20 s (or exited)"
  ADDR+=("$a")
  MADDR+=("$m")
  echo "[prometheus] member $i: $a, metrics $m"
done

# ---- 2. health endpoints --------------------------------------------------------
ok=0
for ((i = 0; i < 300; i++)); do
  if [[ $(http_code "http://${MADDR[0]}/cluster-safe") == 200 ]]; then ok=1; break; fi
  sleep 0.1
done
[[ $ok == 1 ]] || fail "member 1 /cluster-safe did not answer 200 within 30 s (last: $(http_code "http://${MADDR[0]}/cluster-safe"))"
for i in 0 1 2; do
  for ep in livez readyz; do
    code=$(http_code "http://${MADDR[$i]}/$ep")
    [[ $code == 200 ]] || fail "member $((i + 1)) /$ep answered $code, not 200"
  done
done

# ---- 3. promtool check metrics ----------------------------------------------------
for i in 0 1 2; do
  page="$TMP/metrics$((i + 1)).txt"
  curl -sf -m 5 "http://${MADDR[$i]}/metrics" >"$page" || fail "cannot read member $((i + 1)) /metrics"
  if ! out=$("$PROMTOOL" check metrics <"$page" 2>&1); then
    echo "$out" >&2
    fail "promtool check metrics rejected member $((i + 1))'s /metrics"
  fi
done

# ---- 4. Prometheus ----------------------------------------------------------------
cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ingrid
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['${MADDR[0]}', '${MADDR[1]}', '${MADDR[2]}']
YML
"$PROMTOOL" check config "$TMP/prometheus.yml" >"$TMP/checkconfig.log" 2>&1 ||
  { cat "$TMP/checkconfig.log" >&2; fail "promtool check config rejected the generated prometheus.yml"; }

PPORT=
for attempt in 1 2 3; do
  port=$(free_port) || fail "cannot pick a free port"
  "$PROMETHEUS" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/data" \
    --web.listen-address="127.0.0.1:$port" >"$TMP/prometheus.log" 2>&1 &
  ppid_=$!
  PIDS+=("$ppid_")
  for ((i = 0; i < 300; i++)); do
    if curl -sf -m 2 -o /dev/null "http://127.0.0.1:$port/-/ready"; then PPORT=$port; break; fi
    kill -0 "$ppid_" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n "$PPORT" ]] && break
  echo "[prometheus] prometheus on port $port not ready (attempt $attempt), retrying" >&2
  kill -TERM "$ppid_" 2>/dev/null
done
[[ -n "$PPORT" ]] || fail "prometheus did not become ready (/-/ready) in 3 attempts of 30 s"
echo "[prometheus] prometheus ready on 127.0.0.1:$PPORT"

# ---- 5. all three targets up --------------------------------------------------------
up=none
for ((i = 0; i < 150; i++)); do
  up=$(prom_query 'sum(up{job="ingrid"})')
  [[ $up == 3 ]] && break
  sleep 0.2
done
[[ $up == 3 ]] || {
  curl -s -m 5 "http://127.0.0.1:$PPORT/api/v1/targets" >&2
  fail "prometheus did not see 3 ingrid targets up within 30 s (sum(up)=$up)"
}

# ---- 6. known load ----------------------------------------------------------------------
BEFORE=$(sum_requests "${MADDR[@]}") || fail "cannot read ingrid_requests_total before the load"
"$CLI" load --seed "${ADDR[0]}" --seconds 5 --keys 1000 --concurrency 16 >"$TMP/load.log" 2>&1
rc=$?
cat "$TMP/load.log"
[[ $rc == 0 ]] || fail "ingrid-cli load exited $rc"
N=$(grep -oE '\(n=[0-9]+' "$TMP/load.log" | head -1 | tr -dc 0-9)
FAILED=$(grep -oE '[0-9]+ failed' "$TMP/load.log" | head -1 | tr -dc 0-9)
[[ -n "$N" && "$N" -gt 0 ]] || fail "cannot parse the request count (n=...) from ingrid-cli load's output"
[[ -n "$FAILED" ]] || fail "cannot parse the failed count from ingrid-cli load's output"
[[ "$FAILED" == 0 ]] || fail "ingrid-cli load reported $FAILED failed requests"

# ---- 7. Prometheus catches up ---------------------------------------------------------------
AFTER=$(sum_requests "${MADDR[@]}") || fail "cannot read ingrid_requests_total after the load"
PROM=none
for ((i = 0; i < 100; i++)); do
  PROM=$(prom_query 'sum(ingrid_requests_total{job="ingrid"})')
  [[ $PROM == "$AFTER" ]] && break
  sleep 0.2
  # the counters may still move (late answers); re-read the members now and then
  if ((i % 10 == 9)); then AFTER=$(sum_requests "${MADDR[@]}") || fail "cannot re-read ingrid_requests_total"; fi
done
COUNTED=$((AFTER - BEFORE))
echo "[prometheus] load reported N=$N; members counted AFTER-BEFORE=$AFTER-$BEFORE=$COUNTED; prometheus sum=$PROM"
[[ $PROM != none ]] || fail "prometheus returned no value for sum(ingrid_requests_total)"
within_pct "$COUNTED" "$N" 1 ||
  fail "members counted $COUNTED requests, the load reported $N (more than 1% apart)"
within_pct "$PROM" "$AFTER" 1 ||
  fail "prometheus's sum(ingrid_requests_total)=$PROM differs from the members' own sum $AFTER by more than 1% after 20 s"

# ---- 8. summary ----------------------------------------------------------------------------------
echo "[prometheus] members=3 load=$N counted=$COUNTED prometheus=$PROM promtool=ok"
exit 0
