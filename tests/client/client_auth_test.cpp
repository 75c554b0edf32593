// Client authentication (NodeOptions::clientSecret, ClientOptions::clientSecret): members serve
// a thin client only once it proved the client secret; one with none or another is refused with
// an error that names the reason, at once (not at a deadline), and the members serve on.
#include <ingrid/client.h>

#include <catch2/catch.hpp>

#include <string>

#include <ingrid/node.h>
#include <ingrid/processors/counter.h>

#include "cluster/transport/messages.h"

#include "support/test_cluster.h"

using namespace ingrid;
using ingrid::testing::TestCluster;

namespace {

NodeOptions secured() {
  NodeOptions o = ingrid::testing::smallClusterOptions(nullptr);
  o.clusterSecret = "members only";
  o.clientSecret = "clients too";
  return o;
}

ClientOptions authClientOf(TestCluster& cluster, const std::string& secret) {
  ClientOptions c;
  for (Node* n : cluster.live()) c.seeds.push_back(n->listenAddress());
  c.clientSecret = secret;
  return c;
}

}  // namespace

TEST_CASE(
    "With a client secret, members serve a client that proves it and refuse one with none or "
    "another, naming the reason",
    "[client][auth]") {
  TestCluster cluster(secured());
  REQUIRE(cluster.start(3));

  Client good(authClientOf(cluster, "clients too"));
  REQUIRE(good.start().ok());
  for (int i = 0; i < 30; ++i) {  // keys on every member: each link proves the secret
    auto r = good.invoke("k" + std::to_string(i), Increment{1});
    REQUIRE(r.ok());
    CHECK(*r == 1);
  }
  CHECK(good.topologyOf(cluster.at(1).listenAddress()).ok());
  CHECK(good.statusOf(cluster.at(2).listenAddress()).ok());

  SECTION("no secret") {
    Client none(authClientOf(cluster, ""));
    const auto started = none.start();
    REQUIRE_FALSE(started.ok());
    CHECK(started.error() == Errc::unauthenticated);
    CHECK_THAT(started.error().message(),
               Catch::Contains("clients must prove the client secret") &&
                   Catch::Contains("before GetTopology, and this one did not"));
  }
  SECTION("another secret") {
    Client wrong(authClientOf(cluster, "a guess"));
    const auto started = wrong.start();
    REQUIRE_FALSE(started.ok());
    CHECK(started.error() == Errc::unauthenticated);
    CHECK_THAT(started.error().message(),
               Catch::Contains("its proof does not match the client secret"));
  }
  // The members and the good client carry on.
  auto again = good.invoke("k0", Increment{1});
  REQUIRE(again.ok());
  CHECK(*again == 2);
}

TEST_CASE("A client secret without a cluster secret is refused: a client could pose as a member",
          "[client][auth]") {
  NodeOptions o = ingrid::testing::smallClusterOptions(nullptr);
  o.clientSecret = "clients";
  o.listenAddress = "127.0.0.1:0";
  Node node(o);
  const auto started = node.start();
  REQUIRE_FALSE(started.ok());
  CHECK(started.error() == Errc::invalid_configuration);
  CHECK_THAT(started.error().message(), Catch::Contains("clientSecret needs a clusterSecret"));
}
