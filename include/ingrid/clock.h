// Clocks: where a node reads "now" (invariant 8).
//
// Time is wall-clock nanoseconds since the Unix epoch, as a signed 64-bit count, because bucket
// timestamps travel between nodes. Code that consumes it tolerates a clock that steps backwards.
// Thread safety: every Clock is safe to call from any thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace ingrid {

// Nanoseconds; a duration or, for timestamps, nanoseconds since the Unix epoch.
using Nanos = std::int64_t;

inline constexpr Nanos kNanosPerSecond = 1'000'000'000;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Nanos now() const noexcept = 0;
};

// std::chrono::system_clock in nanoseconds.
class SystemClock final : public Clock {
 public:
  Nanos now() const noexcept override;
};

// A clock that moves only when told to; for tests and simulations.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = 0) noexcept : now_(start) {}
  Nanos now() const noexcept override { return now_.load(std::memory_order_acquire); }
  void set(Nanos t) noexcept { now_.store(t, std::memory_order_release); }
  void advance(Nanos d) noexcept { now_.fetch_add(d, std::memory_order_acq_rel); }

 private:
  std::atomic<Nanos> now_;
};

}  // namespace ingrid
