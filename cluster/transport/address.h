// "host:port" as the transport and the simulated network write it (an IPv6 host in brackets);
// parseAddress (transport.h) reads it back.
#pragma once

#include <cstdint>
#include <string>

namespace ingrid {

std::string joinAddress(const std::string& host, std::uint16_t port);

}  // namespace ingrid
