#include <ingrid/entry.h>

#include <cassert>
#include <utility>

#include <ingrid/string_pool.h>

namespace ingrid {

bool MutableEntry::exists() const noexcept {
  switch (change_) {
    case Change::kPut:
      return true;
    case Change::kRemove:
      return false;
    case Change::kNone:
      return current_.has_value();
  }
  return false;
}

std::string_view MutableEntry::value() const noexcept {
  assert(exists());
  return staged_ ? std::string_view(staged_->value) : current_->value;
}

Nanos MutableEntry::expiresAt() const noexcept {
  if (!exists()) return kNever;
  return staged_ ? staged_->expiresAt : current_->expiresAt;
}

void MutableEntry::stageFromCurrent() {
  if (staged_) return;
  staged_.emplace();
  if (change_ == Change::kNone && current_) staged_->expiresAt = current_->expiresAt;
}

void MutableEntry::setValue(std::string value) {
  stageFromCurrent();
  staged_->value = std::move(value);
  change_ = Change::kPut;
}

void MutableEntry::remove() noexcept {
  staged_.reset();
  change_ = current_ ? Change::kRemove : Change::kNone;
}

void MutableEntry::setExpiresAt(Nanos at) noexcept {
  if (!exists()) return;  // nothing to expire
  if (!staged_) {
    // Expiry change alone: the value is copied once so the store can take a whole entry.
    staged_.emplace(Entry{StringPool::copy(current_->value), at});
    change_ = Change::kPut;
    return;
  }
  staged_->expiresAt = at;
}

Entry MutableEntry::takeEntry() {
  assert(change_ == Change::kPut && staged_);
  Entry out = std::move(*staged_);
  staged_.reset();
  return out;
}

}  // namespace ingrid
