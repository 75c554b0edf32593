#include <ingrid/limiter_metrics.h>

#include <utility>
#include <vector>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

namespace ingrid {

std::string limiterMetricsText(const std::string& limiter, const LimiterCounts& counts) {
  prometheus::MetricFamily f{"ingrid_limiter_decisions_total",
                             "What a rate limiter told its callers: granted, denied, "
                             "shadow_denied (dry-run: denied, reported granted), failed_open and "
                             "failed_closed (the cluster could not answer), error",
                             prometheus::MetricType::Counter,
                             {}};
  const std::pair<const char*, std::uint64_t> decisions[] = {{"granted", counts.granted},
                                                             {"denied", counts.denied},
                                                             {"shadow_denied", counts.shadowDenied},
                                                             {"failed_open", counts.failedOpen},
                                                             {"failed_closed", counts.failedClosed},
                                                             {"error", counts.errors}};
  for (const auto& [decision, n] : decisions) {
    prometheus::ClientMetric m;
    m.label = {{"decision", decision}, {"limiter", limiter}};
    m.counter.value = static_cast<double>(n);
    f.metric.push_back(std::move(m));
  }
  return prometheus::TextSerializer().Serialize(std::vector<prometheus::MetricFamily>{f});
}

}  // namespace ingrid
