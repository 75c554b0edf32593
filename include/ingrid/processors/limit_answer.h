// LimitAnswer: the reply of the window and meter limiters (fixed window, sliding log, sliding
// window, leaky meter), in the fields of redis-cell's CL.THROTTLE with `granted` for `limited`.
// A denial is a normal answer, not an error.
#pragma once

#include <cstdint>

#include <ingrid/entry.h>

namespace ingrid {

struct LimitAnswer {
  bool granted = false;
  // The most units the limiter grants at once (its limit or capacity).
  std::int64_t limit = 0;
  // Units that could still be granted now, after this request.
  std::int64_t remaining = 0;
  // Denied: nanoseconds until this request would be granted if nothing else came (kNever if
  // never: it asks for more than the limit). Granted: 0.
  Nanos retryAfter = 0;
  // Nanoseconds until the whole limit is available again (0 if it is now).
  Nanos resetAfter = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(granted, limit, remaining, retryAfter, resetAfter);
  }
  friend bool operator==(const LimitAnswer&, const LimitAnswer&) = default;
};

}  // namespace ingrid
