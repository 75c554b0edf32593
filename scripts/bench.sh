#!/usr/bin/env bash
# Builds ingrid (Release) and runs bench_vs_redis: ingrid against Redis + Lua in one run, servers
# pinned to CPU 0 and the load generator to CPU 1. Writes bench/results/bench_vs_redis.csv and
# renders bench/results/bench_vs_redis.png with gnuplot. Installs redis-server and gnuplot-nox.
#   scripts/bench.sh            the full run (5 s per case, 1/16/64/256 in flight, 100,000 keys)
#   scripts/bench.sh --smoke    about half a second per case (CI)
#   scripts/bench.sh ARGS...    any other bench_vs_redis arguments
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh" --bench
dir=$("$root/scripts/build.sh")
out="$root/bench/results"
# A smoke run's figures mean nothing: keep them out of the committed results.
for a in "$@"; do [ "$a" = "--smoke" ] && out="$dir/bench-results"; done
mkdir -p "$out"
csv="$out/bench_vs_redis.csv"
"$dir/bench/bench_vs_redis" --csv "$csv" "$@"
# One cluster of bars per (keys, in flight): Redis, ingrid with 1 server, Redis Cluster 3+3 with
# WAIT, ingrid with 3.
data=$(mktemp)
trap 'rm -f "$data"' EXIT
awk -F, 'NR > 1 && $1 != "floor" && $1 != "ingrid-batch" && $2 != "memory" {
  key = $2 "/" $3; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
  v[key, $1] = $4
} END {
  for (i = 0; i < n; i++) { k = order[i]; printf "%s %f %f %f %f\n", k, v[k, "redis"], v[k, "ingrid-1"], v[k, "redis-3+3"], v[k, "ingrid-3"] }
}' "$csv" > "$data"
gnuplot -e "data='$data'; out='$out/bench_vs_redis.png'; when='$(date -u +%Y-%m-%d) on $(nproc) CPUs'" \
  "$root/bench/chart.gp"
echo "bench: $csv and $out/bench_vs_redis.png"
