#include <ingrid/partition_table.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <ingrid/processors/codec.h>

using ingrid::MemberId;
using ingrid::ownersOf;
using ingrid::PartitionId;
using ingrid::PartitionTable;
using ingrid::rendezvousWeight;

namespace {

constexpr std::uint32_t kP = 1024;

// Non-consecutive ids, including ones that use the high bytes of the 64-bit id.
const std::vector<MemberId> kSparseIds{
    17, 4242, 90001, 1ULL << 32, 0xDEADBEEFULL, 7777777, 31337, 0xFFFFFFFFFFFFFFFFULL};

// The first n ids of a set: 1..n (sparse = false) or the first n of kSparseIds.
std::vector<MemberId> membersOf(std::size_t n, bool sparse) {
  std::vector<MemberId> ms;
  for (std::size_t i = 0; i < n; ++i) ms.push_back(sparse ? kSparseIds[i] : i + 1);
  return ms;
}

// How far a count of partitions may be from its expectation. Under a uniform hash the count is
// Binomial(kP, share), so we allow 4 standard deviations: a false failure from chance alone
// would be ~6e-5 per check, negligible over the ~100 checks below. Observed for these inputs:
// at most 2.4 sigma (26.7 partitions of an expected 146.3, 7 sparse ids).
constexpr double kSigmas = 4.0;
double tolerance(double share) { return kSigmas * std::sqrt(kP * share * (1.0 - share)); }

bool withinTolerance(std::uint32_t count, double share) {
  return std::abs(static_cast<double>(count) - kP * share) <= tolerance(share);
}

}  // namespace

// These vectors pin the weight and the ranking. If one fails, every partition of a running
// cluster would move to other members: that is a breaking change (invariant 5).
TEST_CASE("rendezvousWeight is XXH64 over little-endian (p, m)", "[grid][partition_table]") {
  CHECK(rendezvousWeight(0, 1) == 0xF96A9DD0802AA462ULL);
  CHECK(rendezvousWeight(7, 42) == 0xB6827CF56A9D2E89ULL);
  CHECK(rendezvousWeight(1023, 0x0123456789ABCDEFULL) == 0x2A33B4579DC69329ULL);
  CHECK(rendezvousWeight(0, 1) != rendezvousWeight(1, 0));
}

TEST_CASE("ownersOf ranks members by descending weight", "[grid][partition_table]") {
  const std::vector<MemberId> five{1, 2, 3, 4, 5};
  CHECK(ownersOf(0, five, 2) == std::vector<MemberId>{1, 4, 3});
  CHECK(ownersOf(1, five, 2) == std::vector<MemberId>{1, 2, 4});
  CHECK(ownersOf(3, five, 2) == std::vector<MemberId>{4, 3, 1});
  for (PartitionId p = 0; p < 16; ++p) {
    const std::vector<MemberId> all = ownersOf(p, five, 10);
    for (std::size_t i = 1; i < all.size(); ++i) {
      CHECK(rendezvousWeight(p, all[i - 1]) > rendezvousWeight(p, all[i]));
    }
  }
  CHECK(ownersOf(0, {}, 2).empty());
  const std::vector<MemberId> repeated{4, 1, 4, 1};
  CHECK(ownersOf(0, repeated, 5) == std::vector<MemberId>{1, 4});
}

TEST_CASE("the table does not depend on the members' input order", "[grid][partition_table]") {
  std::vector<MemberId> ms = membersOf(8, /*sparse=*/true);
  const PartitionTable reference = PartitionTable::balanced(kP, ms, 2);
  std::reverse(ms.begin(), ms.end());
  CHECK(PartitionTable::balanced(kP, ms, 2) == reference);
  std::rotate(ms.begin(), ms.begin() + 3, ms.end());
  CHECK(PartitionTable::balanced(kP, ms, 2) == reference);
  std::swap(ms[0], ms[5]);
  CHECK(PartitionTable::balanced(kP, ms, 2) == reference);
}

TEST_CASE("primaries are balanced across members", "[grid][partition_table]") {
  for (bool sparse : {false, true}) {
    for (std::size_t n = 2; n <= 8; ++n) {
      const std::vector<MemberId> ms = membersOf(n, sparse);
      const PartitionTable table = PartitionTable::balanced(kP, ms, 0);
      std::uint32_t total = 0;
      for (MemberId m : ms) {
        INFO("sparse " << sparse << ", N " << n << ", member " << m);
        CHECK(withinTolerance(table.primaryCount(m), 1.0 / static_cast<double>(n)));
        total += table.primaryCount(m);
      }
      CHECK(total == kP);
    }
  }
}

