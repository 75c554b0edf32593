// RlsLoad: ShouldRateLimit calls on `ingrid-node --rls` from a closed loop, through gRPC's
// callback API and the stubs generated from cluster/rls_gateway/proto, for bench_vs_redis. Built
// only with INGRID_RLS_GATEWAY (gRPC's types stay inside rls_load.cpp).
//
// Thread safety: one run() at a time. Completions run on gRPC's threads, which inherit the
// creating thread's CPU affinity.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "closed_loop.h"

namespace ingrid::bench {

// The --rls-config the calls need: domain "bench", descriptor key "user" (any value, each its own
// fixed window) limited to 4294967295 per day, so that no call in a run is over.
std::string rlsBenchConfig();

class RlsLoad {
 public:
  // Talks to `address` ("host:port") over channels of its own, each one HTTP/2 connection that
  // carries at most kStreamsPerChannel calls at once (the gateway's default stream cap is 100).
  explicit RlsLoad(std::string address);
  ~RlsLoad();
  RlsLoad(const RlsLoad&) = delete;
  RlsLoad& operator=(const RlsLoad&) = delete;

  static constexpr int kStreamsPerChannel = 64;

  // `inflight` chains, each one call at a time, for `seconds`: call i of chain c asks for one hit
  // on the descriptor {user: value(c, i)}. A call that fails or is answered other than OK counts
  // as a failure. Dies (exit 1) if a channel does not connect within 10 s.
  LoopResult run(int inflight, double seconds,
                 const std::function<const std::string&(int chain, std::uint64_t i)>& value);
  // One call for each of `values`, 64 at a time; returns the calls that failed.
  std::uint64_t fill(const std::vector<std::string>& values);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingrid::bench
