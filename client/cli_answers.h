// How ingrid-cli reads limiters' answers and stored states: whether an answer granted, its fields
// as one line (`granted yes|no` first), and an entry's state read as a given limiter's.
#pragma once

#include <string>

#include <ingrid/limiter_request.h>
#include <ingrid/processors/composite_bucket.h>
#include <ingrid/processors/concurrency.h>
#include <ingrid/processors/fixed_window.h>
#include <ingrid/processors/gcra.h>
#include <ingrid/processors/leaky_bucket.h>
#include <ingrid/processors/sliding_log.h>
#include <ingrid/processors/sliding_window.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/processors/warmup.h>

namespace ingrid::cli {

// The limiters --limiter names, in kLimiterNames' order (include/ingrid/limiter_request.h).
using Limiter = ingrid::LimiterKind;
using ingrid::kLimiterNames;

inline bool isGranted(const AcquireAnswer& r) { return r.granted; }
inline bool isGranted(const GcraAnswer& r) { return r.granted(); }
inline bool isGranted(const LimitAnswer& r) { return r.granted; }
inline bool isGranted(const ShaperAnswer& r) { return r.granted; }
inline bool isGranted(const LeaseAnswer& r) { return r.granted; }
inline bool isGranted(const ReserveAnswer& r) { return r.granted; }
inline bool isGranted(const WarmupAnswer& r) { return r.granted; }
inline bool isGranted(const CompositeAnswer& r) { return r.granted; }

// The answer's fields on one line, `granted yes|no` first; durations in whole microseconds.
std::string describe(const AcquireAnswer& r);
std::string describe(const GcraAnswer& r);
std::string describe(const LimitAnswer& r);
std::string describe(const ShaperAnswer& r);
std::string describe(const ReserveAnswer& r);
std::string describe(const WarmupAnswer& r);
std::string describe(const CompositeAnswer& r);
std::string describe(const LeaseAnswer& r);

// Prints `value` read as `limiter`'s stored state; returns 0, or 1 if it is not one (saying so).
// `warmup`: a token bucket with --warmup-ms, whose state is a warm-up limiter's.
int describeState(Limiter limiter, bool warmup, const std::string& value);

}  // namespace ingrid::cli
