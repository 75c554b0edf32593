// `ingrid-cli top`: a terminal view of a running cluster, read from the members' /metrics
// (ingrid-node --metrics) and refreshed every interval: per member, requests/s, denials/s, p50
// and p99 of the request duration over the last interval, partitions by state, and the leader.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace ingrid::cli {

// Scrapes `metrics` (HOST:PORT of each member's --metrics) every `interval` and redraws the view,
// `iterations` times (0: until interrupted). Returns the exit status: 0, or 1 if no member
// answered the last scrape.
int top(const std::vector<std::string>& metrics, int iterations,
        std::chrono::milliseconds interval);

}  // namespace ingrid::cli
