// RequestMetrics: what one partition worker counts of the requests it runs as primary and of the
// replication it sends, in cells of its own (grid/metric_cells.h): no lock, no allocation.
//
// Thread safety: written only by its worker (DataPlane::Lane); read by scrapes from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <ingrid/error.h>
#include <ingrid/processors/registry.h>
#include <ingrid/result.h>

#include "grid/metric_cells.h"

namespace ingrid {

struct RequestMetrics {
  // Outcomes, per processor: 0 an error outside Errc, 1..kErrcMax an Errc, then granted, denied
  // and answered (neither grants nor denies).
  static constexpr std::size_t kGranted = kErrcMax + 1;
  static constexpr std::size_t kDenied = kErrcMax + 2;
  static constexpr std::size_t kAnswered = kErrcMax + 3;
  static constexpr std::size_t kOutcomes = kErrcMax + 4;

  // The label of outcome i.
  static std::string_view outcomeName(std::size_t i) noexcept {
    if (i == kGranted) return "granted";
    if (i == kDenied) return "denied";
    if (i == kAnswered) return "ok";
    return errcName(static_cast<int>(i));
  }
  // The outcome of an answer with `verdict`, or of an error.
  static std::size_t outcomeOf(ProcessorVerdict verdict) noexcept {
    return verdict.kind == ProcessorVerdict::kGranted  ? kGranted
           : verdict.kind == ProcessorVerdict::kDenied ? kDenied
                                                       : kAnswered;
  }
  static std::size_t outcomeOf(const Error& e) noexcept {
    const int v = e.code().value();  // a processor may throw any code: only Errc's are named
    return e.code().category() == errorCategory() && v >= 1 && v <= kErrcMax
               ? static_cast<std::size_t>(v)
               : 0;
  }

  explicit RequestMetrics(std::size_t processorCount)
      : processors(processorCount),
        outcomes(processorCount * kOutcomes),
        nearLimit(processorCount),
        duration(processorCount) {}

  // One request of processor `index` (< processors) ended with `outcome` after `nanos`.
  void count(std::size_t index, std::size_t outcome, bool nearLimitToo,
             std::uint64_t nanos) noexcept {
    outcomes[index * kOutcomes + outcome].add();
    if (nearLimitToo) nearLimit[index].add();
    duration[index].observe(nanos);
  }

  const std::size_t processors;
  std::vector<metrics::OwnedCounter> outcomes;      // [processor * kOutcomes + outcome]
  std::vector<metrics::OwnedCounter> nearLimit;     // [processor]
  std::vector<metrics::LatencyHistogram> duration;  // [processor]: run to answer, on the primary
  metrics::LatencyHistogram replicationAck;         // a batch's send to its acknowledgement
  metrics::SizeHistogram updatesPerBatch;           // updates in each batch sent
};

// The sum of every worker's RequestMetrics, as a scrape reads it.
struct RequestMetricsTotal {
  explicit RequestMetricsTotal(std::size_t processors)
      : outcomes(processors * RequestMetrics::kOutcomes),
        nearLimit(processors),
        duration(processors) {}
  void add(const RequestMetrics& m) {
    for (std::size_t i = 0; i < outcomes.size() && i < m.outcomes.size(); ++i) {
      outcomes[i] += m.outcomes[i].value();
    }
    for (std::size_t i = 0; i < nearLimit.size() && i < m.nearLimit.size(); ++i) {
      nearLimit[i] += m.nearLimit[i].value();
      duration[i].add(m.duration[i]);
    }
    replicationAck.add(m.replicationAck);
    updatesPerBatch.add(m.updatesPerBatch);
  }
  std::vector<std::uint64_t> outcomes;
  std::vector<std::uint64_t> nearLimit;
  std::vector<metrics::HistogramTotal<metrics::LatencyHistogram>> duration;
  metrics::HistogramTotal<metrics::LatencyHistogram> replicationAck;
  metrics::HistogramTotal<metrics::SizeHistogram> updatesPerBatch;
};

}  // namespace ingrid
