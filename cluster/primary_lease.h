// PrimaryLease: whether this member may write as the primary of its partitions now (invariant
// 13). A member of a cluster may while the lease the control plane's leader last granted it runs;
// a node without a network (Mode::kStandalone: no listen address, so no other member can take
// its partitions) always may.
//
// Time is an input: every call takes the node's monotonic `now`, so a unit test or the simulator
// drives it. Threads: extend() and clear() on the node's network thread; the rest on any thread
// (the partition workers ask before each write).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ingrid {

class PrimaryLease {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  enum class Mode : std::uint8_t {
    kStandalone,  // no network: writes always allowed, never renewed
    kMember,      // a cluster member: writes allowed while a granted lease runs
  };

  explicit PrimaryLease(Mode mode) noexcept : mode_(mode) {}

  Mode mode() const noexcept { return mode_; }
  // Whether this member may write as a primary at `now`: standalone, or `now` is before the end
  // of the latest lease (a lease ending at t is valid at t - 1 ns and not at t).
  bool validAt(SteadyTime now) const noexcept {
    return mode_ == Mode::kStandalone || now.time_since_epoch().count() < until_.load(kAcquire);
  }
  // A grant answered a request sent at `sent`: the lease runs until `sent + duration`, unless a
  // later grant runs longer already (leases never shrink). A lease held before that had run out
  // at `now` counts a lapse (writes were refused between). Returns whether it was extended.
  bool extend(SteadyTime sent, std::chrono::nanoseconds duration, SteadyTime now) noexcept {
    const std::int64_t until = (sent + duration).time_since_epoch().count();
    std::int64_t cur = until_.load(kAcquire);
    while (cur < until && !until_.compare_exchange_weak(cur, until)) {
    }
    if (cur >= until) return false;
    if (cur != 0 && cur <= now.time_since_epoch().count()) {  // !validAt(now) before
      lapses_.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
  }
  // The identity the lease was granted to ended (a rejoin): no lease until the next grant.
  void clear() noexcept { until_.store(0, std::memory_order_release); }
  // Whether a lease was ever granted (since the last clear()).
  bool everGranted() const noexcept { return until_.load(kAcquire) != 0; }
  // The end of the latest lease (the epoch if none).
  SteadyTime until() const noexcept {
    return SteadyTime(SteadyTime::duration(until_.load(kAcquire)));
  }
  // How long the lease still runs at `now` (zero once run out, or never granted).
  std::chrono::nanoseconds leftAt(SteadyTime now) const noexcept {
    const std::int64_t left = until_.load(kAcquire) - now.time_since_epoch().count();
    return SteadyTime::duration(left > 0 ? left : 0);
  }
  // Renewals that found the lease held before already run out.
  std::uint64_t lapses() const noexcept { return lapses_.load(std::memory_order_relaxed); }

 private:
  static constexpr auto kAcquire = std::memory_order_acquire;
  const Mode mode_;
  std::atomic<std::int64_t> until_{0};  // the steady clock's ticks; 0: no lease
  std::atomic<std::uint64_t> lapses_{0};
};

}  // namespace ingrid
