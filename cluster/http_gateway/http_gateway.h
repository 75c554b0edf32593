// HttpGateway: gubernator's HTTP/JSON API in front of a Node, for clients that already speak it:
//   POST /v1/GetRateLimits   each request runs on its limiter (gubernator_json.h has the mapping,
//                            docs/gateways.md the rules); 200 with one response per request, in
//                            order, and the RateLimit and RateLimit-Policy header fields (one
//                            item per request that ran); 400 naming the field and the reason
//                            for a body that is not such a request (the node keeps serving).
//   GET /v1/HealthCheck      {"status": "healthy"|"unhealthy", "message", "peer_count"} from
//                            the node's readiness.
// `ingrid-node --http` runs one; an embedder constructs one with its Node, as RespServer.
//
// Thread safety: start() and stop() from one thread (the owner's). Requests are served on
// cpp-httplib's pool (HttpGatewayOptions::threads), each asking the node with the blocking
// Node::invoke (never a partition worker's thread). The Node must outlive the gateway and stay
// started while it serves (a stopped node's answers are errors, in each response's `error`).
// Stop sequence: stop() stops accepting, lets the requests in progress finish, and joins the
// listening thread. The destructor calls stop().
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <ingrid/node.h>
#include <ingrid/result.h>

namespace httplib {
class Server;
}

namespace ingrid {

struct HttpGatewayOptions {
  // Connections served at once: each open (keep-alive) connection holds one thread of the pool;
  // more wait for a thread. Default: 16.
  std::size_t threads = 16;
  // Bytes of one request body; a longer one is answered 413. Default: 1048576 (1 MiB).
  std::size_t maxBodyBytes = 1024 * 1024;
  // A kept-alive connection idle this long is closed, and so is one whose request does not
  // arrive within it. Default: 60 s.
  std::chrono::milliseconds idleTimeout{60'000};
};

// What a gateway has answered since it started; any thread.
struct HttpGatewayCounts {
  std::uint64_t calls = 0;       // GetRateLimits answered 200
  std::uint64_t refused = 0;     // GetRateLimits answered 400
  std::uint64_t requests = 0;    // requests in those calls' lists that ran on a limiter
  std::uint64_t overLimit = 0;   // of those, answered OVER_LIMIT
  std::uint64_t itemErrors = 0;  // requests answered with an error
};

class HttpGateway {
 public:
  explicit HttpGateway(Node& node, HttpGatewayOptions options = {});
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;
  ~HttpGateway();

  // Listens on "host:port" (port 0: a free one) and serves until stop(). Returns the port, or an
  // error naming the address and the reason. Once per gateway.
  Result<std::uint16_t> start(const std::string& address);
  // Idempotent.
  void stop();
  HttpGatewayCounts counts() const noexcept;
  // counts() in Prometheus's text format (ingrid_http_gateway_*), for ingrid-node's /metrics.
  std::string metricsText() const;

 private:
  void getRateLimits(const std::string& body, int& status, std::string& out, std::string& policy,
                     std::string& rateLimit);

  Node& node_;
  const HttpGatewayOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<std::uint64_t> calls_{0}, refused_{0}, requests_{0}, overLimit_{0}, itemErrors_{0};
};

}  // namespace ingrid
