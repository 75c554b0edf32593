// Shard ports (NodeOptions::shardPorts): each worker takes clients' invocations on a port of its
// own; the thin client sends each call to the shard port of its partition.
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include <ingrid/client.h>
#include <ingrid/node.h>
#include <ingrid/processors/counter.h>
#include <ingrid/processors/token_bucket.h>

#include "cluster/transport/messages.h"
#include "cluster/transport/transport.h"

#include "support/raw_client.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::RawClient;
using ingrid::testing::TestCluster;

namespace {

constexpr unsigned kWorkers = 2;

ClientOptions clientOf(TestCluster& cluster) {
  ClientOptions c;
  for (Node* n : cluster.live()) c.seeds.push_back(n->listenAddress());
  return c;
}

// Summed over the live nodes: invocations run in place on a shard port, forwarded to another
// worker, and executed at all (by any port).
struct Counts {
  std::uint64_t inPlace = 0, forwarded = 0, executed = 0;
};
Counts countsOf(TestCluster& cluster) {
  Counts c;
  for (Node* n : cluster.live()) {
    const auto [inPlace, forwarded] = n->TEST_shardInvocations();
    c.inPlace += inPlace;
    c.forwarded += forwarded;
    c.executed += n->TEST_executed();
  }
  return c;
}

// "host:port" of worker w's shard port of `node`, from its topology entry.
std::string shardAddress(Node& node, unsigned w) {
  const TopologyPtr t = node.topology();  // held while `me` is read
  const MemberInfo* me = t->member(node.memberId());
  REQUIRE(me != nullptr);
  REQUIRE(me->shardPorts.size() > w);
  return parseAddress(node.listenAddress())->first + ":" + std::to_string(me->shardPorts[w]);
}

// One started node with kWorkers workers and no backups.
struct OneNode {
  OneNode() : cluster(options()) { REQUIRE(cluster.start(1)); }
  static NodeOptions options() {
    NodeOptions o = testing::smallClusterOptions(nullptr, kWorkers);
    o.backups = 0;
    return o;
  }
  Node& node() { return cluster.at(0); }
  TestCluster cluster;
};

// A key of a partition that worker w of a node with kWorkers workers owns.
std::string keyOfWorker(unsigned w, std::uint32_t partitions) {
  for (int i = 0; i < 10000; ++i) {
    std::string key = "key-" + std::to_string(i);
    if (partitionOf(key, partitions) % kWorkers == w) return key;
  }
  FAIL("no key found for worker " << w);
  return {};
}

// Acquires one token of `key` (capacity 3, no refill within the test) `times` times; the grants.
int acquire(Client& client, const std::string& key, int times) {
  const BucketParams bucket = BucketParams::perPeriod(3, std::chrono::nanoseconds(1h).count());
  int granted = 0;
  for (int i = 0; i < times; ++i) {
    auto r = client.invoke(key, TokenBucketAcquire{bucket, 1});
    INFO(key << ": " << (r.ok() ? std::string("granted or refused") : r.error().message()));
    REQUIRE(r.ok());
    granted += r->granted ? 1 : 0;
  }
  return granted;
}

}  // namespace

TEST_CASE("Each worker listens on a shard port, listed in its member's topology entry",
          "[cluster][shard]") {
  TestCluster cluster(testing::smallClusterOptions(nullptr, kWorkers));
  REQUIRE(cluster.start(3));
  const TopologyPtr t = cluster.at(0).topology();
  for (Node* n : cluster.live()) {
    const MemberInfo* m = t->member(n->memberId());
    REQUIRE(m != nullptr);
    REQUIRE(m->shardPorts.size() == kWorkers);
    CHECK(m->shardPorts[0] != m->shardPorts[1]);
    for (std::uint16_t port : m->shardPorts) {
      CHECK(port != parseAddress(n->listenAddress())->second);
    }
  }
  SECTION("none with the partitions on the network thread, or with shard ports off") {
    NodeOptions o = testing::smallClusterOptions(nullptr, kWorkers);
    o.listenAddress = "127.0.0.1:0";
    o.backups = 0;
    for (bool onNetwork : {true, false}) {
      o.partitionsOnNetworkThread = onNetwork;
      o.shardPorts = !onNetwork ? false : true;
      Node node(o);
      REQUIRE(node.start().ok());
      CHECK(node.topology()->member(node.memberId())->shardPorts.empty());
    }
  }
}

