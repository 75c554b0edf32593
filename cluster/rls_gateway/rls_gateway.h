// RlsGateway: Envoy's Rate Limit Service v3 (envoy.service.ratelimit.v3.RateLimitService/
// ShouldRateLimit) over gRPC in front of a Node, with descriptor limits from a file in
// envoyproxy/ratelimit's YAML shape (rls_config.h). Each limited descriptor is one fixed-window
// acquire on the node (rls_mapping.h); docs/gateways.md "Envoy RLS v3" has the rules and answers.
// `ingrid-node --rls` runs one; an embedder constructs one with its Node, as HttpGateway.
//
// Thread safety: start() and stop() from one thread (the owner's); reload(), config(), counts()
// and metricsText() from any thread. Calls are served with gRPC's callback API: a gRPC thread
// maps the request and sends the acquires with Node::invokeAsync, and the last answer (on the
// node's completion pool) finishes the call, so no gRPC thread waits for a limiter. The
// configuration is an immutable snapshot swapped whole by reload(); a call uses the one it
// started with. The Node must outlive the gateway and stay started while it serves.
// Stop sequence: stop() refuses new calls (GOAWAY: Envoy moves to other hosts), waits for the
// calls in progress to be answered, and joins gRPC's threads. After shutdownGrace it cancels
// them, but a cancelled call still ends only when its node answers arrive (a call is finished by
// its last answer), so stop() takes at most shutdownGrace + the node's requestTimeout while the
// node serves: stop the gateway before the node. The destructor calls stop().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <ingrid/node.h>
#include <ingrid/result.h>

#include "cluster/rls_gateway/rls_config.h"

namespace ingrid {

struct RlsGatewayOptions {
  // The descriptor configuration (envoyproxy/ratelimit's YAML shape); read by start() and by
  // every reload(). Required.
  std::string configFile;
  // Bytes of one request message; a longer one is refused by gRPC with RESOURCE_EXHAUSTED.
  // Default: 1048576 (1 MiB).
  std::size_t maxMessageBytes = 1024 * 1024;
  // Calls at once on one HTTP/2 connection (gRPC's max concurrent streams). Default: 100.
  std::uint32_t maxConcurrentStreams = 100;
  // Calls in progress at once over all connections; one more is answered RESOURCE_EXHAUSTED.
  // Default: 4096.
  std::size_t maxInFlight = 4096;
  // How long stop() lets calls in progress finish before cancelling them; a cancelled call
  // still waits for its node answers (NodeOptions::requestTimeout at most). Default: 5 s.
  std::chrono::milliseconds shutdownGrace{5'000};
};

// What a gateway has answered since it started; any thread.
struct RlsGatewayCounts {
  std::uint64_t ok = 0;            // calls answered overall OK
  std::uint64_t overLimit = 0;     // calls answered overall OVER_LIMIT
  std::uint64_t refused = 0;       // calls refused INVALID_ARGUMENT or RESOURCE_EXHAUSTED (past
                                   // maxInFlight); not messages gRPC refuses for their size
  std::uint64_t errors = 0;        // calls answered UNAVAILABLE (the node's error)
  std::uint64_t descriptors = 0;   // descriptors answered
  std::uint64_t shadowOver = 0;    // shadow-mode descriptors that were over, answered OK
  std::uint64_t reloadsOk = 0;     // reload() that installed a new configuration
  std::uint64_t reloadsError = 0;  // reload() that kept the old one
};

class RlsGateway {
 public:
  explicit RlsGateway(Node& node, RlsGatewayOptions options);
  RlsGateway(const RlsGateway&) = delete;
  RlsGateway& operator=(const RlsGateway&) = delete;
  ~RlsGateway();

  // Loads the configuration, then listens on "host:port" (port 0: a free one) and serves until
  // stop(). Returns the port, or an error naming the file or the address and the reason. Once.
  Result<std::uint16_t> start(const std::string& address);
  // Idempotent.
  void stop();
  // Reads options.configFile again: a good file replaces the configuration for calls that start
  // after it (returns its rule count); a bad one keeps the old and returns the error naming the
  // file, the line and the reason. Counted in ingrid_rls_config_reloads_total{result}. Before
  // start() it loads the file too (start() reads it again).
  Result<std::size_t> reload();
  // The configuration in use (nullptr before start()).
  RlsConfigPtr config() const;
  RlsGatewayCounts counts() const noexcept;
  // counts() in Prometheus's text format (ingrid_rls_*), for ingrid-node's /metrics.
  std::string metricsText() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ingrid
