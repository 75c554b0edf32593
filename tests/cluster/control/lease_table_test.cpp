#include "cluster/control/lease_table.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <vector>

#include "cluster/control/fake_coordinator_host.h"

using namespace ingrid;
using ingrid::test::FakeCoordinatorHost;
using ingrid::test::membersTopology;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

namespace {

using Lease = ingrid::test::Replies<bool>;
constexpr nanoseconds kNs{1};
constexpr auto kStart = FakeCoordinatorHost::kStart;

// Members 1..n, each asking as itself (incarnation == id) at the installed version.
void ask(LeaseTable& table, FakeCoordinatorHost& host, MemberId id, Lease& reply) {
  table.request(id, id, host.currentTopology()->version, reply.to());
}

// 4 partitions over members 1..3, with explicit owners: a topology at `version` whose epochs are
// stamped after `prev` (nullptr: the first).
Topology explicitTopology(std::uint64_t version, std::vector<std::vector<MemberId>> owners,
                          const Topology* prev) {
  Topology t = membersTopology(3, 4, 1, version);
  t.table = PartitionTable(4, std::move(owners));
  t.stampEpochs(prev);
  return t;
}

}  // namespace

TEST_CASE("Lease table: no grant before the barrier commits, a grant once it does",
          "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  Lease r;
  ask(table, host, 2, r);
  host.advance(milliseconds(5));
  REQUIRE(host.pendingBarriers() == 1);
  host.advance(seconds(10));  // time alone grants nothing
  CHECK(r.calls == 0);
  host.commitBarrier();
  REQUIRE(r.ok());
  CHECK(r.last->value());
}

TEST_CASE("Lease table: a failed barrier answers its error and grants nothing",
          "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  Lease r;
  ask(table, host, 2, r);
  host.advance(milliseconds(5));
  host.failBarrier(Error(Errc::shutting_down, "leadership lost"));
  REQUIRE(r.refused());
  CHECK(r.last->error() == Errc::shutting_down);
  CHECK(r.last->error().detail() == "leadership lost");
  CHECK(table.expiry(2) == kStart + host.leaseWait());  // no grant recorded
  // The next request gets a barrier of its own.
  Lease again;
  ask(table, host, 2, again);
  host.advance(milliseconds(50));
  REQUIRE(host.pendingBarriers() == 1);
  host.commitBarrier();
  CHECK(again.ok());
}

TEST_CASE(
    "Lease table: a batch's barrier is proposed kGather (5 ms) after its first request, not a "
    "nanosecond sooner, and grants every request of the batch",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  // The first request arrives off the millisecond grid: the gather still counts from it exactly.
  host.advance(microseconds(400));
  const auto first = host.now();
  Lease r2, r3;
  ask(table, host, 2, r2);
  host.advance(milliseconds(4));
  ask(table, host, 3, r3);  // joins the batch gathering
  host.advanceTo(first + milliseconds(5) - kNs);
  CHECK(host.barriersProposed() == 0);
  host.advance(kNs);
  REQUIRE(host.barriersProposed() == 1);
  CHECK(host.barrierTimes()[0] == first + milliseconds(5));
  host.commitBarrier();
  CHECK(r2.ok());
  CHECK(r3.ok());
  CHECK(host.barriersProposed() == 1);  // one barrier for both
}

TEST_CASE("Lease table: the gather delay is at most the barrier spacing (leaseWait / 32)",
          "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  host.config.leaseWait = milliseconds(96);  // spacing 3 ms
  LeaseTable table(host, [](MemberId) { return false; });
  Lease r;
  ask(table, host, 2, r);
  host.advance(milliseconds(3) - kNs);
  CHECK(host.barriersProposed() == 0);
  host.advance(kNs);
  CHECK(host.barriersProposed() == 1);
}

TEST_CASE(
    "Lease table: barriers are proposed at least leaseWait / 32 apart, not a nanosecond sooner",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  host.config.leaseWait = milliseconds(320);  // spacing 10 ms, gather 5 ms
  LeaseTable table(host, [](MemberId) { return false; });
  Lease first;
  ask(table, host, 2, first);
  host.advance(milliseconds(5));
  REQUIRE(host.barriersProposed() == 1);  // at kStart + 5 ms
  host.advance(milliseconds(1));
  host.commitBarrier();
  REQUIRE(first.ok());
  // At +6 ms: gathered by +11 ms, but spaced until +15 ms.
  Lease second;
  ask(table, host, 2, second);
  host.advanceTo(kStart + milliseconds(15) - kNs);
  CHECK(host.barriersProposed() == 1);
  host.advance(kNs);
  REQUIRE(host.barriersProposed() == 2);
  CHECK(host.barrierTimes()[1] == kStart + milliseconds(15));
}

