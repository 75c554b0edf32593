#include "cluster/control/partial_partition_judge.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <string>
#include <vector>

using namespace ingrid;
using std::chrono::milliseconds;

namespace {

// Members 1..n, the balanced table (`backups` backups per partition).
Topology installed(MemberId n, std::uint32_t partitions, std::uint32_t backups) {
  Topology t;
  t.version = 10;
  t.backups = backups;
  for (MemberId id = 1; id <= n; ++id) {
    t.members.push_back(MemberInfo{id, "127.0.0.1:" + std::to_string(7000 + id), id, {}, {}});
  }
  t.table = Topology::balancedFor(partitions, t.members, backups);
  return t;
}

const auto kT0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);

}  // namespace

TEST_CASE("Partial partition judge: no cut link removes nobody and an empty report withdraws",
          "[control][partial_partition]") {
  PartialPartitionJudge judge;
  const Topology t = installed(3, 8, 1);
  CHECK(!judge.report(2, {}, kT0));
  CHECK(judge.judge(t, 1, {1, 2, 3}, kT0, milliseconds(100), milliseconds(0)).empty());
  CHECK(judge.report(2, {3}, kT0));
  CHECK(!judge.report(2, {}, kT0));
  CHECK(judge.judge(t, 1, {1, 2, 3}, kT0, milliseconds(100), milliseconds(0)).empty());
}

TEST_CASE("Partial partition judge: of one cut link the member with the larger id goes",
          "[control][partial_partition]") {
  PartialPartitionJudge judge;
  const Topology t = installed(3, 8, 1);
  REQUIRE(judge.report(2, {3}, kT0));
  const auto removals = judge.judge(t, 1, {1, 2, 3}, kT0, milliseconds(100), milliseconds(0));
  REQUIRE(removals.size() == 1);
  CHECK(removals[0].member == 3);
  CHECK(removals[0].sole.empty());  // every partition has a backup on 1 or 2
  // Stale past `freshFor`: ignored.
  CHECK(judge.judge(t, 1, {1, 2, 3}, kT0 + milliseconds(100), milliseconds(100), milliseconds(0))
            .empty());
}

TEST_CASE("Partial partition judge: a member holding the only complete replica is named with it",
          "[control][partial_partition]") {
  PartialPartitionJudge judge;
  const Topology t = installed(3, 8, 0);  // no backups: each partition on one member
  REQUIRE(judge.report(3, {2}, kT0));
  const auto removals = judge.judge(t, 1, {1, 2, 3}, kT0, milliseconds(100), milliseconds(0));
  REQUIRE(removals.size() == 1);
  CHECK(removals[0].member == 3);
  CHECK(removals[0].sole == t.table.partitionsOf(3));
}

TEST_CASE(
    "Partial partition judge: a link counts as cut only once reported for confirmAfter, so a "
    "member that reports a dead one first is not removed in its place",
    "[control][partial_partition]") {
  PartialPartitionJudge judge;
  const Topology t = installed(5, 16, 2);
  constexpr milliseconds kFresh(500), kConfirm(1500);
  // Members 4 and 5 died; member 3 says so first, while the leader (1) still hears them.
  REQUIRE(judge.report(3, {4, 5}, kT0));
  CHECK(judge.judge(t, 1, {1, 2, 3, 4, 5}, kT0, kFresh, kConfirm).empty());
  REQUIRE(judge.report(3, {4, 5}, kT0 + milliseconds(1000)));
  CHECK(judge.judge(t, 1, {1, 2, 3, 4, 5}, kT0 + milliseconds(1000), kFresh, kConfirm).empty());
  // By the confirmation the leader no longer hears 4 and 5: nobody live is cut, nobody goes.
  REQUIRE(judge.report(3, {4, 5}, kT0 + milliseconds(1500)));
  CHECK(judge.judge(t, 1, {1, 2, 3}, kT0 + milliseconds(1500), kFresh, kConfirm).empty());
  // Were 4 and 5 alive and heard, the cut, confirmed, removes the member with more cut links.
  const auto removals =
      judge.judge(t, 1, {1, 2, 3, 4, 5}, kT0 + milliseconds(1500), kFresh, kConfirm);
  REQUIRE(removals.size() == 1);
  CHECK(removals[0].member == 3);
}

TEST_CASE("Partial partition judge: a member dropped from a report is confirmed again from scratch",
          "[control][partial_partition]") {
  PartialPartitionJudge judge;
  const Topology t = installed(3, 8, 1);
  constexpr milliseconds kFresh(500), kConfirm(1000);
  REQUIRE(judge.report(2, {3}, kT0));
  REQUIRE(judge.report(2, {1}, kT0 + milliseconds(400)));  // 3 heard again, 1 not
  REQUIRE(judge.report(2, {3}, kT0 + milliseconds(800)));  // 3 silent again: a new listing
  CHECK(judge.judge(t, 1, {1, 2, 3}, kT0 + milliseconds(1200), kFresh, kConfirm).empty());
  REQUIRE(judge.report(2, {3}, kT0 + milliseconds(1800)));
  const auto removals = judge.judge(t, 1, {1, 2, 3}, kT0 + milliseconds(1800), kFresh, kConfirm);
  REQUIRE(removals.size() == 1);
  CHECK(removals[0].member == 3);
}

TEST_CASE("Partial partition judge: names every member of a fresh report until it is withdrawn",
          "[control][partial_partition]") {
  // What the leader reports as suspects: a cut being judged may remove either end, so both are
  // named from the first report (before any judgement), until a clean report or staleness.
  PartialPartitionJudge judge;
  constexpr milliseconds kFresh(500);
  CHECK(judge.named(kT0, kFresh).empty());
  REQUIRE(judge.report(2, {3}, kT0));
  CHECK(judge.named(kT0, kFresh) == std::set<MemberId>{2, 3});
  REQUIRE(judge.report(4, {5}, kT0 + milliseconds(300)));
  CHECK(judge.named(kT0 + milliseconds(400), kFresh) == std::set<MemberId>{2, 3, 4, 5});
  // Member 2 went quiet: its report is stale; member 4's is not yet.
  CHECK(judge.named(kT0 + milliseconds(600), kFresh) == std::set<MemberId>{4, 5});
  CHECK(!judge.report(4, {}, kT0 + milliseconds(700)));  // 4 hears 5 again
  CHECK(judge.named(kT0 + milliseconds(700), kFresh).empty());
}
