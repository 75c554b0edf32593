// Runs a cpp-httplib server on a thread of its own, for the HTTP servers of ingrid-node (the
// probes, cluster/probe_server.cpp; the HTTP gateway, cluster/http_gateway/). Internal,
// header-only: each user links cpp-httplib itself.
//
// Thread safety: startHttpServer() and stopHttpServer() of one server from one thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include <ingrid/result.h>

namespace ingrid {

// Binds `server` to `address` ("HOST:PORT", port 0: a free one) and runs its listen loop on
// `thread`, until stopHttpServer(). Returns the port once the loop runs, or an
// invalid_configuration error naming `what` (the server, as "the metrics server"), the address
// and the reason. REQUIRES: `thread` runs nothing.
inline Result<std::uint16_t> startHttpServer(httplib::Server& server, std::thread& thread,
                                             const std::string& address, const std::string& what) {
  const auto colon = address.rfind(':');
  const std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  const std::string digits = colon == std::string::npos ? "" : address.substr(colon + 1);
  int port = -1;
  if (!host.empty() && !digits.empty() && digits.size() <= 5 &&
      digits.find_first_not_of("0123456789") == std::string::npos && std::stoi(digits) <= 65535) {
    port = std::stoi(digits);
  }
  if (port < 0 || thread.joinable()) {
    return Error(Errc::invalid_configuration,
                 what + ": '" + address +
                     "' is not HOST:PORT (port 0 to 65535), or the server was started already");
  }
  if (port == 0) {
    port = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return Error(Errc::invalid_configuration,
                 what + " cannot listen on " + address + " (address in use, or not local)");
  }
  thread = std::thread([&server] { server.listen_after_bind(); });
  // stop() is a no-op until the server runs (cpp-httplib 0.11): wait for that, bounded.
  for (int i = 0; i < 5000 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!server.is_running()) {
    server.stop();
    thread.join();
    return Error(Errc::invalid_configuration, what + " on " + address + " did not start");
  }
  return static_cast<std::uint16_t>(port);
}

// Ends the listen loop startHttpServer() started and joins its thread; nothing if none runs.
inline void stopHttpServer(httplib::Server& server, std::thread& thread) {
  if (!thread.joinable()) return;
  server.stop();  // takes effect: startHttpServer() returned once the loop ran
  thread.join();
}

}  // namespace ingrid
