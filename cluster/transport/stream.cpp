#include "cluster/transport/stream.h"

namespace ingrid {

std::string Stream::remoteName() const {
  if (const Sim* s = std::get_if<Sim>(&stream_)) {
    return s->remoteAddress().empty() ? std::string("?") : s->remoteAddress();
  }
  std::error_code ec;
  const auto endpoint = lowest().remote_endpoint(ec);
  if (ec) return "?";
  const auto address = endpoint.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

std::string Stream::localHost() const {
  if (const Sim* s = std::get_if<Sim>(&stream_)) return s->localHost();
  std::error_code ec;
  const auto endpoint = lowest().local_endpoint(ec);
  return ec ? std::string() : endpoint.address().to_string();
}

std::string Stream::remoteHost() const {
  if (const Sim* s = std::get_if<Sim>(&stream_)) return s->remoteHost();
  std::error_code ec;
  const auto endpoint = lowest().remote_endpoint(ec);
  return ec ? std::string() : endpoint.address().to_string();
}

}  // namespace ingrid
