// Exactly-once retries (issue 9): a request that went unanswered is sent again with the same id,
// and the partition's dedup table (grid/dedup_table.h) answers the copy with the original result.
// Faults come from FrameFaults (cluster/frame_faults.h) between in-process members on 127.0.0.2-4.
#include <catch2/catch.hpp>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/use_future.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include <ingrid/client/client.h>
#include <ingrid/cluster/frame_faults.h>
#include <ingrid/cluster/node.h>
#include <ingrid/processors/counter.h>

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
