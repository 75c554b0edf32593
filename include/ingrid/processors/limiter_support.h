// What the limiter processors (gcra.h, fixed_window.h, sliding_log.h, sliding_window.h,
// leaky_bucket.h) share: 128-bit arithmetic helpers that saturate instead of overflowing, and the
// one skeleton of a single and a batched request (validate, read the state, decide, write).
//
// An algorithm A plugs into runLimiter/runLimiterBatch with:
//   using Params, State, Answer;               Params has invalidReason()
//   static constexpr std::string_view kWhat;   "a GCRA limiter", for "entry does not hold ..."
//   static constexpr std::int64_t kMinQuantity; 0 if a quantity of 0 is a read, else 1
//   static State create(const Params&, Nanos now);          the state an absent entry means
//   static std::optional<std::string> invalidState(const State&);  stored bytes no limiter holds
//   static Answer take(State&, const Params&, std::int64_t quantity, Nanos now);
//   static bool granted(const Answer&);
//   static Nanos expiresAt(const State&, const Params&);   when the state equals an absent one
// take() may bring the state up to `now` (a new window, old records dropped) and changes it
// otherwise only when it grants. The entry is written only when some request with a quantity > 0
// was granted: a denial, or a read, leaves the entry as it was (a later take() redoes the same
// catching up, and for every limiter here an absent entry and the state create() makes are the
// same limiter).
//
// LimiterRequest<A, Names> and LimiterBatch<A, Names> are the two processors every such limiter
// has (its single request and its batch), so that a limiter's header names them and documents
// them without repeating them:
//   struct FixedWindowNames { static constexpr std::string_view kSingle =
//   "ingrid.FixedWindowAcquire",
//                             kBatch = "ingrid.FixedWindowBatchAcquire"; };
//   using FixedWindowAcquire = limiter::LimiterRequest<FixedWindow, FixedWindowNames>;
// Their encodings are (params, quantity) and (params, quantities).
//
// Thread safety: pure functions; the runners have process()'s context (one partition's executor).
#pragma once

#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>

