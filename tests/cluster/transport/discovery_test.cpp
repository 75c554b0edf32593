// Seed discovery (include/ingrid/discovery.h): dnsSeeds resolves a name at each call into one
// candidate per address; Nodes that find each other through one name form one cluster
// (NodeOptions::bootstrapExpect), and one started later joins it. The name is published per host
// by HostLab (an /etc/hosts per network namespace), as a headless service's records would be.
#include <ingrid/discovery.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "support/fault_harness.h"
#include "support/hosts.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::Convergence;
using ingrid::testing::FaultCluster;
using ingrid::testing::FaultClusterOptions;
using ingrid::testing::HostLab;

TEST_CASE("dnsSeeds: every address of a name with the port, and errors naming the name",
          "[cluster][discovery]") {
  const auto local = dnsSeeds("localhost", 7400)();
  REQUIRE(local.ok());
  CHECK(std::count(local->begin(), local->end(), "127.0.0.1:7400") == 1);
  for (const std::string& a : *local) CHECK((a == "127.0.0.1:7400" || a == "[::1]:7400"));

  const auto empty = dnsSeeds("", 7400)();
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error() == Errc::invalid_argument);
  const auto noPort = dnsSeeds("localhost", 0)();
  REQUIRE_FALSE(noPort.ok());
  CHECK(noPort.error() == Errc::invalid_argument);
  CHECK_THAT(noPort.error().message(), Catch::Contains("localhost"));
}

TEST_CASE(
    "Nodes started at once that find each other by one DNS name form one cluster, and one "
    "started later joins it",
    "[cluster][discovery][hosts]") {
  constexpr int kHosts = 4;
  HostLab lab(kHosts);  // declared first: it outlives the processes in it
  if (!lab.error().empty()) {
    if (HostLab::required())
      FAIL("cannot make the hosts (required as root or with CI set): " << lab.error());
    WARN("skipped: " << lab.error());
    return;
  }
  HostLab::Enter inLab(lab);
  REQUIRE(inLab.entered());
  const std::string name = "ingrid-peers";
  REQUIRE(lab.publishName(name, {0, 1, 2}));
  INFO(lab.output());

  // The lab has no DNS server: a name /etc/hosts does not list fails, naming it.
  const auto unknown = dnsSeeds("no-such-peers.invalid", HostLab::kPort)();
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error() == Errc::unreachable);
  CHECK_THAT(unknown.error().message(), Catch::Contains("no-such-peers.invalid"));

  FaultClusterOptions o;
  o.members = 3;
  o.launchers = lab.launchers();
  o.listen.assign(kHosts, HostLab::listen());
  o.args = {
      "--partitions",         "64",   "--workers",  "1",
      "--failure-timeout-ms", "2000", "--seed-dns", name + ":" + std::to_string(HostLab::kPort),
      "--bootstrap-expect",   "3"};
  FaultCluster cluster(o);
  // Started together with the same flags, as a StatefulSet's pods are: one cluster, started by
  // the smallest address (host 0), which the others joined.
  const std::string started = cluster.startAtOnce();
  INFO(started);
  REQUIRE(started.empty());
  CHECK(cluster[0].address == HostLab::endpoint(0));
  CHECK(cluster[0].memberId == 1);
  CHECK(cluster[0].waitForLine("starts a new cluster", 1s).has_value());
  for (std::size_t i = 1; i < cluster.size(); ++i) {
    INFO(cluster[i].tail());
    CHECK(cluster[i].memberId > 1);
  }

  // A fourth node once the name lists it: it finds a cluster, so it joins it.
  REQUIRE(lab.publishName(name, {0, 1, 2, 3}));
  const std::string added = cluster.add("");
  INFO(added);
  REQUIRE(added.empty());
  const Convergence c = cluster.waitConverged(4, 30s);
  INFO(c.detail);
  CHECK(c.converged);
  CHECK(cluster[3].memberId > 3);
}
