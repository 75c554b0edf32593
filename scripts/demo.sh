#!/usr/bin/env bash
# Installs dependencies, builds ingrid, and runs the rate-limiting demo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
dir=$("$root/scripts/build.sh")
"$dir/examples/rate_limit_demo"
