// Exactly-once retries: a request that went unanswered is sent again with the same id,
// and the partition's dedup table (grid/dedup_table.h) answers the copy with the original result.
// Faults come from FrameFaults (cluster/transport/frame_faults.h) between in-process members on
// 127.0.0.2-4.
#include <catch2/catch.hpp>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/use_future.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include <ingrid/client.h>
#include <ingrid/hash.h>
#include <ingrid/node.h>
#include <ingrid/partition_table.h>
#include <ingrid/processors/counter.h>

#include "cluster/transport/frame_faults.h"
#include "cluster/transport/messages.h"
#include "support/raw_client.h"

#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::eventually;
using ingrid::testing::TestCluster;

namespace {

ClientOptions clientOf(TestCluster& cluster) {
  ClientOptions c;
  for (Node* n : cluster.live()) c.seeds.push_back(n->listenAddress());
  c.suspectAfter = 100ms;  // an attempt unanswered for 200 ms is sent again
  c.requestTimeout = 20s;
  return c;
}

}  // namespace

TEST_CASE("A dropped reply: the client sends the request again with its id, and it runs once",
          "[exactly-once]") {
  auto faults = std::make_shared<FrameFaults>(/*seed=*/3);
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.frameFaults = faults;
  TestCluster cluster(o);
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(3));
  Client client(clientOf(cluster));
  REQUIRE(client.start());
  auto first = client.invoke("once", Increment{1});
  REQUIRE(first.ok());
  REQUIRE(*first == 1);

  // Every Invoke reply any member writes is lost: the increment runs on the primary (and its
  // backup), and the client hears nothing, so it sends it again, and again.
  faults->add({.types = {MessageType::kInvoke}, .drop = 1.0});
  auto pending = client.invokeAsync("once", Increment{5}, asio::use_future);
  // The first reply and at least two copies' replies were dropped.
  REQUIRE(eventually([&] { return faults->counts().dropped >= 3; }, 15s));
  faults->clear();
  REQUIRE(pending.wait_for(20s) == std::future_status::ready);
  auto answer = pending.get();
  REQUIRE(answer.ok());
  CHECK(*answer == 6);  // the original answer: the increment ran once, not once per copy
  auto now = client.invoke("once", GetCounter{});
  REQUIRE(now.ok());
  CHECK(*now == 6);
}

TEST_CASE("A copy of a request still replicating waits for its answer instead of being refused",
          "[exactly-once]") {
  auto faults = std::make_shared<FrameFaults>(/*seed=*/4);
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.frameFaults = faults;
  TestCluster cluster(o);
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(3));
  Client client(clientOf(cluster));  // an attempt unanswered for 200 ms is sent again
  REQUIRE(client.start());
  auto first = client.invoke("parked", Increment{1});
  REQUIRE(first.ok());
  // Replication and its acknowledgement take 300 ms, over the client's 200 ms attempt timeout
  // (and under the primary's 500 ms replication attempt): the client sends a copy at 200 ms, and
  // the primary holds it until the update is confirmed, within the copy's own attempt.
  faults->add({.types = {MessageType::kReplicate},
               .delayMin = std::chrono::milliseconds(150),
               .delayMax = std::chrono::milliseconds(150)});
  auto answer = client.invoke("parked", Increment{5});
  faults->clear();
  INFO((answer ? std::string("answered") : answer.error().message()));
  REQUIRE(answer.ok());
  CHECK(*answer == 6);
  std::uint64_t parked = 0;
  for (Node* n : cluster.live()) parked += n->TEST_parkedCopies();
  CHECK(parked >= 1);
  auto now = client.invoke("parked", GetCounter{});
  REQUIRE(now.ok());
  CHECK(*now == 6);  // ran once
}