TEST_CASE("A thin client sends each call to its partition's shard port, where its worker runs it",
          "[cluster][shard]") {
  TestCluster cluster(testing::smallClusterOptions(nullptr, kWorkers));
  REQUIRE(cluster.start(3));
  const Counts before = countsOf(cluster);
  ClientOptions o = clientOf(cluster);
  SECTION("shard-aware (the default): every call runs on the worker that read it") {
    Client client(o);
    REQUIRE(client.start().ok());
    int granted = 0;
    for (int k = 0; k < 64; ++k) granted += acquire(client, "bucket-" + std::to_string(k), 4);
    CHECK(granted == 64 * 3);  // exact: capacity 3 each, the fourth refused
    const Counts after = countsOf(cluster);
    CHECK(after.executed - before.executed == 64 * 4);
    // Each execution was read on a shard port by its worker (a retried copy would add to inPlace
    // without running again), none came through a member port, none needed forwarding.
    CHECK(after.inPlace - before.inPlace >= after.executed - before.executed);
    CHECK(after.forwarded == before.forwarded);
  }
  SECTION("not shard-aware: every call goes to the member port") {
    o.shardAware = false;
    Client client(o);
    REQUIRE(client.start().ok());
    CHECK(acquire(client, "plain", 5) == 3);
    const Counts after = countsOf(cluster);
    CHECK(after.executed - before.executed == 5);
    CHECK(after.inPlace == before.inPlace);
  }
}

TEST_CASE("A client's calls fall back to the member port when a shard port closes",
          "[cluster][shard]") {
  // No backups: closing the shard ports also closes the replication path (one per partition and
  // backup, never the member link), which the next test case shows.
  NodeOptions options = testing::smallClusterOptions(nullptr, kWorkers);
  options.backups = 0;
  TestCluster cluster(options);
  REQUIRE(cluster.start(3));
  Client client(clientOf(cluster));
  REQUIRE(client.start().ok());
  CHECK(acquire(client, "falls-back", 2) == 2);
  for (Node* n : cluster.live()) n->TEST_closeShardPorts();
  const Counts closed = countsOf(cluster);
  CHECK(acquire(client, "falls-back", 2) == 1);  // the bucket's third token, then none
  const Counts after = countsOf(cluster);
  CHECK(after.executed - closed.executed == 2);
  CHECK(after.inPlace == closed.inPlace);
  // A leave hands its partitions over on the shard ports, closed here: no leave.
  cluster.crashAll();
}

// Summed over the live nodes: replication batches applied by the thread that read them, and
// handed to the workers from another thread (TEST_replicateBatches).
std::pair<std::uint64_t, std::uint64_t> batchesOf(TestCluster& cluster) {
  std::pair<std::uint64_t, std::uint64_t> sum{0, 0};
  for (Node* n : cluster.live()) {
    const auto [inPlace, dispatched] = n->TEST_replicateBatches();
    sum.first += inPlace;
    sum.second += dispatched;
  }
  return sum;
}

// Crashes the primary of `key` (the cluster's node index i whose id it is).
void crashPrimaryOf(TestCluster& cluster, const std::string& key) {
  const TopologyPtr t = cluster.live().front()->topology();
  const MemberId primary = t->table.primary(partitionOf(key, t->table.partitionCount()));
  for (std::size_t i = 0; i < 3; ++i) {
    if (cluster.at(i).memberId() == primary) {
      cluster.crash(i);
      // Its backups took over once the cluster moved on without it.
      REQUIRE(testing::eventually([&] { return cluster.settled(); }, 30s));
      return;
    }
  }
  FAIL("no live node is member " << primary);
}

