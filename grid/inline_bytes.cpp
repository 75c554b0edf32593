#include "grid/inline_bytes.h"

#include <cstring>
#include <stdexcept>

namespace ingrid {

InlineBytes::InlineBytes(std::string_view bytes) : size_(static_cast<std::uint32_t>(bytes.size())) {
  if (bytes.size() > UINT32_MAX) throw std::length_error("a byte string of 4 GiB or more");
  if (bytes.size() <= kInline) {
    if (!bytes.empty()) std::memcpy(bytes_, bytes.data(), bytes.size());
    return;
  }
  char* block = new char[bytes.size()];
  std::memcpy(block, bytes.data(), bytes.size());
  std::memcpy(bytes_, &block, sizeof block);
}

InlineBytes::InlineBytes(InlineBytes&& other) noexcept : size_(other.size_) {
  std::memcpy(bytes_, other.bytes_, kInline);  // the bytes, or the pointer: either moves whole
  other.size_ = 0;
}

InlineBytes& InlineBytes::operator=(InlineBytes&& other) noexcept {
  if (this != &other) {
    release();
    size_ = other.size_;
    std::memcpy(bytes_, other.bytes_, kInline);
    other.size_ = 0;
  }
  return *this;
}

char* InlineBytes::heap() const noexcept {
  char* block = nullptr;
  std::memcpy(&block, bytes_, sizeof block);
  return block;
}

void InlineBytes::release() noexcept {
  if (size_ > kInline) delete[] heap();
  size_ = 0;
}

std::string_view InlineBytes::view() const noexcept {
  return {size_ > kInline ? heap() : bytes_, size_};
}

}  // namespace ingrid
