// GetEntry: reads an entry's raw state and expiry, changing nothing. For tools (ingrid-cli
// inspect) and tests; the bytes are whatever the entry's processors stored.
#pragma once

#include <string>

#include <cereal/types/string.hpp>

#include <ingrid/entry.h>
#include <ingrid/processors/entry_processor.h>

namespace ingrid {

struct EntrySnapshot {
  bool exists = false;
  std::string value;
  Nanos expiresAt = kNever;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(exists, value, expiresAt);
  }
};

struct GetEntry {
  static constexpr std::string_view kName = "ingrid.GetEntry";
  using Result = EntrySnapshot;

  Result process(MutableEntry& entry, Nanos) const {
    if (!entry.exists()) return {};
    return EntrySnapshot{true, std::string(entry.value()), entry.expiresAt()};
  }
  template <class Archive>
  void serialize(Archive&) {}
};

}  // namespace ingrid
