#include "cluster/probe_server.h"

#include <httplib.h>

#include "cluster/http_server_thread.h"

namespace ingrid {

ProbeServer::ProbeServer(Node& node) : node_(node), server_(std::make_unique<httplib::Server>()) {
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    std::string text = node_.metricsText();
    for (const auto& source : sources_) text += source();
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  const auto probe = [this](Probe (Node::*check)()) {
    return [this, check](const httplib::Request&, httplib::Response& res) {
      const Probe p = (node_.*check)();
      res.status = p.ok ? 200 : 503;
      res.set_content(p.reason + "\n", "text/plain; charset=utf-8");
    };
  };
  server_->Get("/livez", probe(&Node::liveness));
  server_->Get("/readyz", probe(&Node::readiness));
  server_->Get("/cluster-safe", probe(&Node::clusterSafe));
}

ProbeServer::~ProbeServer() { stop(); }

void ProbeServer::appendMetrics(std::function<std::string()> source) {
  sources_.push_back(std::move(source));
}

Result<std::uint16_t> ProbeServer::start(const std::string& address) {
  return startHttpServer(*server_, thread_, address, "the metrics server");
}

void ProbeServer::stop() { stopHttpServer(*server_, thread_); }

}  // namespace ingrid
