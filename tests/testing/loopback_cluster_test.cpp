#include <ingrid/testing/cluster.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include <ingrid/processors/get_entry.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/testing/grant_audit.h>

#include "testing/scenario.h"
#include "testing/test_keys.h"

namespace ingrid::testing {
namespace {

using namespace std::chrono_literals;

// Real sockets and time: the failure timeout of the failure tests (1 s).
ClusterOptions loopback(std::chrono::milliseconds failureTimeout = 1000ms) {
  ClusterOptions o;
  o.nodes = 3;
  o.network = Network::kLoopback;
  o.node.failureTimeout = failureTimeout;
  // Below the failure timeout, and the lease (half of it) above it.
  o.node.heartbeatInterval = std::min<std::chrono::milliseconds>(500ms, failureTimeout / 5);
  return o;
}

TokenBucketAcquire takeOne(std::int64_t capacity) {
  return TokenBucketAcquire{neverRefills(capacity), 1};
}

// An answer that arrives on a node's completion thread. The handler holds the promise: it may
// run until ~Cluster returns, after a failed REQUIRE has destroyed this.
struct Pending {
  std::shared_ptr<std::promise<Result<AcquireAnswer>>> promise =
      std::make_shared<std::promise<Result<AcquireAnswer>>>();
  std::future<Result<AcquireAnswer>> future = promise->get_future();
  auto handler() {
    return [promise = promise](Result<AcquireAnswer> r) { promise->set_value(std::move(r)); };
  }
};

TEST_CASE("Loopback: crash: the backups take over, then restart rejoins at the same address",
          "[testing][loopback]") {
  Cluster c(loopback());
  REQUIRE_OK(c.start());
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK_THAT(c.address(i), Catch::StartsWith("127.0.0." + std::to_string(i + 2) + ":"));
  }
  const std::string key = keyOwnedBy(c, 2, 0);
  REQUIRE(!key.empty());
  REQUIRE(c.invoke(0, key, takeOne(3))->granted);
  const std::string address = c.address(2);
  const MemberId crashed = c.node(2).memberId();
  REQUIRE_OK(c.crash(2));
  CHECK_FALSE(c.node(2).running());
  auto after = c.invoke(0, key, takeOne(3));  // rides through the failover
  REQUIRE(after);
  CHECK(after->granted);
  CHECK(after->remaining == 1);
  REQUIRE_OK(c.waitClusterSafe());
  CHECK_FALSE(c.node(0).topology()->hasMember(crashed));
  REQUIRE_OK(c.restart(2));
  CHECK(c.address(2) == address);
  REQUIRE_OK(c.waitClusterSafe());
  CHECK(c.node(1).topology()->members.size() == 3);
  CHECK(c.invoke(2, key, takeOne(3))->granted);
  CHECK_FALSE(c.invoke(1, key, takeOne(3))->granted);
}

TEST_CASE(
    "Loopback: a pause past the failure timeout removes the member, which rejoins once resumed",
    "[testing][loopback]") {
  Cluster c(loopback());
  REQUIRE_OK(c.start());
  const MemberId paused = c.node(1).memberId();
  REQUIRE_OK(c.pause(1));
  REQUIRE(c.runUntil(
      [&] {
        return !c.node(0).topology()->hasMember(paused) && !c.node(2).topology()->hasMember(paused);
      },
      20s));
  REQUIRE_OK(c.resume(1));
  REQUIRE_OK(c.waitClusterSafe());
  CHECK(c.node(1).memberId() != paused);
  CHECK(c.node(0).topology()->members.size() == 3);
}

TEST_CASE("Loopback: a cut link stops replication until healed", "[testing][loopback]") {
  Cluster c(loopback(3000ms));
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 0, 1);
  REQUIRE(!key.empty());
  REQUIRE_OK(c.cut(0, 1));
  Pending write;
  c.node(0).invokeAsync(key, takeOne(5), write.handler());
  // The primary (node 0) cannot reach its backup (node 1): the synchronous write waits.
  CHECK(write.future.wait_for(300ms) == std::future_status::timeout);
  c.heal();
  REQUIRE(write.future.wait_for(10s) == std::future_status::ready);
  const Result<AcquireAnswer> r = write.future.get();
  INFO((r ? std::string("granted") : r.error().message()));
  CHECK((r ? r->granted : r.error() == Errc::indeterminate));
  REQUIRE_OK(c.waitClusterSafe());
}

