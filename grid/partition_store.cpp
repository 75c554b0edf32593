#include "grid/partition_store.h"

#include <cassert>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include <absl/hash/hash.h>

#include <ingrid/string_pool.h>

namespace ingrid {
namespace {

// kNever never expires, not even at the last representable instant.
bool isExpired(Nanos expiresAt, Nanos now) noexcept {
  return expiresAt != kNever && expiresAt <= now;
}

// An out-of-line slot's `bytes`: the heap block (key then value) and the value's length.
struct OutOfLine {
  char* data;
  std::size_t valueLen;
};
static_assert(sizeof(OutOfLine) <= PartitionStore::kInlineBytes);

}  // namespace

PartitionStore::PartitionStore() : index_(0, IndexHash{this}, IndexEq{this}) {}

PartitionStore::~PartitionStore() {
  for (std::uint32_t i = 0; i < size_; ++i) release(slot(i));
}

bool PartitionStore::onOwnerThread() const noexcept {
  const std::thread::id owner = owner_.load(std::memory_order_relaxed);
  return owner == std::thread::id{} || owner == std::this_thread::get_id();
}

std::size_t PartitionStore::IndexHash::operator()(std::uint32_t i) const noexcept {
  return (*this)(keyOf(store->slot(i)));
}

std::size_t PartitionStore::IndexHash::operator()(std::string_view key) const noexcept {
  return absl::Hash<std::string_view>{}(key);
}

bool PartitionStore::IndexEq::operator()(std::uint32_t a, std::string_view b) const noexcept {
  return keyOf(store->slot(a)) == b;
}

std::string_view PartitionStore::keyOf(const Slot& s) noexcept {
  if (s.outOfLine == 0) return {s.bytes, s.keyLen};
  OutOfLine out;
  std::memcpy(&out, s.bytes, sizeof out);
  return {out.data, s.keyLen};
}

std::string_view PartitionStore::valueOf(const Slot& s) noexcept {
  if (s.outOfLine == 0) return {s.bytes + s.keyLen, s.valueLen};
  OutOfLine out;
  std::memcpy(&out, s.bytes, sizeof out);
  return {out.data + s.keyLen, out.valueLen};
}

void PartitionStore::fill(Slot& s, std::string_view key, std::string_view value, Nanos expiresAt) {
  if (key.size() > kMaxKeyBytes) {  // callers check keys (keyError); this keeps the slot sound
    throw std::length_error("a key of " + std::to_string(key.size()) +
                            " bytes is longer than the limit of " + std::to_string(kMaxKeyBytes));
  }
  s.expiresAt = expiresAt;
  s.keyLen = static_cast<std::uint16_t>(key.size());
  if (key.size() + value.size() <= kInlineBytes) {
    s.outOfLine = 0;
    s.valueLen = static_cast<std::uint8_t>(value.size());
    std::memcpy(s.bytes, key.data(), key.size());
    if (!value.empty()) std::memcpy(s.bytes + key.size(), value.data(), value.size());
    return;
  }
  OutOfLine out{new char[key.size() + value.size()], value.size()};
  std::memcpy(out.data, key.data(), key.size());
  if (!value.empty()) std::memcpy(out.data + key.size(), value.data(), value.size());
  s.outOfLine = 1;
  s.valueLen = 0;
  std::memcpy(s.bytes, &out, sizeof out);
}

void PartitionStore::release(Slot& s) noexcept {
  if (s.outOfLine == 0) return;
  OutOfLine out;
  std::memcpy(&out, s.bytes, sizeof out);
  delete[] out.data;
  s.outOfLine = 0;
}

std::optional<EntryView> PartitionStore::find(std::string_view key, Nanos now) {
  assert(onOwnerThread());
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  const Slot& s = slot(*it);
  if (isExpired(s.expiresAt, now)) {
    eraseAt(it);
    return std::nullopt;
  }
  lastFound_ = *it;
  return EntryView{valueOf(s), s.expiresAt};
}

std::optional<EntryView> PartitionStore::apply(std::string_view key, MutableEntry& change,
                                               Nanos now) {
  assert(onOwnerThread());
  switch (change.change()) {
    case MutableEntry::Change::kNone:
      break;
    case MutableEntry::Change::kPut: {
      Entry staged = change.takeEntry();
      if (isExpired(staged.expiresAt, now)) {
        erase(key);  // stored and gone at once: find() would erase it and see nothing
        StringPool::give(std::move(staged.value));
        return std::nullopt;
      }
      const Slot& s = slot(putSlot(key, staged.value, staged.expiresAt));
      // Copied into the slot: the staged value's string (most often encode()'s) is reused.
      StringPool::give(std::move(staged.value));
      return EntryView{valueOf(s), s.expiresAt};
    }
    case MutableEntry::Change::kRemove:
      erase(key);
      return std::nullopt;
  }
  return find(key, now);
}

std::uint32_t PartitionStore::putSlot(std::string_view key, std::string_view value,
                                      Nanos expiresAt) {
  assert(onOwnerThread());
  std::uint32_t at = lastFound_;
  bool present = at < size_ && keyOf(slot(at)) == key;
  if (!present) {
    const auto it = index_.find(key);
    present = it != index_.end();
    if (present) at = *it;
  }
  if (present) {
    // Fill a copy first: `key` or `value` may not alias the slot, but its own key does.
    Slot& s = slot(at);
    Slot replacement;
    fill(replacement, keyOf(s), value, expiresAt);
    release(s);
    s = replacement;
    ++updateSeq_;
    return at;
  }
  if (size_ == std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error("a partition holds at most 2^32-1 entries");
  }
  if (size_ == chunks_.size() * kChunkSlots) {
    chunks_.push_back(std::make_unique_for_overwrite<Slot[]>(kChunkSlots));
  }
  fill(slot(size_), key, value, expiresAt);
  // The index hashes the new slot's key, so the slot is filled before it is indexed.
  index_.insert(size_);
  ++updateSeq_;
  return size_++;
}

void PartitionStore::erase(std::string_view key) {
  assert(onOwnerThread());
  auto it = index_.find(key);
  if (it == index_.end()) return;
  eraseAt(it);
  ++updateSeq_;
}

void PartitionStore::eraseAt(Index::iterator it) {
  const std::uint32_t hole = *it;
  const std::uint32_t last = size_ - 1;
  index_.erase(it);
  release(slot(hole));
  if (hole != last) {
    // Move the last slot into the hole and point its index entry there. The entry is found by
    // identity (the last slot's key hashes it), and rewriting it in place keeps its hash, which
    // is its key's. The set's elements are not const objects; only its iterators say const.
    auto moved = index_.find(last);
    assert(moved != index_.end());
    slot(hole) = slot(last);
    const_cast<std::uint32_t&>(*moved) = hole;
  }
  --size_;
  // Give back a trailing chunk once the one before it has room to spare too.
  if (chunks_.size() >= 2 &&
      size_ + kChunkSlots + kChunkSlots / 2 <= chunks_.size() * kChunkSlots) {
    chunks_.pop_back();
  }
}

void PartitionStore::clear() noexcept {
  assert(onOwnerThread());
  for (std::uint32_t i = 0; i < size_; ++i) release(slot(i));
  index_ = Index(0, IndexHash{this}, IndexEq{this});
  chunks_.clear();
  chunks_.shrink_to_fit();
  size_ = 0;
  sweepCursor_ = 0;
  dedup_.clear();
}

DedupTable& PartitionStore::dedup() noexcept {
  assert(onOwnerThread());
  return dedup_;
}

std::size_t PartitionStore::reclaimExpired(Nanos now, std::size_t maxEntries) {
  assert(onOwnerThread());
  std::size_t erased = 0;
  for (std::size_t examined = 0; examined < maxEntries && size_ > 0; ++examined) {
    if (sweepCursor_ >= size_) sweepCursor_ = 0;  // wrap
    if (isExpired(slot(sweepCursor_).expiresAt, now)) {
      auto it = index_.find(sweepCursor_);
      assert(it != index_.end());
      eraseAt(it);  // the last slot moves here: look at this position again
      ++erased;
    } else {
      ++sweepCursor_;
    }
  }
  return erased;
}

std::size_t PartitionStore::size() const noexcept {
  assert(onOwnerThread());
  return size_;
}

std::uint64_t PartitionStore::updateSeq() const noexcept {
  assert(onOwnerThread());
  return updateSeq_;
}

void PartitionStore::forEach(Nanos now,
                             const std::function<void(std::string_view, EntryView)>& fn) const {
  assert(onOwnerThread());
  for (std::uint32_t i = 0; i < size_; ++i) {
    const Slot& s = slot(i);
    if (!isExpired(s.expiresAt, now)) fn(keyOf(s), EntryView{valueOf(s), s.expiresAt});
  }
}

}  // namespace ingrid
