// CallMetrics: what a CallRouter counts of the calls it sees through (a thin client's, or an
// embedded node's own invocations): each call's outcome once, the retries, and (for the thin
// client) the topology refreshes; and their Prometheus text (ingrid_client_*).
//
// Thread safety: any thread (relaxed atomics: calls end on the network thread, or on a worker
// for an embedded node's local calls).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include <ingrid/error.h>
#include <ingrid/result.h>

namespace ingrid {

struct CallMetrics {
  // Outcomes: 0 an error outside Errc, 1..kErrcMax an Errc, kOk an answer (granted or not).
  static constexpr std::size_t kOk = kErrcMax + 1;
  std::array<std::atomic<std::uint64_t>, kErrcMax + 2> outcomes{};
  std::atomic<std::uint64_t> retries{0};
  std::atomic<std::uint64_t> topologyRefreshes{0};

  void ended(const Result<std::string>& r) noexcept {
    std::size_t i = kOk;
    if (!r) {
      i = r.error().code().category() == errorCategory()
              ? static_cast<std::size_t>(r.error().code().value())
              : 0;
      if (i > kErrcMax) i = 0;
    }
    outcomes[i].fetch_add(1, std::memory_order_relaxed);
  }
};

// ingrid_client_requests_total{outcome} (ok, or an error code's name), ingrid_client_retries_total
// and, with `refreshes`, ingrid_client_topology_refreshes_total, in Prometheus's text format.
std::string callMetricsText(const CallMetrics& m, bool refreshes);

}  // namespace ingrid
