#include "cluster/control/coordinator.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <vector>

#include "cluster/control/fake_coordinator_host.h"
#include "cluster/transport/frame.h"

using namespace ingrid;
using ingrid::test::FakeCoordinatorHost;
using ingrid::test::membersTopology;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {

using Lease = ingrid::test::Replies<bool>;
using Join = ingrid::test::Replies<MemberId>;
constexpr nanoseconds kNs{1};
constexpr auto kStart = FakeCoordinatorHost::kStart;

// Member 1 elected at kStart over members 1..3 (8 partitions, 1 backup, v10): its takeover
// topology (v11) committed, nothing else under way. Lease wait 1660 ms, hearing window 600 ms.
struct Elected {
  FakeCoordinatorHost host{membersTopology(3)};
  std::deque<Lease> probes;  // revoked()'s requests (a pending one may be answered later)
  Coordinator coordinator{host, Logger{}};

  Elected() {
    coordinator.start();
    REQUIRE(host.pendingProposals() == 1);
    host.commitProposal();
    REQUIRE(host.currentTopology()->version == 11);
    REQUIRE(coordinator.idle());
  }

  // Member `id` asks for its lease now; the barrier is proposed kGather later and commits at
  // `commitAt`.
  void grant(MemberId id, FakeCoordinatorHost::SteadyTime commitAt) {
    Lease r;
    coordinator.requestLease(id, id, host.currentTopology()->version, r.to());
    host.advanceTo(commitAt);
    REQUIRE(host.pendingBarriers() == 1);
    host.commitBarrier();
    REQUIRE(r.ok());
  }
  // Whether member `id`'s lease is revoked: a request of its is refused at once (else it waits
  // for a barrier, left pending).
  bool revoked(MemberId id) {
    Lease& r = probes.emplace_back();
    coordinator.requestLease(id, id, host.currentTopology()->version, r.to());
    return r.refused();
  }
  // Whether the removal has started: a Prepare (fence and drain) sent to a member or run here.
  bool removing() const {
    return !host.sentTo(MessageType::kTopologyPrepare).empty() || !host.preparedLocally().empty();
  }
  std::vector<MemberId> suspects() const {
    std::vector<MemberId> s = coordinator.suspects();
    std::sort(s.begin(), s.end());
    return s;
  }
};

}  // namespace

TEST_CASE(
    "Coordinator: memberFailed revokes the lease at once and proposes the removal once its last "
    "lease has surely expired, not a nanosecond sooner",
    "[control][coordinator]") {
  Elected e;
  e.grant(3, kStart + milliseconds(120));  // expires here at +120 ms + 1660 ms
  const auto expiry = kStart + milliseconds(1780);
  e.host.advanceTo(kStart + milliseconds(200));
  e.coordinator.memberFailed(3);
  CHECK(e.revoked(3));  // no grant any more, from now on
  CHECK(e.suspects() == std::vector<MemberId>{3});
  e.host.advanceTo(expiry - kNs);
  CHECK(!e.removing());
  CHECK(e.host.pendingProposals() == 0);
  e.host.advance(kNs);
  REQUIRE(e.removing());
  CHECK(e.host.sentTo(MessageType::kTopologyPrepare) == std::vector<MemberId>{2});
  CHECK(e.host.preparedLocally() == std::vector<std::uint64_t>{12});
  e.host.answerAll(MessageType::kTopologyPrepare);
  REQUIRE(e.host.pendingProposals() == 1);
  CHECK(e.host.proposal().version == 12);
  CHECK(e.host.proposal().memberIds() == std::vector<MemberId>{1, 2});
}

TEST_CASE(
    "Coordinator: memberFailed of a member this leader never granted waits until its election "
    "+ leaseWait (an earlier leader may have granted one)",
    "[control][coordinator]") {
  Elected e;
  e.host.advanceTo(kStart + milliseconds(10));
  e.coordinator.memberFailed(3);
  CHECK(e.revoked(3));
  e.host.advanceTo(kStart + milliseconds(1660) - kNs);
  CHECK(!e.removing());
  e.host.advance(kNs);
  CHECK(e.removing());
  // A second call changes nothing.
  const auto sent = e.host.sent().size();
  e.coordinator.memberFailed(3);
  e.host.advance(std::chrono::seconds(5));
  CHECK(e.host.sent().size() == sent);
}

TEST_CASE("Coordinator: memberFailed once the last lease has expired removes the member at once",
          "[control][coordinator]") {
  Elected e;
  e.host.advanceTo(kStart + milliseconds(1660));
  e.coordinator.memberFailed(2);
  CHECK(e.host.sentTo(MessageType::kTopologyPrepare) == std::vector<MemberId>{3});
}