TEST_CASE(
    "A primary's worker replicates to the backup's worker that owns the partition on a "
    "shard link of its own, its one path: never by the member link while the shard port is cut",
    "[cluster][shard]") {
  NodeOptions o = testing::smallClusterOptions(nullptr, kWorkers);  // one backup
  o.heartbeatInterval = 100ms;  // a crashed primary is replaced within seconds
  o.failureTimeout = 1500ms;
  o.electionTimeout = 300ms;
  TestCluster cluster(o);
  REQUIRE(cluster.start(3));
  Client client(clientOf(cluster));
  REQUIRE(client.start().ok());
  const auto before = batchesOf(cluster);
  SECTION("shard links: each batch applied by the worker that read it, and held by the backup") {
    int granted = 0;
    for (int k = 0; k < 32; ++k) granted += acquire(client, "replicated-" + std::to_string(k), 2);
    CHECK(granted == 64);
    const auto after = batchesOf(cluster);
    CHECK(after.first > before.first);
    CHECK(after.second == before.second);  // no batch crossed to a worker from another thread
    // The backup holds what the primary acknowledged: after the primary's crash, the promoted
    // backup has one token left of three, not three.
    crashPrimaryOf(cluster, "replicated-0");
    CHECK(acquire(client, "replicated-0", 2) == 1);
  }
  SECTION("shard ports closed: the update waits for its path and fails, not acknowledged") {
    REQUIRE(testing::eventually([&] { return cluster.at(0).clusterSafe().ok; }));
    for (Node* n : cluster.live()) n->TEST_closeShardPorts();
    const BucketParams bucket = BucketParams::perPeriod(3, std::chrono::nanoseconds(1h).count());
    auto r = client.invoke("cut-0", TokenBucketAcquire{bucket, 1});
    REQUIRE_FALSE(r.ok());  // run on the primary, never held by its backup: no acknowledgement
    INFO(r.error().message());
    CHECK((r.error() == Errc::indeterminate || r.error() == Errc::timeout));
    const auto after = batchesOf(cluster);
    CHECK(after.second == before.second);  // no batch came by a member port
    // The backup lacks that update: no member calls the cluster safe to lose a member, and each
    // says why (its own primary's report, or another member's).
    for (Node* n : cluster.live()) {
      const Probe safe = n->clusterSafe();
      INFO("member " << n->memberId() << ": " << safe.reason);
      CHECK_FALSE(safe.ok);
      CHECK_THAT(safe.reason, Catch::Contains("lacks an update"));
    }
    cluster.crashAll();  // a leave would hand partitions over on the closed shard ports
  }
}

TEST_CASE("A member sends its embedded calls on remote partitions to the primary's shard port",
          "[cluster][shard]") {
  TestCluster cluster(testing::smallClusterOptions(nullptr, kWorkers));
  REQUIRE(cluster.start(3));
  const TopologyPtr t = cluster.at(0).topology();
  Node& caller = cluster.at(0);
  int remote = 0;
  for (int k = 0; k < 32; ++k) {
    const std::string key = "embedded-" + std::to_string(k);
    Node* primary = cluster.byId(t->table.primary(partitionOf(key, t->table.partitionCount())));
    REQUIRE(primary != nullptr);
    if (primary == &caller) continue;
    ++remote;
    const auto before = primary->TEST_shardInvocations();
    auto r = caller.invoke(key, Increment{2});
    REQUIRE(r.ok());
    CHECK(*r == 2);
    const auto after = primary->TEST_shardInvocations();
    // Read and run by the worker that owns it (more than once if a try was refused for want of
    // a lease and sent again; the counter's value shows it ran once).
    CHECK(after.first >= before.first + 1);
    CHECK(after.second == before.second);
  }
  CHECK(remote > 0);
}