TEST_CASE("Lease table: the barrier spacing is at most 50 ms", "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  host.config.leaseWait = milliseconds(1660);  // / 32 = 51 ms: capped at 50
  LeaseTable table(host, [](MemberId) { return false; });
  Lease first, second;
  ask(table, host, 2, first);
  host.advance(milliseconds(6));
  host.commitBarrier();  // proposed at +5 ms
  ask(table, host, 3, second);
  host.advanceTo(kStart + milliseconds(55) - kNs);
  CHECK(host.barriersProposed() == 1);
  host.advance(kNs);
  CHECK(host.barriersProposed() == 2);
}

TEST_CASE(
    "Lease table: the barrier spacing counts from the previous proposal to the nanosecond, even "
    "when the next request arrives off the millisecond grid",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  Lease first, second;
  ask(table, host, 2, first);
  host.advance(milliseconds(5) + microseconds(300));  // proposed at +5 ms, committed at +5.3 ms
  host.commitBarrier();
  ask(table, host, 3, second);  // due at +55 ms (49.7 ms from now: runAfter takes whole ms)
  host.advanceTo(kStart + milliseconds(55) - kNs);
  CHECK(host.barriersProposed() == 1);  // never before the spacing
  host.advanceTo(kStart + milliseconds(56));
  CHECK(host.barriersProposed() == 2);  // and within a millisecond of it
}

TEST_CASE(
    "Lease table: one barrier in flight at a time, and a request that came meanwhile goes at its "
    "commit",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  Lease r2, r3;
  ask(table, host, 2, r2);
  host.advance(milliseconds(10));  // proposed at +5 ms
  ask(table, host, 3, r3);
  host.advance(milliseconds(190));  // spacing and gather long past
  CHECK(host.barriersProposed() == 1);
  host.commitBarrier();
  CHECK(r2.ok());
  CHECK(r3.calls == 0);                   // its request came after the barrier was proposed
  REQUIRE(host.barriersProposed() == 2);  // proposed at the commit, at +200 ms
  CHECK(host.barrierTimes()[1] == kStart + milliseconds(200));
  host.commitBarrier();
  CHECK(r3.ok());
}

TEST_CASE(
    "Lease table: expiry is leaderSince + leaseWait until a grant, then the grant's commit + "
    "leaseWait",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });  // leaderSince: kStart
  const auto wait = host.leaseWait();
  CHECK(table.expiry(2) == kStart + wait);
  host.advance(seconds(1));
  CHECK(table.expiry(2) == kStart + wait);  // an earlier leader may have granted until kStart
  Lease r;
  ask(table, host, 2, r);          // at +1000 ms
  host.advance(milliseconds(40));  // proposed at +1005 ms, committed at +1040 ms
  host.commitBarrier();
  REQUIRE(r.ok());
  CHECK(table.expiry(2) == kStart + milliseconds(1040) + wait);  // from the commit
  CHECK(table.expiry(3) == kStart + wait);                       // not granted: unchanged
  // A later grant moves it on.
  Lease again;
  ask(table, host, 2, again);
  host.advance(seconds(1));
  host.commitBarrier();
  REQUIRE(again.ok());
  CHECK(table.expiry(2) == host.now() + wait);
}

TEST_CASE("Lease table: a grant right after election does not expire before leaderSince + wait",
          "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  Lease r;
  ask(table, host, 2, r);
  host.advance(milliseconds(5));
  host.commitBarrier();
  REQUIRE(r.ok());
  CHECK(table.expiry(2) >= kStart + host.leaseWait());
  CHECK(table.expiry(2) == kStart + milliseconds(5) + host.leaseWait());
}