TEST_CASE("a joining member takes partitions only from others", "[grid][partition_table]") {
  for (bool sparse : {false, true}) {
    for (std::size_t n = 2; n <= 7; ++n) {
      INFO("sparse " << sparse << ", N " << n);
      const std::vector<MemberId> before = membersOf(n, sparse);
      const std::vector<MemberId> after = membersOf(n + 1, sparse);
      const MemberId joiner = after.back();
      const PartitionTable old = PartitionTable::balanced(kP, before, 0);
      const PartitionTable now = PartitionTable::balanced(kP, after, 0);
      std::uint32_t moved = 0;
      for (PartitionId p = 0; p < kP; ++p) {
        if (old.primary(p) != now.primary(p)) {
          ++moved;
          CHECK(now.primary(p) == joiner);  // nothing moves between old members
        }
      }
      CHECK(moved == now.primaryCount(joiner));
      CHECK(withinTolerance(moved, 1.0 / static_cast<double>(n + 1)));

      // Leaving is the reverse: exactly the leaver's partitions move, and all of them do.
      for (PartitionId p = 0; p < kP; ++p) {
        CHECK((now.primary(p) != old.primary(p)) == (now.primary(p) == joiner));
      }
    }
  }
}

TEST_CASE("with backups, only owner lists the member enters or leaves change",
          "[grid][partition_table]") {
  for (std::uint32_t backups : {1u, 2u}) {
    for (std::size_t n = 2; n <= 7; ++n) {
      INFO("backups " << backups << ", N " << n);
      const std::vector<MemberId> small = membersOf(n, /*sparse=*/true);
      const std::vector<MemberId> large = membersOf(n + 1, /*sparse=*/true);
      const MemberId changed = large.back();
      const PartitionTable without = PartitionTable::balanced(kP, small, backups);
      const PartitionTable with = PartitionTable::balanced(kP, large, backups);
      for (PartitionId p = 0; p < kP; ++p) {
        const std::set<MemberId> a(without.owners(p).begin(), without.owners(p).end());
        const std::set<MemberId> b(with.owners(p).begin(), with.owners(p).end());
        // Join (without -> with): a set changes only if the joiner entered it. Leave (with ->
        // without): only if the leaver was in it, and then it must change.
        CHECK((a != b) == with.isOwner(p, changed));
        // The survivors keep their relative order.
        std::vector<MemberId> kept = with.owners(p);
        std::erase(kept, changed);
        const std::vector<MemberId>& old = without.owners(p);
        CHECK(std::equal(kept.begin(), kept.end(), old.begin()));
      }
    }
  }
}

TEST_CASE("owner lists are distinct and sized by backups", "[grid][partition_table]") {
  for (std::uint32_t backups : {0u, 1u, 2u, 5u}) {
    for (std::size_t n = 1; n <= 4; ++n) {
      const std::vector<MemberId> ms = membersOf(n, /*sparse=*/false);
      const PartitionTable table = PartitionTable::balanced(64, ms, backups);
      REQUIRE(table.partitionCount() == 64);
      for (PartitionId p = 0; p < 64; ++p) {
        const std::vector<MemberId>& owners = table.owners(p);
        CHECK(owners.size() == std::min<std::size_t>(backups + 1, n));
        CHECK(std::set<MemberId>(owners.begin(), owners.end()).size() == owners.size());
        CHECK(table.primary(p) == owners.front());
      }
    }
  }
  const std::vector<MemberId> one{9};
  const PartitionTable solo = PartitionTable::balanced(8, one, 1);
  CHECK(solo.primaryCount(9) == 8);
  CHECK(solo.partitionsOf(9).size() == 8);
  CHECK(PartitionTable::balanced(8, {}, 1).primary(3) == 0);  // 0 means no owner
}

