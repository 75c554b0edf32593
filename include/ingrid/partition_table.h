// PartitionTable: which members own each partition, primary first then backups (invariant 5),
// computed by rendezvous (highest-random-weight) hashing.
//
// Every node and client must compute the same table from the same member list, so the weight is
// a stable hash (XXH64 over fixed little-endian bytes) and tests pin it with vectors; changing it
// re-homes every partition of a running cluster. A table is an immutable value shared as
// std::shared_ptr<const PartitionTable> (STYLE 7); a membership change builds a new one.
// Thread safety: const members and the free functions may be called from any thread.
#pragma once

#include <cassert>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <ingrid/hash.h>
#include <ingrid/input_bounds.h>

namespace ingrid {

// Identifies a cluster member. Real ids are >= 1; 0 means "no member".
using MemberId = std::uint64_t;

// Bounds checked when a table is loaded from untrusted bytes, before anything is allocated.
inline constexpr std::uint32_t kMaxPartitionCount = 1u << 20;
inline constexpr std::uint32_t kMaxOwnersPerPartition = 64;

// XXH64 (seed 0) over 12 bytes: p as 4-byte little-endian, then m as 8-byte little-endian.
// The same value on every platform and build; every node and client must agree on it.
std::uint64_t rendezvousWeight(PartitionId p, MemberId m) noexcept;

// The owners of partition p among `members`: sorted by descending rendezvousWeight(p, m), ties
// broken by the smaller id, duplicates dropped, truncated to min(backups + 1, distinct members).
// The first is the primary, the rest are backups in order. Empty `members` -> empty result.
// Input order does not matter. Adding a member only ever inserts it into lists; removing one
// only ever takes it out, so only about 1/N of partitions move.
//
// With `zones` (zones[i] is members[i]'s; empty: none), the backups go in distinct zones wherever
// possible: after the primary, each next owner is the highest-ranked member of a zone no owner
// is in yet; once every zone holds one, the rest follow by rank. With one zone (or none) the
// owners are exactly the ranking's first. A member joining a new zone may then also displace a
// backup of another zone, so more than 1/N of the partitions can move.
std::vector<MemberId> ownersOf(PartitionId p, std::span<const MemberId> members,
                               std::uint32_t backups, std::span<const std::string> zones = {});

class PartitionTable {
 public:
  // An empty table with no partitions (what a default or not-yet-loaded table holds).
  PartitionTable() = default;
  // REQUIRES: owners.size() == partitionCount; each owners[p] lists distinct ids >= 1, primary
  // first then backups.
  PartitionTable(std::uint32_t partitionCount, std::vector<std::vector<MemberId>> owners);

  // ownersOf(p, members, backups, zones) for every p in [0, partitionCount).
  static PartitionTable balanced(std::uint32_t partitionCount, std::span<const MemberId> members,
                                 std::uint32_t backups, std::span<const std::string> zones = {});

  std::uint32_t partitionCount() const noexcept {
    return static_cast<std::uint32_t>(owners_.size());
  }
  // Primary then backups. REQUIRES: p < partitionCount().
  const std::vector<MemberId>& owners(PartitionId p) const noexcept;
  // The primary of p, or 0 when p has no owner. REQUIRES: p < partitionCount().
  MemberId primary(PartitionId p) const noexcept {
    assert(p < primaries_.size());
    return primaries_[p];
  }
  // True when m is the primary or a backup of p. REQUIRES: p < partitionCount().
  bool isOwner(PartitionId p, MemberId m) const noexcept;
  // Number of partitions whose primary is m.
  std::uint32_t primaryCount(MemberId m) const noexcept;
  // The partitions m owns as primary or backup, in ascending order.
  std::vector<PartitionId> partitionsOf(MemberId m) const;

  friend bool operator==(const PartitionTable& a, const PartitionTable& b) {
    return a.owners_ == b.owners_;
  }

  // Cereal serialization: partitionCount (u32), then per partition the owner count (u32) and the
  // ids (u64). Only integers go through the archive, so grid/ needs no Cereal header.
  template <class Archive>
  void save(Archive& ar) const {
    ar(partitionCount());
    for (const std::vector<MemberId>& list : owners_) {
      ar(static_cast<std::uint32_t>(list.size()));
      for (MemberId m : list) ar(m);
    }
  }

  // Reads untrusted bytes: every count is checked before it sizes an allocation (std::length_error
  // past kMaxPartitionCount or kMaxOwnersPerPartition), and an owner list with id 0 or a repeated
  // id is refused (std::invalid_argument). On a throw, *this is unchanged.
  template <class Archive>
  void load(Archive& ar) {
    std::uint32_t partitions = 0;
    ar(partitions);
    checkCount(partitions, kMaxPartitionCount, "partition count");
    checkRemaining(partitions, sizeof(std::uint32_t), "partition table");  // a count each
    // Grown as lists arrive rather than reserved up front, so a short input allocates little.
    std::vector<std::vector<MemberId>> lists;
    for (std::uint32_t p = 0; p < partitions; ++p) {
      std::uint32_t count = 0;
      ar(count);
      checkCount(count, kMaxOwnersPerPartition, "owners per partition");
      checkRemaining(count, sizeof(MemberId), "owners per partition");
      std::vector<MemberId> list(count);
      for (MemberId& m : list) ar(m);
      checkOwnerList(list);
      lists.push_back(std::move(list));
    }
    owners_ = std::move(lists);
    indexPrimaries();
  }

 private:
  static void checkCount(std::uint32_t count, std::uint32_t max, const char* what);
  static void checkOwnerList(const std::vector<MemberId>& list);
  // Fills primaries_ from owners_.
  void indexPrimaries();

  std::vector<std::vector<MemberId>> owners_;  // indexed by PartitionId
  // owners_[p].front() (0 if none) in one flat array: every request asks for its partition's
  // primary, and this is one load where owners_ takes two dependent ones.
  std::vector<MemberId> primaries_;
};

}  // namespace ingrid