TEST_CASE("Lease table: a revoked, removed, unknown or other-incarnation member is refused at once",
          "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(4));
  std::set<MemberId> removed{3};
  LeaseTable table(host, [&](MemberId m) { return removed.count(m) != 0; });
  CHECK(table.revoke(2));
  CHECK(!table.revoke(2));  // already
  CHECK(table.revoked(2));
  CHECK(!table.revoked(1));
  Lease revoked, gone, unknown, other;
  ask(table, host, 2, revoked);
  ask(table, host, 3, gone);
  table.request(9, 9, 10, unknown.to());
  table.request(4, 40, 10, other.to());  // member 4 is incarnation 4
  for (Lease* r : {&revoked, &gone, &unknown, &other}) {
    REQUIRE(r->refused());
    CHECK(r->last->error() == Errc::unavailable);
    CHECK_THAT(r->why(), Catch::Contains("not a live member at topology v10"));
  }
  CHECK_THAT(revoked.why(), Catch::Contains("member 2"));
  CHECK_THAT(gone.why(), Catch::Contains("member 3"));
  CHECK_THAT(unknown.why(), Catch::Contains("member 9"));
  CHECK_THAT(other.why(), Catch::Contains("member 4"));
  host.advance(seconds(1));
  CHECK(host.barriersProposed() == 0);  // none of them waited for one
  // The right incarnation of member 4 is granted.
  Lease four;
  ask(table, host, 4, four);
  host.advance(milliseconds(5));
  host.commitBarrier();
  CHECK(four.ok());
}

TEST_CASE(
    "Lease table: a member about to lose a primary is refused until it has installed that "
    "version (raiseFloor, and floors only rise)",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  table.raiseFloor(2, 11);
  table.raiseFloor(2, 9);  // lower: kept at 11
  Lease behind, installed;
  table.request(2, 2, 10, behind.to());
  REQUIRE(behind.refused());
  CHECK_THAT(behind.why(),
             Catch::Contains("member 2: it has installed topology v10, and is about to lose a "
                             "primary at v11"));
  table.request(2, 2, 11, installed.to());
  host.advance(milliseconds(5));
  host.commitBarrier();
  CHECK(installed.ok());
}

TEST_CASE(
    "Lease table: a member behind a topology that moved primaries is refused unless this "
    "leader saw its version and it lost no primary since",
    "[control][lease_table]") {
  // v10: p0 {1,2} p1 {2,3} p2 {3,1} p3 {1,3}. v12: p0's primary moves from 1 to 2.
  const Topology v10 = explicitTopology(10, {{1, 2}, {2, 3}, {3, 1}, {1, 3}}, nullptr);
  const Topology v12 = explicitTopology(12, {{2, 1}, {2, 3}, {3, 1}, {1, 3}}, &v10);
  REQUIRE(v12.primariesChangedAt() == 12);

  SECTION("seen at v10") {
    FakeCoordinatorHost host(v10);
    LeaseTable table(host, [](MemberId) { return false; });
    Lease early;  // asked at v10 while v10 was current: the table sees v10
    table.request(1, 1, 10, early.to());
    host.install(v12);
    Lease lost, kept, unseen, current;
    table.request(1, 1, 10, lost.to());
    REQUIRE(lost.refused());
    CHECK_THAT(lost.why(), Catch::Contains("where it is the primary of partition 0, which it is "
                                           "not (or not in the same epoch) at v12"));
    table.request(3, 3, 10, kept.to());    // primary of p2 at v10 and at v12, same epoch
    table.request(2, 2, 11, unseen.to());  // v11: never seen here
    REQUIRE(unseen.refused());
    CHECK_THAT(unseen.why(), Catch::Contains("older than v12, which moves primaries"));
    table.request(2, 2, 12, current.to());
    host.advance(milliseconds(5));
    host.commitBarrier();
    CHECK(kept.ok());
    CHECK(current.ok());
    // The early request, judged again at the commit against v12: it lost p0 meanwhile.
    REQUIRE(early.refused());
    CHECK_THAT(early.why(), Catch::Contains("primary of partition 0"));
  }
  SECTION("never seen") {
    FakeCoordinatorHost host(v12);
    LeaseTable table(host, [](MemberId) { return false; });
    Lease r;
    table.request(3, 3, 10, r.to());
    REQUIRE(r.refused());
    CHECK_THAT(r.why(), Catch::Contains("older than v12, which moves primaries"));
  }
  SECTION("primary again, in another epoch") {
    // v14: p0's primary is 1 again, appointed anew at v14.
    const Topology v14 = explicitTopology(14, {{1, 2}, {2, 3}, {3, 1}, {1, 3}}, &v12);
    REQUIRE(v14.epoch(0) == 14);
    FakeCoordinatorHost host(v10);
    LeaseTable table(host, [](MemberId) { return false; });
    Lease early;
    table.request(3, 3, 10, early.to());  // the table sees v10
    host.install(v14);
    Lease r;
    table.request(1, 1, 10, r.to());
    REQUIRE(r.refused());
    CHECK_THAT(r.why(), Catch::Contains("primary of partition 0"));
  }
}

