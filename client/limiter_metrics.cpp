#include <ingrid/limiter_metrics.h>

#include <cstdint>
#include <limits>
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

std::string batcherMetricsText(const std::string& batcher, const BatcherStats& stats) {
  std::vector<prometheus::MetricFamily> families;
  {
    prometheus::MetricFamily f{"ingrid_client_batch_size",
                               "Requests per message a batcher sent: 1 is a single request, "
                               "more a batch that took one round trip",
                               prometheus::MetricType::Histogram,
                               {}};
    prometheus::ClientMetric m;
    m.label = {{"batcher", batcher}};
    std::uint64_t cumulative = 0;
    double sum = 0;
    for (std::size_t i = 0; i < stats.sendSizes.size(); ++i) {
      cumulative += stats.sendSizes[i];
      const bool last = i == BatcherStats::kSendSizeBounds.size();
      prometheus::ClientMetric::Bucket b;
      b.cumulative_count = cumulative;
      b.upper_bound = last ? std::numeric_limits<double>::infinity()
                           : static_cast<double>(BatcherStats::kSendSizeBounds[i]);
      m.histogram.bucket.push_back(b);
    }
    // The requests that went in sends: singles plus batched ones (exact, unlike the buckets).
    sum = static_cast<double>(stats.sends - stats.batches + stats.batchedRequests);
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = sum;
    f.metric.push_back(std::move(m));
    families.push_back(std::move(f));
  }
  const std::pair<const char*, std::pair<const char*, std::uint64_t>> counters[] = {
      {"ingrid_client_batcher_rejected_total",
       {"Requests refused at once: their key's queue was full (maxQueuedPerKey)", stats.rejected}},
      {"ingrid_client_batcher_expired_total",
       {"Requests that waited past queueTimeout in their key's queue and were never sent",
        stats.expired}}};
  for (const auto& [name, help] : counters) {
    prometheus::MetricFamily f{name, help.first, prometheus::MetricType::Counter, {}};
    prometheus::ClientMetric m;
    m.label = {{"batcher", batcher}};
    m.counter.value = static_cast<double>(help.second);
    f.metric.push_back(std::move(m));
    families.push_back(std::move(f));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace ingrid
