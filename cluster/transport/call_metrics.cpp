#include "cluster/transport/call_metrics.h"

#include <utility>
#include <vector>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

namespace ingrid {
namespace {

prometheus::MetricFamily counter(std::string name, std::string help, double value) {
  prometheus::MetricFamily f{std::move(name), std::move(help), prometheus::MetricType::Counter, {}};
  f.metric.emplace_back();
  f.metric.back().counter.value = value;
  return f;
}

}  // namespace

std::string callMetricsText(const CallMetrics& m, bool refreshes) {
  std::vector<prometheus::MetricFamily> out;
  prometheus::MetricFamily requests{
      "ingrid_client_requests_total",
      "Calls this client (or embedded node) saw through, by "
      "outcome: ok (answered, granted or not) or an error code's name",
      prometheus::MetricType::Counter,
      {}};
  for (std::size_t i = 0; i < m.outcomes.size(); ++i) {
    const std::uint64_t n = m.outcomes[i].load(std::memory_order_relaxed);
    if (n == 0 && i != CallMetrics::kOk) continue;  // error outcomes once they happen
    prometheus::ClientMetric c;
    c.label.push_back(
        {"outcome", i == CallMetrics::kOk ? "ok" : std::string(errcName(static_cast<int>(i)))});
    c.counter.value = static_cast<double>(n);
    requests.metric.push_back(std::move(c));
  }
  out.push_back(std::move(requests));
  out.push_back(counter("ingrid_client_retries_total",
                        "Attempts sent again (a redirect, a partition moving, no answer)",
                        static_cast<double>(m.retries.load(std::memory_order_relaxed))));
  if (refreshes) {
    out.push_back(
        counter("ingrid_client_topology_refreshes_total",
                "Rounds of asking the members for a newer topology (a route looked stale)",
                static_cast<double>(m.topologyRefreshes.load(std::memory_order_relaxed))));
  }
  return prometheus::TextSerializer().Serialize(out);
}

}  // namespace ingrid
