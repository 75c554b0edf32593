// PartitionStore: the entries of one partition, with expiry, stored compactly.
//
// Layout (docs/ARCHITECTURE.md, "Compact storage"): the entries live in a dense array of
// fixed 56-byte slots, allocated in chunks of kChunkSlots; a slot holds the expiry, the lengths,
// and the key and value inline when together they take at most kInlineBytes (a 16-byte key with
// a token bucket's 25-byte state does), else one heap block holding both. An Abseil
// flat_hash_set of 4-byte slot numbers indexes the array by key; its hash and equality read the
// key from the slot. Erasing moves the last slot into the hole, so the array stays dense and a
// sweep for expired entries walks memory in order.
//
// Thread safety: NOT thread-safe. A store belongs to its partition's executor (invariant
// 1); bindOwner() records that thread and every accessor asserts it in debug builds. Other
// threads post work to the owner instead of touching the store.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include <absl/container/flat_hash_set.h>

#include <ingrid/entry.h>
#include <ingrid/hash.h>

#include "grid/dedup_table.h"

namespace ingrid {

class PartitionStore {
 public:
  PartitionStore();
  ~PartitionStore();
  PartitionStore(const PartitionStore&) = delete;
  PartitionStore& operator=(const PartitionStore&) = delete;

  // Binds the store to the calling thread; accessors must then run on it. Idempotent rebinding
  // is allowed only while no other thread uses the store (at start-up).
  void bindOwner() noexcept { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  bool onOwnerThread() const noexcept;

  // The live entry for `key`, or nullopt. An entry expired at `now` is invisible and is erased.
  // The view is valid until the next mutation of this store.
  std::optional<EntryView> find(std::string_view key, Nanos now);

  // Applies a processor's staged change to `key`. Bumps updateSeq() when something changed.
  // Returns what find(key, now) would return afterwards (a put already expired at `now` is
  // erased), without looking the key up again.
  std::optional<EntryView> apply(std::string_view key, MutableEntry& change, Nanos now);
  void put(std::string_view key, std::string_view value, Nanos expiresAt) {
    putSlot(key, value, expiresAt);
  }
  void put(std::string_view key, const Entry& entry) { put(key, entry.value, entry.expiresAt); }
  void erase(std::string_view key);
  // Drops every entry and every dedup record (the partition moved away). Does not change
  // updateSeq().
  void clear() noexcept;

  // The requests that changed this partition, for exactly-once retries (grid/dedup_table.h).
  DedupTable& dedup() noexcept;

  // Erases expired entries, examining at most `maxEntries` entries from a cursor that wraps, so
  // repeated calls sweep the whole store in bounded steps. Returns the number erased.
  std::size_t reclaimExpired(Nanos now, std::size_t maxEntries);

  // Entries held, including expired ones not yet reclaimed.
  std::size_t size() const noexcept;
  // Number of mutations applied so far; replication orders updates by it.
  std::uint64_t updateSeq() const noexcept;

  // Calls fn(key, entry) for every live entry at `now`. fn must not mutate the store.
  void forEach(Nanos now, const std::function<void(std::string_view, EntryView)>& fn) const;

  // Key and value bytes a slot holds inline; longer pairs go to one heap block.
  static constexpr std::size_t kInlineBytes = 44;
  // Slots per chunk of the dense array.
  static constexpr std::size_t kChunkSlots = 64;

 private:
  // One entry. Trivially copyable: moving a slot moves the ownership of its heap block.
  struct Slot {
    Nanos expiresAt;
    std::uint16_t keyLen;    // kMaxKeyBytes is 65535
    std::uint8_t valueLen;   // inline only; out of line the length is in `bytes`
    std::uint8_t outOfLine;  // 1: `bytes` holds a char* to key+value and a size_t value length
    char bytes[kInlineBytes];
  };
  static_assert(sizeof(Slot) == 56);

  // The index's hash and equality: slot numbers stand for their slots' keys, and a key may be
  // looked up directly (heterogeneous lookup). Two slot numbers are equal only if identical.
  struct IndexHash {
    using is_transparent = void;
    const PartitionStore* store;
    std::size_t operator()(std::uint32_t slot) const noexcept;
    std::size_t operator()(std::string_view key) const noexcept;
  };
  struct IndexEq {
    using is_transparent = void;
    const PartitionStore* store;
    bool operator()(std::uint32_t a, std::uint32_t b) const noexcept { return a == b; }
    bool operator()(std::uint32_t a, std::string_view b) const noexcept;
    bool operator()(std::string_view a, std::uint32_t b) const noexcept { return (*this)(b, a); }
  };
  using Index = absl::flat_hash_set<std::uint32_t, IndexHash, IndexEq>;

  Slot& slot(std::uint32_t i) noexcept { return chunks_[i / kChunkSlots][i % kChunkSlots]; }
  const Slot& slot(std::uint32_t i) const noexcept {
    return chunks_[i / kChunkSlots][i % kChunkSlots];
  }
  static std::string_view keyOf(const Slot& s) noexcept;
  static std::string_view valueOf(const Slot& s) noexcept;
  // Fills `s` (whose old contents are ignored) with a copy of key and value.
  static void fill(Slot& s, std::string_view key, std::string_view value, Nanos expiresAt);
  static void release(Slot& s) noexcept;
  // Erases the entry at index position `it` (slot number *it), keeping the array dense.
  void eraseAt(Index::iterator it);
  // put(), returning the slot that holds the entry now.
  std::uint32_t putSlot(std::string_view key, std::string_view value, Nanos expiresAt);

  Index index_;
  std::vector<std::unique_ptr<Slot[]>> chunks_;
  std::uint32_t size_ = 0;         // slots in use: [0, size_)
  std::uint32_t sweepCursor_ = 0;  // next slot reclaimExpired() looks at
  // The slot find() last returned: a processor's put of the key it just read (apply) reuses it
  // instead of a second index lookup. Only a hint: it is used only if in range and its slot still
  // holds the same key (keys are unique, so that slot is the key's), so nothing invalidates it.
  std::uint32_t lastFound_ = 0;
  std::uint64_t updateSeq_ = 0;
  DedupTable dedup_;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace ingrid