TEST_CASE(
    "A promoted primary answers a request of its former primary only once every backup holds it",
    "[exactly-once][failover]") {
  // Two backups: the primary P runs the request, its update reaches the first backup B1 but not
  // the second, B2, and P is cut off before answering. The client's retry reaches B1, now the
  // primary, which holds the answer. Answering at once would leave B2 without the update; then B1
  // dies, B2 becomes the primary, and the acknowledged increment is gone.
  auto faults = std::make_shared<FrameFaults>(/*seed=*/5);
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.frameFaults = faults;
  o.backups = 2;
  o.voters = 5;  // two crashes leave a majority of the voters
  o.heartbeatInterval = 50ms;
  o.failureTimeout = 1000ms;
  TestCluster cluster(o);
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(5));
  Client client(clientOf(cluster));
  REQUIRE(client.start());

  const std::string key = "barrier";
  const TopologyPtr topo = cluster.at(0).topology();
  const PartitionId p = partitionOf(key, topo->table.partitionCount());
  const std::vector<MemberId> owners = topo->table.owners(p);
  REQUIRE(owners.size() == 3);
  std::size_t primary = 0, first = 0, second = 0;
  for (std::size_t i = 0; i < 5; ++i) {
    const MemberId id = cluster.at(i).memberId();
    if (id == owners[0]) primary = i;
    if (id == owners[1]) first = i;
    if (id == owners[2]) second = i;
  }
  auto ipOf = [&](std::size_t i) { return "127.0.0." + std::to_string(i + 2); };

  auto warm = client.invoke(key, Increment{1});
  REQUIRE(warm.ok());
  REQUIRE(*warm == 1);
  const std::uint64_t seqBefore = cluster.at(first).TEST_partitionSeq(p);

  // P's updates to B2 are lost; B1 gets them.
  faults->add(
      {.from = ipOf(primary), .to = ipOf(second), .types = {MessageType::kReplicate}, .drop = 1.0});
  auto pending = client.invokeAsync(key, Increment{5}, asio::use_future);
  REQUIRE(eventually([&] { return cluster.at(first).TEST_partitionSeq(p) > seqBefore; }, 15s));
  REQUIRE(faults->counts().dropped >= 1);
  CHECK(cluster.at(second).TEST_partitionSeq(p) == seqBefore);
  // B1's snapshots to B2 are lost for now: B2 cannot resync from B1 when B1 takes over.
  const int toSecond = faults->add(
      {.from = ipOf(first), .to = ipOf(second), .types = {MessageType::kSnapshot}, .drop = 1.0});
  // P is cut off (a crash would wait for P's request to end): the others declare it failed, B1
  // takes over, and the client's retry reaches it.
  faults->add({.from = ipOf(primary), .cut = true});
  faults->add({.to = ipOf(primary), .cut = true});
  REQUIRE(eventually(
      [&] {
        return cluster.at(first).TEST_barriers() >= 1 ||
               pending.wait_for(0s) == std::future_status::ready;
      },
      20s));
  // B1 holds the answer, but B2 lacks the update: the answer waits for B2.
  CHECK(pending.wait_for(0s) != std::future_status::ready);
  CHECK(cluster.at(second).TEST_partitionSeq(p) == seqBefore);
  faults->remove(toSecond);  // B2 resyncs, and acknowledges the barrier

  REQUIRE(pending.wait_for(20s) == std::future_status::ready);
  auto answer = pending.get();
  INFO((answer ? std::string("answered") : answer.error().message()));
  REQUIRE(answer.ok());
  CHECK(*answer == 6);  // the answer P gave: it ran once
  CHECK(cluster.at(second).TEST_partitionSeq(p) > seqBefore);

  // B1 dies too: B2, the primary now, holds the acknowledged increment.
  cluster.crash(first);
  auto now = client.invoke(key, GetCounter{});  // served once B2 has taken over
  INFO((now ? std::string("read") : now.error().message()));
  REQUIRE(now.ok());
  CHECK(*now == 6);
  CHECK(cluster.at(second).topology()->table.primary(p) == owners[2]);
  faults->clear();  // P hears that it was removed, and its stranded request ends
}

namespace {

// A port that accepts connections (the kernel completes the handshake into the backlog) and never
// answers: a frozen member, or another program on a seed's port.
struct SilentSeed {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io,
                                   asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::string address() const {
    return "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port());
  }
};

}  // namespace

