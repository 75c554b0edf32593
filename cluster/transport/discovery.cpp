// dnsSeeds (include/ingrid/discovery.h): a blocking getaddrinfo through Asio's resolver, on its
// own io_context, so it may run on any thread without touching a node's event loops.
#include "ingrid/discovery.h"

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include <algorithm>
#include <utility>

namespace ingrid {

SeedProvider dnsSeeds(std::string host, std::uint16_t port) {
  return [host = std::move(host), port]() -> Result<std::vector<std::string>> {
    if (host.empty()) return Error(Errc::invalid_argument, "seed DNS name is empty");
    if (port == 0) return Error(Errc::invalid_argument, "seed DNS name '" + host + "': port 0");
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    std::error_code ec;
    const auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec) {
      return Error(Errc::unreachable,
                   "seed DNS name '" + host + "' does not resolve: " + ec.message());
    }
    std::vector<std::string> out;
    for (const auto& r : results) {
      const asio::ip::address a = r.endpoint().address();
      std::string text = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
      text += ":" + std::to_string(port);
      if (std::find(out.begin(), out.end(), text) == out.end()) out.push_back(std::move(text));
    }
    if (out.empty()) {
      return Error(Errc::unreachable, "seed DNS name '" + host + "' resolves to no address");
    }
    return out;
  };
}

}  // namespace ingrid
