// ProbeServer: serves a Node's metrics and probes over HTTP for `ingrid-node --metrics`:
//   GET /metrics        Prometheus text format (Node::metricsText)
//   GET /livez          200 while the node's event loops turn (Node::liveness)
//   GET /readyz         200 for a member with a valid lease and its partitions installed
//   GET /cluster-safe   200 when nothing migrates and every replica is complete
// A probe that fails answers 503 with its one-line reason. Embedders that run their own HTTP
// server mount the same Node functions there instead.
//
// Thread safety: start() and stop() from one thread; requests are served on cpp-httplib's own
// threads, which only call the Node's thread-safe functions.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/node.h>
#include <ingrid/result.h>

namespace httplib {
class Server;
}

namespace ingrid {

class ProbeServer {
 public:
  explicit ProbeServer(Node& node);
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;
  ~ProbeServer();

  // Listens on "host:port" (port 0: a free one) and serves until stop(). Returns the port, or
  // an error naming the address and the reason.
  Result<std::uint16_t> start(const std::string& address);
  void stop();
  // Appends what `source` returns (Prometheus text: a gateway's metrics) to every /metrics
  // answer, called on a request's thread. REQUIRES: before start().
  void appendMetrics(std::function<std::string()> source);

 private:
  Node& node_;
  std::vector<std::function<std::string()>> sources_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace ingrid