TEST_CASE("Seed failover: a silent first seed does not stop a client or a joining node",
          "[exactly-once][seeds]") {
  SilentSeed silent;
  TestCluster cluster(ingrid::testing::smallClusterOptions());
  REQUIRE(cluster.start(1));
  const std::string good = cluster.live().front()->listenAddress();

  ClientOptions c;
  c.seeds = {silent.address(), good};
  c.connectTimeout = 5s;  // the silent seed is asked first; the good one after a short delay
  Client client(c);
  const auto started = client.start();
  INFO((started ? std::string("started") : started.error().message()));
  REQUIRE(started.ok());
  auto r = client.invoke("seeded", Increment{1});
  REQUIRE(r.ok());
  CHECK(*r == 1);

  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.listenAddress = "127.0.0.1:0";
  o.seeds = {silent.address(), good};
  o.joinTimeout = 5s;  // each seed gets its share: the silent one cannot take it all
  Node joiner(o);
  const auto joined = joiner.start();
  INFO((joined ? std::string("joined") : joined.error().message()));
  REQUIRE(joined.ok());
  CHECK(eventually([&] { return joiner.topology()->members.size() == 2; }, 20s));
  joiner.stop();
}

TEST_CASE("A copy that arrives after its wall-clock deadline is refused and never runs",
          "[exactly-once]") {
  // What a copy delayed in transit (a blackholed link, a long queue) looks like on arrival: its
  // time left says 5 s, but the deadline it was sent with passed a minute ago. Relative to its
  // arrival it would look fresh, and past the dedup window it would run a second time.
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.shardPorts = false;  // one port to send the raw frame to
  TestCluster cluster(o);
  REQUIRE(cluster.start(1));
  Node& node = cluster.at(0);
  const auto unixMs = [] {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  };
  InvokeRequest late{"late-copy",          std::string(Increment::kName),
                     encode(Increment{1}),
                     /*client=*/77,        /*seq=*/1,
                     /*doneBelow=*/1,      /*timeoutMs=*/5000,
                     unixMs() - 60'000};
  ingrid::testing::RawClient raw;
  auto conn = raw.connect(node.listenAddress());
  const std::uint64_t executed = node.TEST_executed();
  Result<Frame> refused = ingrid::testing::RawClient::send(*conn, MessageType::kInvoke,
                                                           node.topology()->version, encode(late));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error() == Errc::timeout);
  CHECK_THAT(refused.error().message(),
             Catch::Contains("after its deadline") && Catch::Contains("not run"));
  CHECK(node.TEST_executed() == executed);

  // The same request on time runs once.
  InvokeRequest onTime = late;
  onTime.deadlineUnixMs = unixMs() + 5000;
  Result<Frame> ran = ingrid::testing::RawClient::send(*conn, MessageType::kInvoke,
                                                       node.topology()->version, encode(onTime));
  INFO((ran.ok() ? std::string() : ran.error().message()));
  REQUIRE(ran.ok());
  CHECK(node.TEST_executed() == executed + 1);
}

TEST_CASE("The cluster publishes its dedup window and a client retries no longer than half of it",
          "[exactly-once]") {
  // Every write is refused (two copies wanted, one member): the client retries it until its
  // deadline, which its own requestTimeout (an hour) would put past the window.
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.dedupWindow = 4000ms;
  o.requestTimeout = 2000ms;
  o.minInSyncReplicas = 2;
  TestCluster cluster(o);
  REQUIRE(cluster.start(1));
  CHECK(cluster.at(0).topology()->dedupWindowMs == 4000);
  ClientOptions c = clientOf(cluster);
  c.requestTimeout = std::chrono::hours(1);
  Client client(c);
  REQUIRE(client.start());
  auto pending = client.invokeAsync("capped", Increment{1}, asio::use_future);
  REQUIRE(pending.wait_for(60s) == std::future_status::ready);
  auto answer = pending.get();
  REQUIRE_FALSE(answer.ok());
  INFO(answer.error().message());
  CHECK_THAT(answer.error().message(), Catch::Contains("minInSyncReplicas"));
}

TEST_CASE("Every topology publishes the dedup window, after joins and a failure too",
          "[exactly-once]") {
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.dedupWindow = 30000ms;
  o.heartbeatInterval = 50ms;
  o.failureTimeout = 1000ms;
  TestCluster cluster(o);
  REQUIRE(cluster.start(3));
  cluster.crash(2);
  REQUIRE(eventually([&] { return cluster.settled() && cluster.live().size() == 2; }));
  for (Node* n : cluster.live()) {
    CHECK(n->topology()->version > 3);  // joins and the failure each committed topologies
    CHECK(n->topology()->dedupWindowMs == 30000);
  }
}
