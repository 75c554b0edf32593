// Joining through a lossy network: a join sent again is the same join (same incarnation), and is
// answered with the same member id. Faults come from FrameFaults between in-process members on
// distinct loopback addresses.
#include <catch2/catch.hpp>

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
  NodeOptions j = o;
  j.listenAddress = "127.0.0.5:0";
  // Two seeds: each attempt waits a quarter of joinTimeout (5 s) for its answer. The first, to
  // the leader, is answered but the answer is lost; the second, to the other member, is
  // redirected to the leader at once, and that join, sent again, must be answered with the id
  // given first. Without that, it queues until the joiner is declared failed (failureTimeout, 10
  // s) and is admitted again under a new id, or the joiner gives up.
  j.seeds = {leader->address, other};
  j.joinTimeout = 20s;
  Node joiner(j, ProcessorRegistry::withBuiltins());
  auto started = std::async(std::launch::async, [&] { return joiner.start(); });
  REQUIRE(eventually([&] { return faults->counts().dropped >= 1; }, 10s));
  faults->remove(lost);  // the join sent again is answered

  REQUIRE(started.wait_for(30s) == std::future_status::ready);
  const Result<bool> joined = started.get();
  INFO((joined ? std::string("joined") : joined.error().message()));
  REQUIRE(joined.ok());
  // The id the leader gave first: no second admission, and no member declared failed.
  CHECK(joiner.memberId() == before->nextMemberId);
  CHECK(eventually(
      [&] {
        const TopologyPtr t = cluster.at(0).topology();
        return t->members.size() == 4 && t->hasMember(joiner.memberId()) && t->syncing.empty() &&
               joiner.topology()->version == t->version;
      },
      20s));
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
