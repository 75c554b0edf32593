// The exact sliding log: at most `limit` units in any window (now - window, now], from a log of
// the grants still inside the window (at most `limit` records, grants at one instant merged).
// docs/sliding-window.md is the specification.
//
// Thread safety: pure value types and functions. The processors are pure (entry, args, now).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/processors/limit_answer.h>
#include <ingrid/processors/limiter_support.h>

namespace ingrid {

struct SlidingLogParams {
  // The largest limit a log takes: its state holds up to this many records of 16 bytes (64 KiB),
  // all read and written by every request. Larger limits want the sliding window counter.
  static constexpr std::int64_t kMaxLimit = 4096;

  // Units granted in any window. REQUIRES: 1 <= limit <= kMaxLimit.
  std::int64_t limit = 0;
  // Window length in nanoseconds. REQUIRES: > 0.
  Nanos window = 0;

  std::optional<std::string> invalidReason() const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(limit, window);
  }
  friend bool operator==(const SlidingLogParams&, const SlidingLogParams&) = default;
};

// Units granted at one instant.
struct LogRecord {
  Nanos at = 0;
  // REQUIRES: 1 <= count <= SlidingLogParams::kMaxLimit.
  std::int64_t count = 0;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(at, count);
  }
  friend bool operator==(const LogRecord&, const LogRecord&) = default;
};

// The grants inside the window, oldest first, `at` strictly increasing.
struct SlidingLogState {
  std::vector<LogRecord> records;

  template <class Archive>
  void save(Archive& ar) const {
    ar(records);
  }
  template <class Archive>
  void load(Archive& ar) {
    records.resize(loadBoundedSize(ar, SlidingLogParams::kMaxLimit, "SlidingLogState.records"));
    for (auto& r : records) ar(r);
  }
  friend bool operator==(const SlidingLogState&, const SlidingLogState&) = default;
};

// The math of docs/sliding-window.md (the exact log), for limiter_support.h's runners.
struct SlidingLog {
  using Params = SlidingLogParams;
  using State = SlidingLogState;
  using Answer = LimitAnswer;
  static constexpr std::string_view kWhat = "a sliding log";
  static constexpr std::int64_t kMinQuantity = 1;

  static State create(const Params&, Nanos) { return State{}; }
  static std::optional<std::string> invalidState(const State& s);
  // REQUIRES: valid params, quantity > 0, a state without invalidState().
  static Answer take(State& s, const Params& p, std::int64_t quantity, Nanos now);
  static bool granted(const Answer& a) noexcept { return a.granted; }
  static Nanos expiresAt(const State& s, const Params& p) noexcept {
    return s.records.empty() ? 0
                             : limiter::saturate(limiter::int128{s.records.back().at} + p.window);
  }
};

struct SlidingLogNames {
  static constexpr std::string_view kSingle = "ingrid.SlidingLogAcquire";
  static constexpr std::string_view kBatch = "ingrid.SlidingLogBatchAcquire";
};

// Takes `quantity` units if the log's window has room for them.
using SlidingLogAcquire = limiter::LimiterRequest<SlidingLog, SlidingLogNames>;

// Several acquires on one log, in order, read once and written once.
using SlidingLogBatchAcquire = limiter::LimiterBatch<SlidingLog, SlidingLogNames>;

}  // namespace ingrid
