// The decisions a RateLimiter or BatchingRateLimiter counted (counts()), in Prometheus's text
// format, for an application to serve beside Client::metricsText() or Node::metricsText():
//   ingrid_limiter_decisions_total{limiter="NAME",decision="granted|denied|shadow_denied|
//                                  failed_open|failed_closed|error"}
// `limiter` is the application's own name for it (keep the set of names small: never a key).
//
// batcherMetricsText: what a Batcher or BatchingRateLimiter sent (stats()), likewise:
//   ingrid_client_batch_size{batcher="NAME"}  histogram of requests per message sent
//   ingrid_client_batcher_rejected_total{batcher="NAME"}  refused: the key's queue was full
//   ingrid_client_batcher_expired_total{batcher="NAME"}   timed out in the queue, never sent
#pragma once

#include <string>

#include <ingrid/batcher.h>
#include <ingrid/limiter_policy.h>

namespace ingrid {

std::string limiterMetricsText(const std::string& limiter, const LimiterCounts& counts);
std::string batcherMetricsText(const std::string& batcher, const BatcherStats& stats);

}  // namespace ingrid