TEST_CASE("An invocation on another worker's shard port is forwarded inside the node",
          "[cluster][shard]") {
  OneNode one;
  Node& node = one.node();
  RawClient raw;
  auto shard0 = raw.connect(shardAddress(node, 0));
  const std::uint32_t partitions = node.topology()->table.partitionCount();
  // A write refused for want of a lease ("unavailable": nothing changed; a loaded machine can
  // delay the first grant or a renewal) is sent again, as a client would; each try is counted.
  const auto invoke = [&](const std::string& key) {
    Result<Frame> r = Error(Errc::unavailable, "not sent");
    const bool answered = testing::eventually([&] {
      r = RawClient::send(
          *shard0, MessageType::kInvoke, 0,
          encode(InvokeRequest{key, std::string(Increment::kName), encode(Increment{5})}));
      return r.ok() || r.error() != Errc::unavailable;
    });
    INFO((r.ok() ? std::string("answered") : r.error().message()));
    REQUIRE(answered);
    REQUIRE(r.ok());
    REQUIRE(r->header.type == MessageType::kInvoke);
    return decode<std::int64_t>(decode<InvokeReply>(r->body).result);
  };
  CHECK(invoke(keyOfWorker(1, partitions)) == 5);
  const auto first = node.TEST_shardInvocations();  // (run in place, forwarded)
  CHECK(first.first == 0);
  CHECK(first.second >= 1);
  CHECK(invoke(keyOfWorker(0, partitions)) == 5);
  const auto second = node.TEST_shardInvocations();
  CHECK(second.first >= 1);
  CHECK(second.second == first.second);
  CHECK(*node.invoke(keyOfWorker(1, partitions), GetCounter{}) == 5);  // one copy, applied once
}

TEST_CASE("A shard port takes a client's Hello, Auth and Invoke only: the rest get a clear error",
          "[cluster][shard][bad_frames]") {
  OneNode one;
  Node& node = one.node();
  RawClient raw;
  SECTION("a member-port request names the member port") {
    auto conn = raw.connect(shardAddress(node, 1));
    auto r = RawClient::send(*conn, MessageType::kGetTopology, 0, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::protocol_error);
    CHECK_THAT(r.error().detail(), Catch::Contains("GetTopology is not taken on a shard port") &&
                                       Catch::Contains(node.listenAddress()));
  }
  SECTION("a member's Hello is answered as on the member port, with this member's identity") {
    auto conn = raw.connect(shardAddress(node, 0));
    auto r = RawClient::send(*conn, MessageType::kHello, 0,
                             encode(HelloBody{HelloBody::kPeer, 9, "127.0.0.1:1", {}, {}}));
    REQUIRE(r.ok());
    CHECK(r->header.type == MessageType::kHello);
    CHECK(decode<HelloBody>(r->body).memberId == node.memberId());
  }
  SECTION("a malformed Invoke is refused; the port serves the next connection") {
    auto conn = raw.connect(shardAddress(node, 0));
    auto r = RawClient::send(*conn, MessageType::kInvoke, 0, std::string("\x01\x02", 2));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Errc::malformed_message);
    auto next = raw.connect(shardAddress(node, 0));
    // A node that has just started may not hold its primary lease yet: it refuses the write as
    // unavailable, having run nothing, and a client sends it again (this one too, bounded).
    Result<Frame> ok = Error(Errc::unavailable, "not sent yet");
    CHECK(testing::eventually([&] {
      ok = RawClient::send(
          *next, MessageType::kInvoke, 0,
          encode(InvokeRequest{"after", std::string(Increment::kName), encode(Increment{1})}));
      return ok.ok() || ok.error() != Errc::unavailable;
    }));
    INFO((ok.ok() ? std::string("answered") : ok.error().message()));
    REQUIRE(ok.ok());
    CHECK(ok->header.type == MessageType::kInvoke);
  }
}

TEST_CASE("Shard ports ask for the client secret as the member port does", "[cluster][shard]") {
  NodeOptions o = testing::smallClusterOptions(nullptr, kWorkers);
  o.clusterSecret = "cluster-secret";
  o.clientSecret = "client-secret";
  TestCluster cluster(o);
  REQUIRE(cluster.start(2));
  Node& node = cluster.at(0);
  RawClient raw;
  auto conn = raw.connect(shardAddress(node, 0));
  auto refused = RawClient::send(
      *conn, MessageType::kInvoke, 0,
      encode(InvokeRequest{"k", std::string(Increment::kName), encode(Increment{1})}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error() == Errc::unauthenticated);

  const Counts before = countsOf(cluster);
  ClientOptions c = clientOf(cluster);
  c.clientSecret = "client-secret";
  Client client(c);
  REQUIRE(client.start().ok());
  CHECK(acquire(client, "secret-bucket", 4) == 3);
  const Counts after = countsOf(cluster);
  CHECK(after.inPlace - before.inPlace >= 4);
}
