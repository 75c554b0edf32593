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

  const int lost = faults->add(
      {.from = leaderIp, .to = "127.0.0.5", .types = {MessageType::kJoin}, .drop = 1.0});
  NodeOptions j = o;
  j.listenAddress = "127.0.0.5:0";
  j.seeds = {leader->address};
  j.joinTimeout = 8s;  // one seed: each attempt waits 4 s, so there is time for exactly two
  Node joiner(j, ProcessorRegistry::withBuiltins());
  auto started = std::async(std::launch::async, [&] { return joiner.start(); });
  REQUIRE(eventually([&] { return faults->counts().dropped >= 1; }, 10s));
  faults->remove(lost);  // the join sent again is answered

  REQUIRE(started.wait_for(20s) == std::future_status::ready);
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
