#include <ingrid/hash.h>

#include <cassert>
#include <string>

// Header-only use of libxxhash-dev: nothing to link, and the hash is compiled into ingrid.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ingrid {

std::optional<Error> keyError(std::string_view key) {
  if (key.size() <= kMaxKeyBytes) return std::nullopt;
  return Error(Errc::invalid_key, "key of " + std::to_string(key.size()) +
                                      " bytes is longer than the limit of " +
                                      std::to_string(kMaxKeyBytes));
}

std::uint64_t keyHash(std::string_view key) noexcept {
  return XXH64(key.data(), key.size(), /*seed=*/0);
}

PartitionId partitionOf(std::string_view key, std::uint32_t partitionCount) noexcept {
  assert(partitionCount > 0);
  return static_cast<PartitionId>(keyHash(key) % partitionCount);
}

}  // namespace ingrid
