// Test support for the limiter processors: one key of a partition store (LimiterStore), which
// applies a processor's staged change and hides an entry at and after its expiry, and failure(),
// the ProcessorError a processor fails with.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ingrid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>
#include <ingrid/processors/limit_answer.h>

namespace Catch {
template <>
struct StringMaker<ingrid::LimitAnswer> {
  static std::string convert(const ingrid::LimitAnswer& a) {
    std::ostringstream out;
    out << "{granted=" << a.granted << ", limit=" << a.limit << ", remaining=" << a.remaining
        << ", retry=" << a.retryAfter << ", reset=" << a.resetAfter << "}";
    return out.str();
  }
};
}  // namespace Catch

namespace ingrid::testing {

struct LimiterStore {
  std::optional<Entry> entry;
  MutableEntry::Change lastChange = MutableEntry::Change::kNone;

  template <class P>
  typename P::Result invoke(const P& processor, Nanos now) {
    if (entry && entry->expiresAt != kNever && now >= entry->expiresAt) entry.reset();
    std::optional<EntryView> current;
    if (entry) current = entry->view();
    MutableEntry view("key", current);
    typename P::Result result = processor.process(view, now);
    lastChange = view.change();
    if (lastChange == MutableEntry::Change::kPut) entry = view.takeEntry();
    if (lastChange == MutableEntry::Change::kRemove) entry.reset();
    return result;
  }
  template <class S>
  S state() const {
    return decode<S>(entry.value().value);
  }
};

// The error a processor fails with on `current` (nullptr: no entry), or nullopt if it returns.
template <class P>
std::optional<ProcessorError> failure(const P& processor, const Entry* current = nullptr) {
  std::optional<EntryView> live;
  if (current != nullptr) live = current->view();
  MutableEntry view("key", live);
  try {
    processor.process(view, 0);
  } catch (const ProcessorError& e) {
    return e;
  }
  return std::nullopt;
}

// failure()'s message, or "(ok)".
template <class P>
std::string failureText(const P& processor, const Entry* current = nullptr) {
  auto e = failure(processor, current);
  return e ? std::string(e->what()) : std::string("(ok)");
}

// A batch `Single::Batch` of random quantities in [minQ, maxQ] answers and stores exactly what the
// same requests one by one do, over `steps` batches `0..maxStep` ns apart (fixed seed).
template <class Single>
void checkBatchEqualsSingles(const decltype(Single{}.params) & params, std::int64_t minQ,
                             std::int64_t maxQ, Nanos maxStep, int steps, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<Nanos> forward(0, maxStep);
  std::uniform_int_distribution<std::int64_t> quantity(minQ, maxQ);
  std::uniform_int_distribution<std::size_t> count(1, 8);
  LimiterStore batched, single;
  Nanos now = 1'700'000'000'000'000'000;
  for (int step = 0; step < steps; ++step) {
    now += forward(rng);
    typename Single::Batch batch{params, std::vector<std::int64_t>(count(rng))};
    std::vector<typename Single::Result> expected;
    for (auto& q : batch.quantities) {
      q = quantity(rng);
      expected.push_back(single.invoke(Single{params, q}, now));
    }
    INFO("step " << step);
    REQUIRE(batched.invoke(batch, now) == expected);
    REQUIRE(batched.entry.has_value() == single.entry.has_value());
    if (batched.entry) {
      REQUIRE(batched.entry->value == single.entry->value);
      REQUIRE(batched.entry->expiresAt == single.entry->expiresAt);
    }
  }
}

}  // namespace ingrid::testing
