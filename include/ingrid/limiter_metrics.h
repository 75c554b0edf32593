// The decisions a RateLimiter or BatchingRateLimiter counted (counts()), in Prometheus's text
// format, for an application to serve beside Client::metricsText() or Node::metricsText():
//   ingrid_limiter_decisions_total{limiter="NAME",decision="granted|denied|shadow_denied|
//                                  failed_open|failed_closed|error"}
// `limiter` is the application's own name for it (keep the set of names small: never a key).
#pragma once

#include <string>

#include <ingrid/limiter_policy.h>

namespace ingrid {

std::string limiterMetricsText(const std::string& limiter, const LimiterCounts& counts);

}  // namespace ingrid
