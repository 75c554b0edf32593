#!/usr/bin/env bash
# Installs what ingrid needs to build and test, from Debian 12's packages. Idempotent: does
# nothing when everything is already installed. `--bench` adds redis-server and gnuplot-nox;
# `--fuzz` adds clang-14 with its sanitizer and libFuzzer runtimes (both may be given). Runs
# apt-get as root (or through sudo).
set -euo pipefail

# ccache: every build compiles through it when installed (cmake/IngridCcache.cmake).
# libraft-dev: the control plane's consensus (Canonical's raft; pulls libuv1-dev).
# nftables and iproute2: the network-partition tests (network namespaces, nft rules).
# libabsl-dev: Abseil's flat_hash_set, the index of each partition's compact entry store.
# libssl-dev: OpenSSL: libcrypto (HMAC-SHA256 and nonces of member and client authentication)
# and libssl (TLS for member and client connections, through Asio's asio/ssl).
# prometheus-cpp-dev: the metric families and text format of a member's /metrics.
# libcpp-httplib-dev: the HTTP server of `ingrid-node --metrics` (/metrics and the probes).
# libcli11-dev: the option parsing of ingrid-node and ingrid-cli (header-only).
# prometheus, curl and tmux (tests only): a real Prometheus scrapes a test cluster; curl asks
# probes and the HTTP gateway; tmux runs `ingrid-cli top` in a terminal.
# (rapidjson-dev, the HTTP gateway's JSON, comes with libcereal-dev, which depends on it.)
# redis-tools and python3-redis (tests only): redis-cli and redis-py against the RESP gateway.
# libhiredis-dev (tests only): a C client pipelining against the RESP gateway (docs/ARCHITECTURE.md
# "Dependencies"); its test program is built only when hiredis is found.
# libgrpc++-dev, libprotobuf-dev, protobuf-compiler, protobuf-compiler-grpc: the Envoy RLS v3
# gateway's gRPC server and messages, compiled from its .proto at build time (optional).
# libyaml-cpp-dev: the RLS gateway's envoyproxy/ratelimit YAML config (docs/ARCHITECTURE.md).
# python3-grpcio and python3-protobuf (tests only): a Python gRPC client of the RLS gateway.
# libgtest-dev (examples only): the GoogleTest example of the test kit (examples/testing/); left
# out of the build when absent.
packages=(g++ cmake make ccache libasio-dev libcereal-dev catch2 libxxhash-dev libraft-dev
          libuv1-dev libabsl-dev libssl-dev nftables iproute2 prometheus-cpp-dev
          libcpp-httplib-dev libcli11-dev pkg-config prometheus curl tmux redis-tools
          python3-redis libhiredis-dev libgrpc++-dev libprotobuf-dev protobuf-compiler
          protobuf-compiler-grpc libyaml-cpp-dev python3-grpcio python3-protobuf libgtest-dev)
for arg in "$@"; do
  case "$arg" in
    # --bench: also what the benchmarks compare against and draw with (scripts/bench.sh).
    --bench) packages+=(redis-server gnuplot-nox) ;;
    # --fuzz: also what the fuzz harnesses build with (scripts/fuzz.sh): clang 14, libFuzzer, and
    # libclang-rt-14-dev, clang's ASan/UBSan/libFuzzer runtimes (only recommended by clang-14,
    # so not pulled in with --no-install-recommends).
    --fuzz) packages+=(clang-14 libclang-rt-14-dev libfuzzer-14-dev) ;;
    *) echo "install-deps.sh: unknown option '$arg' (known: --bench, --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
echo "install-deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