TEST_CASE("Loopback: a delayed link slows the writes that cross it", "[testing][loopback]") {
  // A lease of 1.5 s: its renewals cross the delayed link too.
  Cluster c(loopback(3000ms));
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 0, 1);
  REQUIRE(!key.empty());
  REQUIRE_OK(c.delay(0, 1, 200ms));
  const auto t0 = std::chrono::steady_clock::now();
  const auto slow = c.invoke(0, key, takeOne(5));
  INFO((slow ? std::string("ok") : slow.error().message()));
  REQUIRE(slow);
  CHECK(slow->granted);
  CHECK(std::chrono::steady_clock::now() - t0 >= 200ms);
  c.heal();
  REQUIRE_OK(c.drop(0, 1, 1.0));
  Pending dropped;
  c.node(0).invokeAsync(key, takeOne(5), dropped.handler());
  CHECK(dropped.future.wait_for(300ms) == std::future_status::timeout);
  c.heal();
  REQUIRE(dropped.future.wait_for(10s) == std::future_status::ready);
  REQUIRE_OK(c.waitClusterSafe());
}

TEST_CASE("Loopback: a partition: the majority carries on, heal rejoins the minority",
          "[testing][loopback]") {
  Cluster c(loopback());
  REQUIRE_OK(c.start());
  const std::string key = keyOwnedBy(c, 2, 0);
  REQUIRE(!key.empty());
  REQUIRE(c.invoke(0, key, takeOne(3))->granted);
  const MemberId minority = c.node(2).memberId();
  REQUIRE_OK(c.partition({{0, 1}, {2}}));
  REQUIRE(c.runUntil([&] { return !c.node(0).topology()->hasMember(minority); }, 20s));
  auto served = c.invoke(1, key, takeOne(3));
  REQUIRE(served);
  CHECK(served->granted);
  CHECK(served->remaining == 1);
  c.heal();
  REQUIRE_OK(c.waitClusterSafe());
  CHECK(c.node(2).memberId() != minority);
}

// The simulated scenario's twin on real sockets and time, shortened to 20 s for the test run
// (the 60 s one, for the figure, is the hidden case below).
void loopbackScenario(std::chrono::seconds length) {
  ClusterOptions o = loopback(3000ms);
  const ScenarioResult r = runScenario(o, length);
  INFO(r.error);
  REQUIRE(r.error.empty());
  std::printf(
      "[testing] loopback: %.1f cluster s (a crash, a restart, a partition) in %.3f wall "
      "s; %s; %lld of %lld keys granted exactly their capacity\n",
      r.clusterSeconds, r.wallSeconds, r.report.summary().c_str(),
      static_cast<long long>(r.keysExact), static_cast<long long>(r.keysAudited));
  INFO(r.report.failures());
  CHECK(r.report.ok());
  CHECK(r.report.granted > 0);
  for (const KeyVerdict& v : r.report.keys) {
    INFO(v.key);
    if (v.unknown == 0) CHECK(v.acked == v.capacity);
  }
}

TEST_CASE("Loopback: 20 s with a crash and a partition, audited", "[testing][loopback]") {
  loopbackScenario(std::chrono::seconds(20));
}

TEST_CASE("Loopback: 60 s with a crash and a partition, audited (by hand)",
          "[.][testing][loopback]") {
  loopbackScenario(std::chrono::seconds(60));
}

}  // namespace
}  // namespace ingrid::testing