namespace ingrid::limiter {

// Signed 128-bit intermediates. __extension__ keeps -Wpedantic quiet about the type.
__extension__ typedef __int128 int128;

inline constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t kMinInt64 = std::numeric_limits<std::int64_t>::min();
// Most requests one batch carries; a longer list is refused when it is decoded.
inline constexpr std::size_t kMaxBatch = 65536;

// `v` clamped to int64: at or above INT64_MAX it is kNever.
constexpr std::int64_t saturate(int128 v) noexcept {
  return v >= kMaxInt64 ? kNever : v <= kMinInt64 ? kMinInt64 : static_cast<std::int64_t>(v);
}
// Rounded towards minus infinity, and towards plus infinity. REQUIRES: b > 0.
constexpr int128 floorDiv(int128 a, int128 b) noexcept {
  return a / b - ((a % b != 0 && a < 0) ? 1 : 0);
}
constexpr int128 ceilDiv(int128 a, int128 b) noexcept { return -floorDiv(-a, b); }
// Windows of length `window` aligned to time 0: [k * window, (k + 1) * window). The start of the
// one holding `now`, clamped at INT64_MIN (the earliest window may begin before int64 time does:
// it is cut there). REQUIRES: window > 0.
constexpr Nanos windowStart(Nanos now, Nanos window) noexcept {
  return saturate(floorDiv(now, window) * window);
}
// The end of the window holding `at` (128-bit: it may pass INT64_MAX). REQUIRES: window > 0.
constexpr int128 windowEnd(Nanos at, Nanos window) noexcept {
  return (floorDiv(at, window) + 1) * window;
}
// A duration from `now` to `at`, 0 if `at` is not later, saturating at kNever.
constexpr Nanos until(int128 at, Nanos now) noexcept { return at > now ? saturate(at - now) : 0; }

inline void checkParams(const std::optional<std::string>& reason) {
  if (reason) throwInvalidArgument(*reason);
}

inline void checkQuantity(std::int64_t q, std::int64_t min, const std::string& field) {
  if (q < min) {
    throwInvalidArgument(field + " must be " + (min == 0 ? ">= 0" : "> 0") + ", got " +
                         std::to_string(q));
  }
}

inline void checkQuantities(const std::vector<std::int64_t>& qs, std::int64_t min,
                            const std::string& field) {
  if (qs.empty()) throwInvalidArgument(field + " must hold at least one request");
  if (qs.size() > kMaxBatch) {
    throwInvalidArgument(field + " has " + std::to_string(qs.size()) +
                         " requests, more than the limit of " + std::to_string(kMaxBatch));
  }
  for (std::size_t i = 0; i < qs.size(); ++i) {
    checkQuantity(qs[i], min, field + "[" + std::to_string(i) + "]");
  }
}

// Loads a batch's list of quantities, refusing more than kMaxBatch before allocating.
template <class Archive>
void loadQuantities(Archive& ar, std::vector<std::int64_t>& qs, const char* what) {
  qs.resize(loadBoundedSize(ar, kMaxBatch, what));
  for (auto& q : qs) ar(q);
}

template <class A>
std::optional<typename A::State> readState(const MutableEntry& entry) {
  if (!entry.exists()) return std::nullopt;
  typename A::State state{};
  try {
    decodeInto(entry.value(), state);
  } catch (const std::exception& e) {
    throw ProcessorError(Errc::processor_failed,
                         "entry does not hold " + std::string(A::kWhat) + ": " + e.what());
  }
  if (auto why = A::invalidState(state)) {
    throw ProcessorError(Errc::processor_failed,
                         "entry does not hold " + std::string(A::kWhat) + ": " + *why);
  }
  return state;
}

template <class A>
void writeState(MutableEntry& entry, const typename A::State& state,
                const typename A::Params& params) {
  entry.setValue(encode(state));
  entry.setExpiresAt(A::expiresAt(state, params));
}

template <class A>
typename A::Answer runLimiter(const typename A::Params& params, std::int64_t quantity,
                              const std::string& field, MutableEntry& entry, Nanos now) {
  checkParams(params.invalidReason());
  checkQuantity(quantity, A::kMinQuantity, field);
  typename A::State state = readState<A>(entry).value_or(A::create(params, now));
  typename A::Answer answer = A::take(state, params, quantity, now);
  if (quantity > 0 && A::granted(answer)) writeState<A>(entry, state, params);
  return answer;
}

template <class A>
std::vector<typename A::Answer> runLimiterBatch(const typename A::Params& params,
                                                const std::vector<std::int64_t>& quantities,
                                                const std::string& field, MutableEntry& entry,
                                                Nanos now) {
  checkParams(params.invalidReason());
  checkQuantities(quantities, A::kMinQuantity, field);
  typename A::State state = readState<A>(entry).value_or(A::create(params, now));
  std::vector<typename A::Answer> answers;
  answers.reserve(quantities.size());
  bool write = false;
  for (const std::int64_t q : quantities) {
    answers.push_back(A::take(state, params, q, now));
    write = write || (q > 0 && A::granted(answers.back()));
  }
  if (write) writeState<A>(entry, state, params);
  return answers;
}

template <class A, class Names>
struct LimiterBatch;

// A's single request: `quantity` units on the entry's key.
template <class A, class Names>
struct LimiterRequest {
  static constexpr std::string_view kName = Names::kSingle;
  using Result = typename A::Answer;
  // The batch form, for include/ingrid/batcher.h (BatchableProcessor).
  using Batch = LimiterBatch<A, Names>;

  typename A::Params params;
  // REQUIRES: >= A::kMinQuantity (1, or 0 where a quantity of 0 reads).
  std::int64_t quantity = 1;

  Result process(MutableEntry& entry, Nanos now) const {
    return runLimiter<A>(params, quantity, "quantity", entry, now);
  }
  template <class Archive>
  void serialize(Archive& ar) {
    ar(params, quantity);
  }
  // Requests on the same params may share a batch.
  static bool joinable(const LimiterRequest& first, const LimiterRequest& other) {
    return first.params == other.params;
  }
  // One batch of the items' quantities, in order. REQUIRES: all joinable with the first.
  static Batch batch(std::vector<LimiterRequest> items) {
    Batch out;
    if (!items.empty()) out.params = items.front().params;
    out.quantities.reserve(items.size());
    for (const auto& item : items) out.quantities.push_back(item.quantity);
    return out;
  }
};

// Several of A's requests on one key, answered in order, read once and written once: equivalent
// to LimiterRequest for each quantity in order at the same `now`.
template <class A, class Names>
struct LimiterBatch {
  static constexpr std::string_view kName = Names::kBatch;
  using Result = std::vector<typename A::Answer>;
  static constexpr std::size_t kMaxWants = kMaxBatch;

  typename A::Params params;
  // REQUIRES: each >= A::kMinQuantity; 1..kMaxWants of them.
  std::vector<std::int64_t> quantities;

  Result process(MutableEntry& entry, Nanos now) const {
    return runLimiterBatch<A>(params, quantities, "quantities", entry, now);
  }
  template <class Archive>
  void save(Archive& ar) const {
    ar(params, quantities);
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(params);
    // Named as "GcraBatchThrottle.quantities" in a refusal.
    std::string what(kName.substr(kName.rfind('.') + 1));
    loadQuantities(ar, quantities, (what + ".quantities").c_str());
  }
};

}  // namespace ingrid::limiter
