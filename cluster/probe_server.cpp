#include "cluster/probe_server.h"

#include <httplib.h>

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
  const auto colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  const std::string digits = colon == std::string::npos ? "" : address.substr(colon + 1);
  int port = -1;
  if (!host.empty() && !digits.empty() && digits.size() <= 5 &&
      digits.find_first_not_of("0123456789") == std::string::npos && std::stoi(digits) <= 65535) {
    port = std::stoi(digits);
  }
  if (port < 0) {
    return Error(Errc::invalid_configuration,
                 "metrics address '" + address + "' is not HOST:PORT (port 0 to 65535)");
  }
  if (port == 0) {
    port = server_->bind_to_any_port(host);
  } else if (!server_->bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return Error(Errc::invalid_configuration,
                 "cannot listen for metrics on " + address + " (address in use, or not local)");
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() is a no-op until the server runs (cpp-httplib 0.11): wait for that, bounded.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server_->is_running()) {
    stop();
    return Error(Errc::invalid_configuration,
                 "the metrics server on " + address + " did not start");
  }
  return static_cast<std::uint16_t>(port);
}

void ProbeServer::stop() {
  if (!thread_.joinable()) return;
  // Until the listen loop has ended: a stop() that came before it ran is repeated (bounded).
  for (int i = 0; i < 5000 && server_->is_running() == false && thread_.joinable(); ++i) {
    server_->stop();
    if (!server_->is_running()) break;
  }
  server_->stop();
  thread_.join();
}

}  // namespace ingrid