TEST_CASE(
    "Coordinator: a Join at a member's address with another incarnation is answered unavailable "
    "while that member's last lease may run, and removes it once it has surely expired",
    "[control][coordinator]") {
  Elected e;
  e.grant(3, kStart + milliseconds(120));
  const auto expiry = kStart + milliseconds(1780);
  const std::string address = "127.0.0.1:7003";  // member 3's, incarnation 3

  e.host.advanceTo(kStart + milliseconds(1660));  // past the election's lease wait, not 3's
  Join early;
  e.coordinator.requestJoin(address, 99, {}, "", early.to());
  REQUIRE(early.refused());
  CHECK(early.last->error() == Errc::unavailable);
  CHECK_THAT(early.why(), Catch::Contains("is member 3's, whose lease may run 120 ms more"));

  e.host.advanceTo(expiry - kNs);
  Join last;
  e.coordinator.requestJoin(address, 99, {}, "", last.to());
  REQUIRE(last.refused());
  CHECK_THAT(last.why(), Catch::Contains("whose lease may run 1 ms more"));
  CHECK(!e.removing());
  CHECK(e.suspects().empty());  // member 3 is left alone
  CHECK(!e.revoked(3));

  e.host.advance(kNs);
  Join expired;
  e.coordinator.requestJoin(address, 99, {}, "", expired.to());
  REQUIRE(expired.refused());
  CHECK(expired.last->error() == Errc::unavailable);
  CHECK_THAT(expired.why(), Catch::Contains("was member 3's, which is being removed; ask again"));
  CHECK(e.host.sentTo(MessageType::kTopologyPrepare) == std::vector<MemberId>{2});
  CHECK(e.revoked(3));
  CHECK(e.suspects() == std::vector<MemberId>{3});
}

TEST_CASE(
    "Coordinator: suspects are the members not heard, revoked, or named in a report fresher "
    "than the lease wait",
    "[control][coordinator]") {
  Elected e;
  CHECK(e.suspects().empty());
  e.host.config.unheard = {3};
  CHECK(e.suspects() == std::vector<MemberId>{3});
  e.host.config.unheard.clear();
  CHECK(e.suspects().empty());

  const auto reported = kStart + milliseconds(100);
  e.host.advanceTo(reported);
  e.coordinator.reportUnreachable(2, {3});
  CHECK(e.suspects() == std::vector<MemberId>{2, 3});
  e.host.advanceTo(reported + milliseconds(1660) - kNs);
  CHECK(e.suspects() == std::vector<MemberId>{2, 3});
  e.host.advance(kNs);
  CHECK(e.suspects().empty());  // stale: the reporter went quiet

  e.coordinator.memberFailed(2);  // its lease ran out: declared failed, its removal under way
  CHECK(e.suspects() == std::vector<MemberId>{2});
}

TEST_CASE(
    "Coordinator: a cut link reported for the hearing window removes the member cut off, not a "
    "nanosecond sooner, and its removal waits for its lease",
    "[control][coordinator]") {
  Elected e;
  const auto first = kStart + milliseconds(100);
  e.host.advanceTo(first);
  e.coordinator.reportUnreachable(2, {3});
  e.host.advanceTo(first + milliseconds(600) - kNs);
  e.coordinator.reportUnreachable(2, {3});
  CHECK(!e.revoked(3));  // no verdict yet
  e.host.advance(kNs);
  e.coordinator.reportUnreachable(2, {3});
  CHECK(e.revoked(3));  // of the cut link 2-3, the member with the larger id goes
  CHECK(!e.revoked(2));
  // Removed as failed: once its last lease has surely expired (never granted by this leader).
  e.host.advanceTo(kStart + milliseconds(1660) - kNs);
  CHECK(!e.removing());
  e.host.advance(kNs);
  CHECK(e.host.sentTo(MessageType::kTopologyPrepare) == std::vector<MemberId>{2});
}

TEST_CASE(
    "Coordinator: a member this leader does not hear is left to its failure detection, whatever "
    "the reports",
    "[control][coordinator]") {
  Elected e;
  e.host.config.unheard = {3};
  e.coordinator.reportUnreachable(2, {3});
  e.host.advance(milliseconds(600));
  e.coordinator.reportUnreachable(2, {3});
  e.host.config.unheard.clear();
  CHECK(!e.revoked(3));
}

// The wait is rounded up to the timer's milliseconds: rounded down, off the millisecond grid the
// removal came up to 1 ms before the expiry.
TEST_CASE("Coordinator: memberFailed off the millisecond grid still waits until the expiry",
          "[control][coordinator]") {
  Elected e;
  e.host.advanceTo(kStart + milliseconds(10) + std::chrono::microseconds(500));
  e.coordinator.memberFailed(3);  // expiry: kStart + 1660 ms; 1649.5 ms from now
  e.host.advanceTo(kStart + milliseconds(1660) - kNs);
  CHECK(!e.removing());
  e.host.advanceTo(kStart + milliseconds(1660) + std::chrono::microseconds(500));
  CHECK(e.removing());
}
