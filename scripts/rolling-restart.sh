#!/usr/bin/env bash
# Restarts every member of a running ingrid cluster, one at a time, never stopping the next one
# before the cluster is safe again (every member reachable and leased, every replica complete,
# nothing migrating: `ingrid-cli wait cluster-safe`).
#
#   scripts/rolling-restart.sh --seed HOST:PORT --restart COMMAND [--timeout-ms N] [--cli PATH]
#
# COMMAND restarts one member; it runs under bash with INGRID_MEMBER_ID and INGRID_MEMBER_ADDRESS
# set (for example `systemctl restart "ingrid@${INGRID_MEMBER_ADDRESS##*:}"`). It should stop the
# member gracefully (SIGTERM: it hands its partitions over and leaves) and return once the new
# process is started. The control plane's leader goes last (one election instead of several).
# Exit status: 0 when every member was restarted and the cluster is safe; 1 otherwise, naming
# the member and the reason.
set -euo pipefail

seed="" restart="" timeout_ms=120000
cli="$(dirname "$0")/../build/client/ingrid-cli"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seed) seed="$2"; shift 2 ;;
    --restart) restart="$2"; shift 2 ;;
    --timeout-ms) timeout_ms="$2"; shift 2 ;;
    --cli) cli="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rolling-restart: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$seed" ]] || { echo "rolling-restart: --seed HOST:PORT is required" >&2; exit 2; }
[[ -n "$restart" ]] || { echo "rolling-restart: --restart COMMAND is required" >&2; exit 2; }
[[ -x "$cli" ]] || { echo "rolling-restart: ingrid-cli not found at $cli (--cli PATH)" >&2; exit 2; }

wait_safe() {
  "$cli" wait cluster-safe --seed "$1" --timeout-ms "$timeout_ms"
}

echo "rolling-restart: waiting for the cluster to be safe before the first stop"
wait_safe "$seed" || { echo "rolling-restart: the cluster is not safe; nothing restarted" >&2; exit 1; }

# "id address" per member, the leader last.
mapfile -t members < <("$cli" status --json --seed "$seed" | python3 -c '
import json, sys
s = json.load(sys.stdin)
ms = sorted(s["members"], key=lambda m: (m["id"] == s["leader"], m["id"]))
for m in ms:
    print(m["id"], m["address"])
')
[[ ${#members[@]} -gt 0 ]] || { echo "rolling-restart: no members listed" >&2; exit 1; }
echo "rolling-restart: ${#members[@]} members"

for line in "${members[@]}"; do
  id="${line%% *}" address="${line#* }"
  # Another member to ask while this one restarts.
  other="$seed"
  for l in "${members[@]}"; do
    [[ "${l#* }" != "$address" ]] && { other="${l#* }"; break; }
  done
  echo "rolling-restart: restarting member $id at $address"
  if ! INGRID_MEMBER_ID="$id" INGRID_MEMBER_ADDRESS="$address" bash -c "$restart"; then
    echo "rolling-restart: the restart command failed for member $id at $address" >&2
    exit 1
  fi
  if ! wait_safe "$other"; then
    echo "rolling-restart: the cluster was not safe after restarting member $id at $address" >&2
    exit 1
  fi
done
echo "rolling-restart: every member restarted; the cluster is safe"
