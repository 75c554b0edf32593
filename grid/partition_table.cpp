#include <ingrid/partition_table.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <stdexcept>
#include <string>
#include <string_view>

// Header-only use of libxxhash-dev, as in hash.cpp.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace ingrid {

std::uint64_t rendezvousWeight(PartitionId p, MemberId m) noexcept {
  // Explicit little-endian bytes, not a struct copy: the weight must not depend on the host.
  std::array<unsigned char, 12> bytes{};
  for (std::size_t i = 0; i < 4; ++i) bytes[i] = static_cast<unsigned char>(p >> (8 * i));
  for (std::size_t i = 0; i < 8; ++i) bytes[4 + i] = static_cast<unsigned char>(m >> (8 * i));
  return XXH64(bytes.data(), bytes.size(), /*seed=*/0);
}

std::vector<MemberId> ownersOf(PartitionId p, std::span<const MemberId> members,
                               std::uint32_t backups, std::span<const std::string> zones) {
  assert(zones.empty() || zones.size() == members.size());
  struct Ranked {
    std::uint64_t weight;
    MemberId id;
    std::size_t at;  // index in members (and zones)
  };
  std::vector<Ranked> ranked;
  ranked.reserve(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    ranked.push_back(Ranked{rendezvousWeight(p, members[i]), members[i], i});
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.id < b.id;
  });
  // A repeated id has the same weight, so its copies are adjacent.
  ranked.erase(std::unique(ranked.begin(), ranked.end(),
                           [](const Ranked& a, const Ranked& b) { return a.id == b.id; }),
               ranked.end());

  const std::size_t keep = std::min(static_cast<std::size_t>(backups) + 1, ranked.size());
  std::vector<MemberId> owners;
  owners.reserve(keep);
  if (zones.empty()) {
    for (std::size_t i = 0; i < keep; ++i) owners.push_back(ranked[i].id);
    return owners;
  }
  std::vector<bool> taken(ranked.size(), false);
  std::vector<std::string_view> used;
  for (std::size_t i = 0; i < ranked.size() && owners.size() < keep; ++i) {
    const std::string_view zone = zones[ranked[i].at];
    if (std::find(used.begin(), used.end(), zone) != used.end()) continue;
    used.push_back(zone);
    taken[i] = true;
    owners.push_back(ranked[i].id);
  }
  for (std::size_t i = 0; i < ranked.size() && owners.size() < keep; ++i) {
    if (!taken[i]) owners.push_back(ranked[i].id);
  }
  return owners;
}

PartitionTable::PartitionTable(std::uint32_t partitionCount,
                               std::vector<std::vector<MemberId>> owners)
    : owners_(std::move(owners)) {
  assert(owners_.size() == partitionCount);
  (void)partitionCount;  // only checked in debug builds
  indexPrimaries();
}

void PartitionTable::indexPrimaries() {
  primaries_.clear();
  primaries_.reserve(owners_.size());
  for (const std::vector<MemberId>& list : owners_) {
    primaries_.push_back(list.empty() ? 0 : list.front());
  }
}

PartitionTable PartitionTable::balanced(std::uint32_t partitionCount,
                                        std::span<const MemberId> members, std::uint32_t backups,
                                        std::span<const std::string> zones) {
  std::vector<std::vector<MemberId>> owners;
  owners.reserve(partitionCount);
  for (PartitionId p = 0; p < partitionCount; ++p) {
    owners.push_back(ownersOf(p, members, backups, zones));
  }
  return PartitionTable(partitionCount, std::move(owners));
}

const std::vector<MemberId>& PartitionTable::owners(PartitionId p) const noexcept {
  assert(p < owners_.size());
  return owners_[p];
}

bool PartitionTable::isOwner(PartitionId p, MemberId m) const noexcept {
  const std::vector<MemberId>& list = owners(p);
  return std::find(list.begin(), list.end(), m) != list.end();
}

std::uint32_t PartitionTable::primaryCount(MemberId m) const noexcept {
  std::uint32_t count = 0;
  for (const std::vector<MemberId>& list : owners_) {
    if (!list.empty() && list.front() == m) ++count;
  }
  return count;
}

std::vector<PartitionId> PartitionTable::partitionsOf(MemberId m) const {
  std::vector<PartitionId> result;
  for (PartitionId p = 0; p < partitionCount(); ++p) {
    if (isOwner(p, m)) result.push_back(p);
  }
  return result;
}

void PartitionTable::checkCount(std::uint32_t count, std::uint32_t max, const char* what) {
  if (count > max) {
    throw std::length_error(std::string("partition table ") + what + " " + std::to_string(count) +
                            " exceeds the limit of " + std::to_string(max));
  }
}

void PartitionTable::checkOwnerList(const std::vector<MemberId>& list) {
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i] == 0) throw std::invalid_argument("partition table owner id 0 is not a member");
    if (std::find(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(i), list[i]) !=
        list.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw std::invalid_argument("partition table owner " + std::to_string(list[i]) +
                                  " is listed twice for one partition");
    }
  }
}

}  // namespace ingrid