TEST_CASE("accessors agree with the owner lists", "[grid][partition_table]") {
  const PartitionTable table(3, {{2, 1}, {1, 3}, {}});
  CHECK(table.partitionCount() == 3);
  CHECK(table.primary(0) == 2);
  CHECK(table.primary(2) == 0);
  CHECK(table.isOwner(0, 1));
  CHECK_FALSE(table.isOwner(0, 3));
  CHECK(table.primaryCount(1) == 1);
  CHECK(table.primaryCount(3) == 0);
  CHECK(table.partitionsOf(1) == std::vector<PartitionId>{0, 1});
  CHECK(table.partitionsOf(3) == std::vector<PartitionId>{1});
  CHECK(PartitionTable().partitionCount() == 0);
}

namespace {
// Writes arbitrary integers where a PartitionTable is expected, to fake hostile input.
struct RawInts {
  std::vector<std::uint32_t> u32;  // written first
  std::vector<MemberId> u64;       // then these
  template <class Archive>
  void save(Archive& ar) const {
    for (std::uint32_t v : u32) ar(v);
    for (MemberId v : u64) ar(v);
  }
};
}  // namespace

TEST_CASE("a table survives save and load", "[grid][partition_table]") {
  const std::vector<MemberId> ms = membersOf(5, /*sparse=*/true);
  const PartitionTable table = PartitionTable::balanced(kP, ms, 2);
  CHECK(ingrid::decode<PartitionTable>(ingrid::encode(table)) == table);
  CHECK(ingrid::decode<PartitionTable>(ingrid::encode(PartitionTable())) == PartitionTable());
}

TEST_CASE("load refuses oversize counts and bad owner lists", "[grid][partition_table]") {
  using ingrid::decode;
  using ingrid::encode;
  CHECK_THROWS_AS(decode<PartitionTable>(encode(RawInts{{ingrid::kMaxPartitionCount + 1}, {}})),
                  std::length_error);
  CHECK_THROWS_AS(decode<PartitionTable>(encode(RawInts{{0xFFFFFFFFu}, {}})), std::length_error);
  CHECK_THROWS_AS(
      decode<PartitionTable>(encode(RawInts{{1, ingrid::kMaxOwnersPerPartition + 1}, {}})),
      std::length_error);
  CHECK_THROWS_AS(decode<PartitionTable>(encode(RawInts{{1, 2}, {5, 5}})), std::invalid_argument);
  CHECK_THROWS_AS(decode<PartitionTable>(encode(RawInts{{1, 1}, {0}})), std::invalid_argument);
  CHECK(decode<PartitionTable>(encode(RawInts{{1, 2}, {5, 6}})) == PartitionTable(1, {{5, 6}}));
  // A count larger than the bytes that follow fails without allocating for it.
  CHECK_THROWS(decode<PartitionTable>(encode(RawInts{{ingrid::kMaxPartitionCount}, {}})));
}

TEST_CASE("with zones, each partition's owners are in distinct zones while zones remain",
          "[grid][partition_table]") {
  // Nine members in three zones of three: with one backup, the two owners are never in one
  // zone; with two backups, the three owners are one per zone.
  std::vector<MemberId> members;
  std::vector<std::string> zones;
  for (MemberId m = 1; m <= 9; ++m) {
    members.push_back(m);
    zones.push_back("zone-" + std::to_string((m - 1) / 3));
  }
  auto zoneOf = [&](MemberId m) { return zones[m - 1]; };
  for (std::uint32_t backups : {1u, 2u}) {
    const PartitionTable t = PartitionTable::balanced(256, members, backups, zones);
    for (PartitionId p = 0; p < 256; ++p) {
      const std::vector<MemberId>& owners = t.owners(p);
      REQUIRE(owners.size() == backups + 1);
      std::set<std::string> distinct;
      for (MemberId m : owners) distinct.insert(zoneOf(m));
      CHECK(distinct.size() == owners.size());
      // The primary is the ranking's first, as without zones.
      CHECK(owners.front() == ownersOf(p, members, 0).front());
    }
  }
  // Three backups over three zones: one zone holds two owners, and every member is distinct.
  const PartitionTable four = PartitionTable::balanced(64, members, 3, zones);
  for (PartitionId p = 0; p < 64; ++p) {
    std::set<MemberId> distinct(four.owners(p).begin(), four.owners(p).end());
    CHECK(distinct.size() == 4);
  }
  // One zone for all (or none given): exactly the table without zones.
  const std::vector<std::string> same(9, "one");
  CHECK(PartitionTable::balanced(64, members, 2, same) == PartitionTable::balanced(64, members, 2));
}
