// Metric cells: counters and fixed-bucket histograms that one thread writes and any thread reads.
//
// The request path keeps its metrics in cells of its own thread (a partition worker's lane, a
// client's I/O thread): adding is a relaxed load and a relaxed store, with no read-modify-write,
// no lock and no allocation; a scrape reads every thread's cells with relaxed loads and adds them
// up. A scrape may see a histogram's sum before its bucket (a few nanoseconds apart): each value
// is monotonic either way, which is what Prometheus's rate() needs.
//
// Thread safety: add()/observe() from the one thread that owns the cell; reads from any thread.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ingrid::metrics {

// A counter written by one thread.
class OwnedCounter {
 public:
  void add(std::uint64_t n = 1) noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

// Upper bounds of a histogram's buckets, in its unit (nanoseconds, or a count); +Inf follows.
template <std::size_t N>
using Bounds = std::array<std::uint64_t, N>;

// Request and acknowledgement latencies: 25 us to 10 s, in nanoseconds.
inline constexpr Bounds<16> kLatencyBoundsNs{
    25'000,      50'000,      100'000,       250'000,       500'000,    1'000'000,
    2'500'000,   5'000'000,   10'000'000,    25'000'000,    50'000'000, 100'000'000,
    250'000'000, 500'000'000, 1'000'000'000, 10'000'000'000};
// Sizes (updates per replication batch, acquires per client batch): 1 to 4096.
inline constexpr Bounds<13> kSizeBounds{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};

// A histogram written by one thread, over `kBounds`: a count per bucket (not cumulative; the
// scrape adds them up) and the sum of the observed values.
template <const auto& kBounds>
class OwnedHistogram {
 public:
  static constexpr std::size_t kBuckets = kBounds.size();
  void observe(std::uint64_t value) noexcept {
    const auto at = std::lower_bound(kBounds.begin(), kBounds.end(), value) - kBounds.begin();
    buckets_[static_cast<std::size_t>(at)].add();
    sum_.add(value);
  }
  static constexpr const auto& bounds() noexcept { return kBounds; }
  // Observations in bucket i (i == kBuckets: above every bound).
  std::uint64_t bucket(std::size_t i) const noexcept { return buckets_[i].value(); }
  std::uint64_t sum() const noexcept { return sum_.value(); }

 private:
  std::array<OwnedCounter, kBounds.size() + 1> buckets_{};
  OwnedCounter sum_;
};

using LatencyHistogram = OwnedHistogram<kLatencyBoundsNs>;
using SizeHistogram = OwnedHistogram<kSizeBounds>;

// The sum of histograms of the same bounds, as a scrape reports them: cumulative bucket counts,
// the last one (+Inf) being the count.
template <class H>
struct HistogramTotal {
  std::array<std::uint64_t, H::kBuckets + 1> cumulative{};
  std::uint64_t sum = 0;
  void add(const H& h) noexcept {
    std::uint64_t running = 0;
    for (std::size_t i = 0; i <= H::kBuckets; ++i) {
      running += h.bucket(i);
      cumulative[i] += running;
    }
    sum += h.sum();
  }
  std::uint64_t count() const noexcept { return cumulative.back(); }
  static constexpr const auto& bounds() noexcept { return H::bounds(); }
};

}  // namespace ingrid::metrics
