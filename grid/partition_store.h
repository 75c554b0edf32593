// PartitionStore: the entries of one partition, with expiry.
//
// Thread safety: NOT thread-safe. A store belongs to its partition's executor (DESIGN invariant
// 1); bindOwner() records that thread and every accessor asserts it in debug builds. Other
// threads post work to the owner instead of touching the store.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include <ingrid/grid/entry.h>

namespace ingrid {

class PartitionStore {
 public:
  PartitionStore() = default;
  PartitionStore(const PartitionStore&) = delete;
  PartitionStore& operator=(const PartitionStore&) = delete;

  // Binds the store to the calling thread; accessors must then run on it. Idempotent rebinding
  // is allowed only while no other thread uses the store (at start-up).
  void bindOwner() noexcept { owner_.store(std::this_thread::get_id(), std::memory_order_relaxed); }
  bool onOwnerThread() const noexcept;

  // The live entry for `key`, or nullptr. An entry expired at `now` is invisible and is erased.
  // The pointer is valid until the next mutation of this store.
  const Entry* find(std::string_view key, Nanos now);

  // Applies a processor's staged change to `key`. Bumps updateSeq() when something changed.
  void apply(std::string_view key, MutableEntry& change);
  void put(std::string_view key, Entry entry);
  void erase(std::string_view key);
  // Drops every entry (the partition moved away). Does not change updateSeq().
  void clear() noexcept;

  // Erases expired entries, scanning at most `maxBuckets` hash buckets from a cursor that wraps,
  // so repeated calls sweep the whole store in bounded steps. Returns the number erased.
  std::size_t reclaimExpired(Nanos now, std::size_t maxBuckets);

  // Entries held, including expired ones not yet reclaimed.
  std::size_t size() const noexcept;
  // Number of mutations applied so far; replication orders updates by it.
  std::uint64_t updateSeq() const noexcept;

  // Calls fn(key, entry) for every live entry at `now`. fn must not mutate the store.
  void forEach(Nanos now, const std::function<void(std::string_view, const Entry&)>& fn) const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  using Map = std::unordered_map<std::string, Entry, Hash, std::equal_to<>>;

  Map entries_;
  std::size_t sweepCursor_ = 0;  // next bucket reclaimExpired() looks at
  std::uint64_t updateSeq_ = 0;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace ingrid
