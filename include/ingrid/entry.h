// Entries and the view of one that an entry processor gets.
//
// An Entry is a value (opaque bytes: the processor's serialized state) and an absolute expiry.
// A MutableEntry stages a processor's changes: nothing reaches the store unless the processor
// returns normally, which is what makes a failing processor change nothing (invariant 4).
// Thread safety: not thread-safe; a MutableEntry lives on one partition's executor for the span
// of one process() call, and no pointer into it may be kept afterwards.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <ingrid/clock.h>

namespace ingrid {

// Expiry of an entry that never expires.
inline constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

// A stored entry, read in place: valid until the store's next mutation.
struct EntryView {
  std::string_view value;
  // Absolute time (clock nanoseconds) at and after which the entry is invisible. Default: never.
  Nanos expiresAt = kNever;
};

// An entry that owns its value: staged changes, snapshots, tests.
struct Entry {
  std::string value;
  // Absolute time (clock nanoseconds) at and after which the entry is invisible. Default: never.
  Nanos expiresAt = kNever;

  EntryView view() const noexcept { return EntryView{value, expiresAt}; }
};

class MutableEntry {
 public:
  enum class Change : std::uint8_t { kNone, kPut, kRemove };

  // `current` is the live entry or nullopt; what it views must outlive this object.
  MutableEntry(std::string_view key, std::optional<EntryView> current) noexcept
      : key_(key), current_(current) {}

  std::string_view key() const noexcept { return key_; }
  bool exists() const noexcept;
  // The value as the processor has left it so far. REQUIRES: exists().
  std::string_view value() const noexcept;
  Nanos expiresAt() const noexcept;

  // Creates or replaces the value. The expiry is kept unless setExpiresAt() is called.
  void setValue(std::string value);
  // Deletes the entry (a no-op on an absent one).
  void remove() noexcept;
  // Absolute expiry in clock nanoseconds; kNever for none. Ignored if the entry ends up removed.
  void setExpiresAt(Nanos at) noexcept;

  Change change() const noexcept { return change_; }
  // The entry to store. REQUIRES: change() == Change::kPut. Leaves this object empty.
  Entry takeEntry();

 private:
  void stageFromCurrent();

  std::string_view key_;
  std::optional<EntryView> current_;
  Change change_ = Change::kNone;
  std::optional<Entry> staged_;  // set once the processor changed the value or expiry
};

}  // namespace ingrid
