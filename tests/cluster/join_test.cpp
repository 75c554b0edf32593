// Joining through a lossy network: a join sent again is the same join (same incarnation), and is
// answered with the same member id. Faults come from FrameFaults between in-process members on
// distinct loopback addresses.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>

#include <ingrid/node.h>

#include "cluster/transport/frame_faults.h"

#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::eventually;
using ingrid::testing::TestCluster;

TEST_CASE("A join whose reply was lost is answered at once with the same id when sent again",
          "[cluster][join]") {
  // The leader admits the joiner and answers, but the answer is lost: the joiner does not know
  // its id, so it cannot answer a Hello as that member, take its snapshots or hear the log, and
  // the change that admitted it waits for it to sync. Its join sent again must not queue behind
  // that change (it would never be answered, and the joiner would give up).
  auto faults = std::make_shared<FrameFaults>(/*seed=*/7);
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.frameFaults = faults;
  // The joiner is heard by only some members until it has joined (after 5 s, below): a failure
  // timeout well above that, and a lease well below it (a member reports a peer it heard before
  // cut off after max(lease, 2 s) of silence).
  o.failureTimeout = 20s;
  o.leaseDuration = 2s;
  TestCluster cluster(o);
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(3));
  const TopologyPtr before = cluster.at(0).topology();
  const MemberInfo* leader = before->member(before->coordinator());
  REQUIRE(leader != nullptr);
  const std::string leaderIp = leader->address.substr(0, leader->address.rfind(':'));

  std::string other;  // a member that is not the leader: it redirects the joiner to the leader
  for (const MemberInfo& m : before->members) {
    if (m.id != leader->id) other = m.address;
  }
  REQUIRE(!other.empty());

  // TestCluster puts node i at 127.0.0.(i+2): the joiner, a fourth node, listens at 127.0.0.5.
  const int lost = faults->add(
      {.from = leaderIp, .to = "127.0.0.5", .types = {MessageType::kJoin}, .drop = 1.0});
  // The other member does not hear the joiner (its heartbeats and answers are lost) until the
  // joiner knows its id, while the leader does from then: a member that has never answered is
  // not reported cut off before the failure timeout, so the leader does not remove the joiner
  // as a partial partition as it starts.
  const std::string otherIp = other.substr(0, other.rfind(':'));
  const int unheard = faults->add(
      {.from = "127.0.0.5", .to = otherIp, .types = {MessageType::kHeartbeat}, .drop = 1.0});
  // Counts the joiner's heartbeat and lease frames to the leader (its beats, its answers, its
  // lease requests: the leader need not be on its ring), as delayed.
  faults->add({.from = "127.0.0.5",
               .to = leaderIp,
               .types = {MessageType::kHeartbeat, MessageType::kLease},
               .delayMin = 1ms,
               .delayMax = 1ms});
  NodeOptions j = o;
  j.listenAddress = "127.0.0.5:0";
  // Two seeds: each attempt waits a quarter of joinTimeout (5 s) for its answer. The first, to
  // the leader, is answered but the answer is lost; the second, to the other member, is
  // redirected to the leader at once, and that join, sent again, must be answered with the id
  // given first. Without that, it queues until the joiner is declared failed (failureTimeout, 20
  // s) and is admitted again under a new id, or the joiner gives up.
  j.seeds = {leader->address, other};
  j.joinTimeout = 20s;
  const MemberId expected = before->nextMemberId;
  std::atomic<bool> listed{false}, removed{false};  // the joiner's view of its own admission
  j.onTopology = [&](const Topology& t) {
    if (t.hasMember(expected)) {
      listed = true;
    } else if (listed) {
      removed = true;
    }
  };
  Node joiner(j, ProcessorRegistry::withBuiltins());
  auto started = std::async(std::launch::async, [&] { return joiner.start(); });
  REQUIRE(eventually([&] { return faults->counts().dropped >= 1; }, 10s));
  faults->remove(lost);  // the join sent again is answered

  REQUIRE(started.wait_for(30s) == std::future_status::ready);
  const Result<bool> joined = started.get();
  INFO((joined ? std::string("joined") : joined.error().message()));
  REQUIRE(joined.ok());
  // The id the leader gave first: no second admission, and no member declared failed.
  CHECK(joiner.memberId() == expected);
  CHECK(eventually(
      [&] {
        const TopologyPtr t = cluster.at(0).topology();
        return t->members.size() == 4 && t->hasMember(expected) && t->syncing.empty() &&
               joiner.topology()->version == t->version && joiner.readiness().ok &&
               faults->counts().delayed >= 8;  // the leader has heard it for a while
      },
      20s));
  faults->remove(unheard);
  CHECK_FALSE(removed.load());
  // One change admitted it (two topologies: with the joiner syncing, then synced), and none
  // removed it.
  INFO("topology v" << before->version << " -> v" << cluster.at(0).topology()->version);
  CHECK(cluster.at(0).topology()->version - before->version == 2);
}

TEST_CASE("A fleet started at once through one seed forms, its joins admitted together",
          "[cluster][join]") {
  constexpr int kJoiners = 16;
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.joinTimeout = 60s;  // far above what a loaded sanitizer build needs
  TestCluster cluster(o);
  REQUIRE(cluster.start(1));
  const std::uint64_t before = cluster.at(0).topology()->version;
  const auto results = cluster.addAtOnce(kJoiners);
  for (const auto& r : results) {
    INFO((r.ok() ? std::string("started") : r.error().message()));
    CHECK(r.ok());
  }
  REQUIRE(eventually([&] { return cluster.settled(); }, 60s));
  const TopologyPtr t = cluster.at(0).topology();
  CHECK(t->members.size() == kJoiners + 1);
  // One change (two topologies: T1 with the newcomers syncing, then T2) per batch of joins, not
  // per joiner: a change each took 2 x 16 versions.
  INFO("topology v" << before << " -> v" << t->version);
  CHECK(t->version - before < 2 * kJoiners / 2);
}

TEST_CASE("A joiner whose seeds never answer gives up after joinTimeout, naming them",
          "[cluster][join]") {
  NodeOptions j = ingrid::testing::smallClusterOptions();
  j.listenAddress = "127.0.0.1:0";
  j.seeds = {"127.0.0.1:1"};  // nothing listens on port 1
  j.joinTimeout = 300ms;
  Node lonely(j);
  const auto started = lonely.start();
  REQUIRE_FALSE(started.ok());
  CHECK(started.error() == Errc::unreachable);
  CHECK_THAT(started.error().message(), Catch::Contains("127.0.0.1:1"));
  CHECK_THAT(started.error().message(), Catch::Contains("none answered for 300 ms"));
}

TEST_CASE("A join that finds no seed names the seed provider's failure in its error",
          "[cluster][join]") {
  // Port 1 on loopback: nothing listens there, so the seed refuses at once; the provider (a DNS
  // name that no longer resolves, say) fails every round.
  NodeOptions o = testing::smallClusterOptions();
  o.listenAddress = "127.0.0.1:0";
  o.seeds = {"127.0.0.1:1"};
  o.joinTimeout = 600ms;
  o.seedProvider = []() -> Result<std::vector<std::string>> {
    return Error(Errc::unreachable, "peers.example.invalid does not resolve");
  };
  Node node(o);
  const Result<bool> started = node.start();
  REQUIRE_FALSE(started.ok());
  CHECK_THAT(started.error().message(), Catch::Contains("127.0.0.1:1"));
  CHECK_THAT(
      started.error().message(),
      Catch::Contains("seed discovery: unreachable: peers.example.invalid does not resolve"));
}
