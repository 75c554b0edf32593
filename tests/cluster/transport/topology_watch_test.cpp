// Topology watches: a member holds a GetTopology that carries a WatchTopologyBody until it installs
// a newer topology (or the wait runs out), and a Client keeps watches at two members, so it
// learns a change without sending a call or polling.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>

#include <ingrid/client.h>
#include <ingrid/node.h>

#include "cluster/transport/messages.h"

#include "support/eventually.h"
#include "support/raw_client.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::eventually;
using ingrid::testing::RawClient;
using ingrid::testing::TestCluster;

namespace {

// Sends `watch` on `conn` and returns the future answer.
std::shared_ptr<std::promise<Result<Frame>>> sendWatch(Connection& conn, WatchTopologyBody watch,
                                                       std::chrono::milliseconds timeout) {
  auto answered = std::make_shared<std::promise<Result<Frame>>>();
  conn.request(MessageType::kGetTopology, watch.after, encode(watch), timeout,
               [answered](Result<Frame> r) { answered->set_value(std::move(r)); });
  return answered;
}

std::uint64_t versionOf(const Result<Frame>& r) {
  REQUIRE(r.ok());
  return decode<TopologyBody>(r->body).topology.version;
}

}  // namespace

TEST_CASE("A watch is held until the member installs a newer topology, then answered with it",
          "[cluster][watch]") {
  TestCluster cluster(ingrid::testing::smallClusterOptions());
  REQUIRE(cluster.start(2));
  const std::uint64_t before = cluster.at(0).topology()->version;
  RawClient raw;
  auto conn = raw.connect(cluster.at(0).listenAddress());

  SECTION("a member that already has a newer one answers at once") {
    auto answered = sendWatch(*conn, WatchTopologyBody{before - 1, 60'000}, 10s);
    auto f = answered->get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(versionOf(f.get()) == before);
  }
  SECTION("held across a join, answered with the topology that admits the joiner") {
    auto answered = sendWatch(*conn, WatchTopologyBody{before, 60'000}, 60s);
    auto f = answered->get_future();
    // Nothing newer yet: still held (the member has answered its other requests meanwhile).
    REQUIRE(RawClient::send(*conn, MessageType::kGetTopology, 0, {}).ok());
    CHECK(f.wait_for(0s) == std::future_status::timeout);
    Node& joiner = cluster.add();
    REQUIRE(cluster.lastStart().ok());
    REQUIRE(f.wait_for(30s) == std::future_status::ready);
    const Result<Frame> r = f.get();
    REQUIRE(r.ok());
    const Topology t = decode<TopologyBody>(r->body).topology;
    CHECK(t.version > before);
    CHECK(t.hasMember(joiner.memberId()));
  }
  SECTION("a wait that runs out is answered with the topology unchanged") {
    auto answered = sendWatch(*conn, WatchTopologyBody{before, 50}, 10s);
    auto f = answered->get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(versionOf(f.get()) == before);
  }
  SECTION("a second watch on one connection answers the first at once") {
    auto first = sendWatch(*conn, WatchTopologyBody{before, 60'000}, 60s);
    auto f1 = first->get_future();
    // Held: the member has answered a later request on the connection, and not this one.
    REQUIRE(RawClient::send(*conn, MessageType::kGetTopology, 0, {}).ok());
    REQUIRE(f1.wait_for(0s) == std::future_status::timeout);
    auto second = sendWatch(*conn, WatchTopologyBody{before, 50}, 10s);
    auto f2 = second->get_future();
    REQUIRE(f1.wait_for(10s) == std::future_status::ready);
    CHECK(versionOf(f1.get()) == before);
    REQUIRE(f2.wait_for(10s) == std::future_status::ready);
    CHECK(versionOf(f2.get()) == before);
  }
  SECTION("a watch that does not decode is refused, naming it, and the member serves on") {
    const Result<Frame> r = RawClient::send(*conn, MessageType::kGetTopology, 0, "\x01");
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message());
    CHECK(r.error() == Errc::malformed_message);
    auto conn2 = raw.connect(cluster.at(0).listenAddress());
    CHECK(RawClient::send(*conn2, MessageType::kGetTopology, 0, {}).ok());
  }
}

TEST_CASE("A client learns a topology change from its watches, without a call or a poll",
          "[cluster][watch]") {
  TestCluster cluster(ingrid::testing::smallClusterOptions());
  REQUIRE(cluster.start(2));
  ClientOptions co;
  co.seeds = {cluster.at(0).listenAddress()};
  // Polling is only started by a call left unanswered, and this client sends none.
  const bool watching = GENERATE(true, false);
  co.watchTopology = watching;
  Client client(co);
  REQUIRE(client.start().ok());
  const std::uint64_t before = client.topology()->version;
  Node& joiner = cluster.add();
  REQUIRE(cluster.lastStart().ok());
  const std::uint64_t after = cluster.at(0).topology()->version;
  REQUIRE(after > before);
  if (watching) {
    CHECK(eventually([&] { return client.topology()->hasMember(joiner.memberId()); }, 30s));
  } else {
    // The cluster has moved on; without a watch, and with no call, this client has not heard.
    CHECK(eventually([&] { return cluster.at(1).topology()->version >= after; }, 30s));
    CHECK(client.topology()->version == before);
  }
}
