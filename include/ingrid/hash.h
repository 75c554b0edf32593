// The stable key hash and the key -> partition mapping (invariant 5).
//
// keyHash is XXH64 with seed 0 over the key's bytes: the same value on every platform, compiler
// and build. Changing it re-homes every key of a running cluster, so tests pin it with vectors.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <ingrid/error.h>

namespace ingrid {

using PartitionId = std::uint32_t;

// Default number of partitions of a cluster. Fixed for the cluster's lifetime.
inline constexpr std::uint32_t kDefaultPartitionCount = 1024;

// Keys are byte strings of at most this many bytes (the wire format counts them in 16 bits).
inline constexpr std::size_t kMaxKeyBytes = 65535;

// nullopt if `key` is acceptable, else why not (Errc::invalid_key: longer than kMaxKeyBytes).
std::optional<Error> keyError(std::string_view key);

// XXH64(key, seed = 0).
std::uint64_t keyHash(std::string_view key) noexcept;

// keyHash(key) mod partitionCount. REQUIRES: partitionCount > 0.
PartitionId partitionOf(std::string_view key, std::uint32_t partitionCount) noexcept;

}  // namespace ingrid
