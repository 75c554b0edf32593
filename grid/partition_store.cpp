#include <ingrid/grid/partition_store.h>

#include <cassert>
#include <utility>
#include <vector>

namespace ingrid {
namespace {

// kNever never expires, not even at the last representable instant.
bool isExpired(const Entry& e, Nanos now) noexcept {
  return e.expiresAt != kNever && e.expiresAt <= now;
}

}  // namespace

bool PartitionStore::onOwnerThread() const noexcept {
  const std::thread::id owner = owner_.load(std::memory_order_relaxed);
  return owner == std::thread::id{} || owner == std::this_thread::get_id();
}

const Entry* PartitionStore::find(std::string_view key, Nanos now) {
  assert(onOwnerThread());
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  if (isExpired(it->second, now)) {
    entries_.erase(it);
    return nullptr;
  }
  return &it->second;
}

void PartitionStore::apply(std::string_view key, MutableEntry& change) {
  assert(onOwnerThread());
  switch (change.change()) {
    case MutableEntry::Change::kNone:
      return;
    case MutableEntry::Change::kPut:
      put(key, change.takeEntry());
      return;
    case MutableEntry::Change::kRemove:
      erase(key);
      return;
  }
}

void PartitionStore::put(std::string_view key, Entry entry) {
  assert(onOwnerThread());
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    entries_.emplace(std::string(key), std::move(entry));
  } else {
    it->second = std::move(entry);
  }
  ++updateSeq_;
}

void PartitionStore::erase(std::string_view key) {
  assert(onOwnerThread());
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  entries_.erase(it);
  ++updateSeq_;
}

void PartitionStore::clear() noexcept {
  assert(onOwnerThread());
  entries_.clear();
  sweepCursor_ = 0;
}

std::size_t PartitionStore::reclaimExpired(Nanos now, std::size_t maxBuckets) {
  assert(onOwnerThread());
  const std::size_t buckets = entries_.bucket_count();
  if (entries_.empty() || buckets == 0) return 0;
  std::vector<std::string_view> expired;
  const std::size_t steps = maxBuckets < buckets ? maxBuckets : buckets;
  for (std::size_t i = 0; i < steps; ++i) {
    const std::size_t b = (sweepCursor_ + i) % buckets;
    for (auto it = entries_.cbegin(b); it != entries_.cend(b); ++it) {
      if (isExpired(it->second, now)) expired.push_back(it->first);
    }
  }
  sweepCursor_ = (sweepCursor_ + steps) % buckets;
  // Erasing never rehashes, so the collected views stay valid until their own erase.
  std::size_t erased = 0;
  for (std::string_view key : expired) {
    auto it = entries_.find(key);
    entries_.erase(it);
    ++erased;
  }
  return erased;
}

std::size_t PartitionStore::size() const noexcept {
  assert(onOwnerThread());
  return entries_.size();
}

std::uint64_t PartitionStore::updateSeq() const noexcept {
  assert(onOwnerThread());
  return updateSeq_;
}

void PartitionStore::forEach(Nanos now,
                             const std::function<void(std::string_view, const Entry&)>& fn) const {
  assert(onOwnerThread());
  for (const auto& [key, entry] : entries_) {
    if (!isExpired(entry, now)) fn(key, entry);
  }
}

}  // namespace ingrid