TEST_CASE(
    "Lease table: a revocation, removal or floor that comes while the barrier runs refuses at "
    "its commit",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(4));
  std::set<MemberId> removed;
  LeaseTable table(host, [&](MemberId m) { return removed.count(m) != 0; });
  Lease r1, r2, r3, r4;
  ask(table, host, 1, r1);
  ask(table, host, 2, r2);
  ask(table, host, 3, r3);
  ask(table, host, 4, r4);
  host.advance(milliseconds(5));
  REQUIRE(host.pendingBarriers() == 1);
  table.revoke(1);
  removed.insert(2);
  table.raiseFloor(3, 11);
  host.advance(milliseconds(10));
  host.commitBarrier();
  CHECK_THAT(r1.why(), Catch::Contains("member 1: it is not a live member"));
  CHECK_THAT(r2.why(), Catch::Contains("member 2: it is not a live member"));
  CHECK_THAT(r3.why(), Catch::Contains("about to lose a primary at v11"));
  CHECK(r4.ok());
  for (MemberId m : {1, 2, 3}) CHECK(table.expiry(m) == kStart + host.leaseWait());
  CHECK(table.expiry(4) == kStart + milliseconds(15) + host.leaseWait());
}

TEST_CASE(
    "Lease table: whenGranted runs once every member is granted, not before, and not again at "
    "its deadline",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  int runs = 0;
  table.whenGranted({2, 3}, milliseconds(100), [&] { ++runs; });
  Lease r2, r3;
  ask(table, host, 2, r2);
  host.advance(milliseconds(5));
  host.commitBarrier();
  REQUIRE(r2.ok());
  CHECK(runs == 0);  // 3 not yet
  ask(table, host, 3, r3);
  host.advance(milliseconds(50));
  host.commitBarrier();
  REQUIRE(r3.ok());
  CHECK(runs == 1);
  host.advance(seconds(1));  // past the deadline
  CHECK(runs == 1);
}

TEST_CASE("Lease table: whenGranted runs at once when every member holds a grant already",
          "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  Lease r;
  ask(table, host, 2, r);
  host.advance(milliseconds(5));
  host.commitBarrier();
  REQUIRE(r.ok());
  int runs = 0;
  table.whenGranted({2}, milliseconds(100), [&] { ++runs; });
  CHECK(runs == 1);
  CHECK(host.pendingTimers() == 0);
  table.whenGranted({}, milliseconds(100), [&] { ++runs; });
  CHECK(runs == 2);
}

TEST_CASE(
    "Lease table: whenGranted runs at atMost if a member is still not granted, not a nanosecond "
    "sooner, and once",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  int runs = 0;
  table.whenGranted({2, 3}, milliseconds(100), [&] { ++runs; });
  Lease r2;
  ask(table, host, 2, r2);
  host.advance(milliseconds(5));
  host.commitBarrier();
  REQUIRE(r2.ok());
  host.advanceTo(kStart + milliseconds(100) - kNs);
  CHECK(runs == 0);
  host.advance(kNs);
  CHECK(runs == 1);
  Lease r3;  // granted late: nothing runs again
  ask(table, host, 3, r3);
  host.advance(milliseconds(50));
  host.commitBarrier();
  REQUIRE(r3.ok());
  CHECK(runs == 1);
}

TEST_CASE("Lease table: nothing runs once the table is gone", "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  auto table = std::make_unique<LeaseTable>(host, [](MemberId) { return false; });
  int runs = 0;
  table->whenGranted({2}, milliseconds(100), [&] { ++runs; });
  Lease r;
  table->request(2, 2, 10, r.to());
  host.advance(milliseconds(5));
  REQUIRE(host.pendingBarriers() == 1);
  table.reset();  // leadership lost
  host.commitBarrier();
  CHECK(r.calls == 0);  // the asker times out and asks the next leader
  host.advance(seconds(1));
  CHECK(runs == 0);
}

TEST_CASE(
    "Lease table: giveUpOn stops waiting for a failed member, and a wait left with no member runs",
    "[control][lease_table]") {
  FakeCoordinatorHost host(membersTopology(3));
  LeaseTable table(host, [](MemberId) { return false; });
  int both = 0, alone = 0;
  table.whenGranted({2, 3}, seconds(1), [&] { ++both; });
  table.whenGranted({3}, seconds(1), [&] { ++alone; });
  Lease r2;
  ask(table, host, 2, r2);
  host.advance(milliseconds(5));
  host.commitBarrier();
  REQUIRE(r2.ok());
  CHECK(both == 0);
  table.giveUpOn(3);
  CHECK(both == 1);
  CHECK(alone == 1);
  host.advance(seconds(2));
  CHECK(both == 1);
  CHECK(alone == 1);
}
