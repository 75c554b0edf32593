// Test support for the limiter processors: one key of a partition store (LimiterStore), which
// applies a processor's staged change and hides an entry at and after its expiry, and failure(),
// the ProcessorError a processor fails with.
#pragma once

#include <optional>
#include <string>

#include <ingrid/grid/entry.h>
#include <ingrid/processors/codec.h>
#include <ingrid/processors/entry_processor.h>

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

}  // namespace ingrid::testing
