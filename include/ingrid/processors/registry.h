// ProcessorRegistry: stable processor name -> how to run it from bytes.
//
// Every node of a cluster must register the same processors. A registry is filled before a node
// starts and is immutable afterwards, so lookups take no lock.
// Thread safety: add() is not thread-safe; const members are safe from any thread.
#pragma once

#include <concepts>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/result.h>

namespace ingrid {

// What a processor's answer says for the metrics (ingrid_requests_total's outcome,
// ingrid_near_limit_total), read from the answer before it is encoded.
struct ProcessorVerdict {
  enum Kind : std::uint8_t {
    kAnswered,  // an answer that neither grants nor denies (a counter, a read)
    kGranted,
    kDenied,
  };
  Kind kind = kAnswered;
  bool nearLimit = false;  // granted with less than 20% of the limit left
};

// A processor with its types erased: decodes the processor from `args`, runs it on `entry` and
// returns the encoded Result, and sets `*verdict` (if not null) from the answer. Never throws;
// any failure is an Error naming the processor. On error, `entry`'s staged changes must be
// discarded by the caller.
using ErasedProcessorFn = Result<std::string> (*)(std::string_view args, MutableEntry& entry,
                                                  Nanos now, ProcessorVerdict* verdict);

namespace detail {

std::string describeProcessorFailure(std::string_view name, const char* what);

template <class A>
concept GrantedField = requires(const A& a) {
  { a.granted } -> std::convertible_to<bool>;
};
template <class A>
concept GrantedMethod = requires(const A& a) {
  { a.granted() } -> std::convertible_to<bool>;
};
template <class A>
concept LimitAndRemaining = requires(const A& a) {
  { a.limit } -> std::convertible_to<std::int64_t>;
  { a.remaining } -> std::convertible_to<std::int64_t>;
};

// Less than 20% of `limit` left (5 x remaining < limit, without overflow).
constexpr bool nearLimit(std::int64_t remaining, std::int64_t limit) noexcept {
  return limit > 0 && remaining < limit / 5 + (limit % 5 != 0 ? 1 : 0);
}

// One answer's verdict: a `granted` field or method grants or denies; the limit it is near is the
// answer's `limit`, or the processor's bucket capacity.
template <class P, class A>
ProcessorVerdict verdictOf(const P& processor, const A& answer) noexcept {
  ProcessorVerdict v;
  bool granted = false;
  if constexpr (GrantedField<A>) {
    granted = answer.granted;
  } else if constexpr (GrantedMethod<A>) {
    granted = answer.granted();
  } else {
    return v;
  }
  v.kind = granted ? ProcessorVerdict::kGranted : ProcessorVerdict::kDenied;
  if (!granted) return v;
  if constexpr (LimitAndRemaining<A>) {
    v.nearLimit = nearLimit(answer.remaining, answer.limit);
  } else if constexpr (requires {
                         answer.remaining;
                         processor.bucket.capacity;
                       }) {
    v.nearLimit = nearLimit(answer.remaining, processor.bucket.capacity);
  }
  return v;
}

// A batch's verdict: granted if every answer was; near the limit as its last answer.
template <class P, class A>
ProcessorVerdict verdictOf(const P& processor, const std::vector<A>& answers) noexcept {
  ProcessorVerdict v;
  for (const A& a : answers) {
    const ProcessorVerdict one = verdictOf(processor, a);
    if (one.kind == ProcessorVerdict::kAnswered) return v;
    v = one.kind == ProcessorVerdict::kDenied || v.kind == ProcessorVerdict::kDenied
            ? ProcessorVerdict{ProcessorVerdict::kDenied, false}
            : one;
  }
  return v;
}

template <EntryProcessor P>
Result<std::string> runErased(std::string_view args, MutableEntry& entry, Nanos now,
                              ProcessorVerdict* verdict) {
  const std::string_view name = P::kName;
  P processor{};
  try {
    decodeInto(args, processor);
  } catch (const std::exception& e) {
    return Error(Errc::invalid_argument,
                 "processor '" + std::string(name) + "': arguments do not decode: " + e.what());
  }
  try {
    const typename P::Result answer = processor.process(entry, now);
    if (verdict) *verdict = verdictOf(processor, answer);
    return encode(answer);
  } catch (const ProcessorError& e) {
    return Error(e.code(), describeProcessorFailure(name, e.what()));
  } catch (const std::exception& e) {
    return Error(Errc::processor_failed, describeProcessorFailure(name, e.what()));
  } catch (...) {
    return Error(Errc::processor_failed,
                 describeProcessorFailure(name, "threw something that is not a std::exception"));
  }
}

}  // namespace detail

class ProcessorRegistry {
 public:
  // An empty registry. Most users want withBuiltins().
  ProcessorRegistry() = default;
  // The built-in processors: token bucket acquire and batch acquire, increment, get counter,
  // get entry, and the limiters (GCRA, fixed window, sliding log and window, leaky meter and
  // shaper, concurrency leases, the composite bucket, warm-up) with their batch forms.
  static ProcessorRegistry withBuiltins();

  // Registers P. Returns false (and changes nothing) if a processor of that name is registered.
  template <EntryProcessor P>
  bool add() {
    return add(std::string(P::kName), &detail::runErased<P>);
  }
  bool add(std::string name, ErasedProcessorFn fn);

  // nullptr if no processor of that name is registered.
  ErasedProcessorFn find(std::string_view name) const noexcept;
  bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }
  // find() and indexOf() in one lookup: {nullptr, size()} if no processor of that name.
  std::pair<ErasedProcessorFn, std::size_t> lookup(std::string_view name) const noexcept;
  // The index it was registered under (0 .. size()-1: what labels its metrics), or size().
  std::size_t indexOf(std::string_view name) const noexcept;
  std::size_t size() const noexcept { return byName_.size(); }
  // The name registered under `index` (< size()).
  const std::string& nameAt(std::size_t index) const { return order_[index]; }
  // The registered names, sorted: what nodes compare when one joins.
  std::vector<std::string> names() const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  struct Registered {
    ErasedProcessorFn fn = nullptr;
    std::size_t index = 0;
  };
  std::unordered_map<std::string, Registered, Hash, std::equal_to<>> byName_;
  std::vector<std::string> order_;  // names by index
};

}  // namespace ingrid
