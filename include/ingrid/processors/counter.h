// Counter processors: a signed 64-bit counter stored in an entry.
//
// Increment adds `delta` (creating the counter at 0) and returns the new value; it fails, changing
// nothing, if the sum would overflow. GetCounter reads the value (0 when absent) and changes
// nothing. The stored form is the Cereal portable encoding of one int64.
#pragma once

#include <cstdint>

#include <ingrid/entry.h>
#include <ingrid/processors/entry_processor.h>

namespace ingrid {

struct Increment {
  static constexpr std::string_view kName = "ingrid.Increment";
  using Result = std::int64_t;

  std::int64_t delta = 1;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(delta);
  }
};

struct GetCounter {
  static constexpr std::string_view kName = "ingrid.GetCounter";
  using Result = std::int64_t;

  Result process(MutableEntry& entry, Nanos now) const;
  template <class Archive>
  void serialize(Archive&) {}
};

}  // namespace ingrid
