// Seed discovery: where a joining member finds its cluster when the members' addresses are not
// known in advance (pods behind a Kubernetes headless service, an autoscaling group). A
// SeedProvider returns the candidates, "host:port" each; a Node calls it before each round of
// join attempts (NodeOptions::seedProvider), on the thread running start(), and again when it
// rejoins. It may block (a DNS query), and should return within a few seconds: the join waits.
// An error is reported in start()'s error if no candidate ever answers.
//
// dnsSeeds() is the DNS mode: every A and AAAA record of a name (a headless service lists one
// per ready pod, or every pod with publishNotReadyAddresses). Other sources (the Kubernetes
// endpoints API, a cloud's instance list) are a SeedProvider of the embedder's own: a function
// returning the current addresses.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ingrid/result.h"

namespace ingrid {

using SeedProvider = std::function<Result<std::vector<std::string>>()>;

// Resolves `host` (system resolver: /etc/hosts, then DNS) at each call; every address it
// resolves to, with `port`, is a candidate ("a.b.c.d:port", "[v6]:port"), in the resolver's
// order, without duplicates. Errors: invalid_argument (an empty host, port 0), unreachable (the
// name does not resolve: the resolver's reason, naming the host).
SeedProvider dnsSeeds(std::string host, std::uint16_t port);

}  // namespace ingrid
