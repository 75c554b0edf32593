// A member's metrics and probes (Node::metricsText, liveness, readiness, clusterSafe): the counts
// add up to the load across members, labels stay bounded whatever the keys, and cluster safety
// is false while a join's snapshots are held back and true once they are through.
#include <catch2/catch.hpp>

#include <asio/use_future.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <ingrid/client.h>
#include <ingrid/node.h>
#include <ingrid/processors/token_bucket.h>

#include "cluster/transport/frame_faults.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::eventually;
using ingrid::testing::TestCluster;

namespace {

// The sum over `text`'s samples whose line starts with `prefix` (a metric name and labels).
double sumOf(const std::string& text, const std::string& prefix) {
  double sum = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

double clusterSum(TestCluster& cluster, const std::string& prefix) {
  double sum = 0;
  for (Node* n : cluster.live()) sum += sumOf(n->metricsText(), prefix);
  return sum;
}

std::size_t seriesOf(const std::string& text) {
  std::size_t n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) n += !line.empty() && line[0] != '#';
  return n;
}

const std::string kAcquire = "ingrid.TokenBucketAcquire";

}  // namespace

TEST_CASE("Metrics count every request once, by processor and outcome, across members",
          "[cluster][metrics]") {
  TestCluster cluster(ingrid::testing::smallClusterOptions());
  REQUIRE(cluster.start(3));
  Node& caller = cluster.at(0);
  const std::string requests = "ingrid_requests_total{processor=\"" + kAcquire + "\"";
  const double before = clusterSum(cluster, requests);
  const std::string callsOk = "ingrid_client_requests_total{outcome=\"ok\"}";
  const double callsBefore = sumOf(caller.metricsText(), callsOk);
  // 20 buckets of 10 tokens, 15 acquires each: 10 granted, 5 denied; granted with 1 token left
  // is under 20% of the limit (the 9th and 10th grants leave 1 and 0).
  const BucketParams bucket = BucketParams::perPeriod(10, std::chrono::nanoseconds(1h).count());
  for (int k = 0; k < 20; ++k) {
    for (int i = 0; i < 15; ++i) {
      REQUIRE(caller.invoke("metrics-" + std::to_string(k), TokenBucketAcquire{bucket, 1}).ok());
    }
  }
  CHECK(clusterSum(cluster, requests) - before == 300);
  // The caller's own view of its embedded calls: each answered once.
  CHECK(sumOf(caller.metricsText(), callsOk) - callsBefore == 300);
  CHECK(clusterSum(cluster, requests + ",outcome=\"granted\"}") == 200);
  CHECK(clusterSum(cluster, requests + ",outcome=\"denied\"}") == 100);
  CHECK(clusterSum(cluster, "ingrid_near_limit_total{processor=\"" + kAcquire + "\"}") == 40);
  CHECK(clusterSum(cluster,
                   "ingrid_request_duration_seconds_count{processor=\"" + kAcquire + "\"}") == 300);
  // Granted writes replicate to a backup; denials change nothing.
  CHECK(clusterSum(cluster, "ingrid_replication_ack_duration_seconds_count") > 0);
  const std::string text = caller.metricsText();
  CHECK(sumOf(text, "ingrid_members ") == 3);
  CHECK(sumOf(text, "ingrid_migrations_pending ") == 0);
  CHECK(sumOf(text, "ingrid_lease_remaining_seconds ") > 0);
  CHECK(sumOf(text, "ingrid_build_info{") == 1);
  CHECK(clusterSum(cluster, "ingrid_store_entries ") == 40);  // 20 buckets, each on 2 owners
  for (Node* n : cluster.live()) {
    CHECK(n->liveness().ok);
    INFO(n->readiness().reason);
    CHECK(n->readiness().ok);
  }
}

TEST_CASE("A thin client counts its calls by outcome, its retries and topology refreshes",
          "[cluster][metrics]") {
  TestCluster cluster(ingrid::testing::smallClusterOptions());
  REQUIRE(cluster.start(2));
  ClientOptions o;
  o.seeds = {cluster.at(0).listenAddress()};
  Client client(o);
  REQUIRE(client.start().ok());
  const BucketParams bucket = BucketParams::perPeriod(5, std::chrono::nanoseconds(1h).count());
  for (int i = 0; i < 8; ++i) REQUIRE(client.invoke("thin", TokenBucketAcquire{bucket, 1}).ok());
  REQUIRE_FALSE(client.invoke(std::string(70000, 'k'), TokenBucketAcquire{bucket, 1}).ok());
  const std::string text = client.metricsText();
  CHECK(sumOf(text, "ingrid_client_requests_total{outcome=\"ok\"}") == 8);
  // The bad key is refused by the client itself, and counted so.
  CHECK(sumOf(text, "ingrid_client_requests_total{outcome=\"invalid_key\"}") == 1);
  CHECK(text.find("ingrid_client_retries_total") != std::string::npos);
  CHECK(text.find("ingrid_client_topology_refreshes_total") != std::string::npos);
}

TEST_CASE("Metrics keep the same series whatever the keys", "[cluster][metrics]") {
  // 100,000 distinct keys, 256 in flight at a time, over two members (a primary and a backup
  // for each partition): no label carries a key, so no member gains a series.
  TestCluster cluster(ingrid::testing::smallClusterOptions());
  REQUIRE(cluster.start(2));
  Node& node = cluster.at(0);
  const BucketParams bucket = BucketParams::perPeriod(1, std::chrono::nanoseconds(1h).count());
  REQUIRE(node.invoke("warm", TokenBucketAcquire{bucket, 1}).ok());
  REQUIRE(node.invoke("warm", TokenBucketAcquire{bucket, 1}).ok());  // a denial too
  const std::size_t series0 = seriesOf(cluster.at(0).metricsText());
  const std::size_t series1 = seriesOf(cluster.at(1).metricsText());
  constexpr int kKeys = 100'000;
  constexpr int kInFlight = 256;
  std::deque<std::future<Result<TokenBucketAcquire::Result>>> pending;
  int granted = 0;
  for (int k = 0; k < kKeys; ++k) {
    if (pending.size() == kInFlight) {
      granted += pending.front().get().ok();
      pending.pop_front();
    }
    pending.push_back(node.invokeAsync("key-" + std::to_string(k), TokenBucketAcquire{bucket, 1},
                                       asio::use_future));
  }
  for (auto& f : pending) granted += f.get().ok();
  REQUIRE(granted == kKeys);
  CHECK(sumOf(node.metricsText(), "ingrid_store_entries") +
            sumOf(cluster.at(1).metricsText(), "ingrid_store_entries") >=
        kKeys);
  CHECK(seriesOf(cluster.at(0).metricsText()) == series0);
  CHECK(seriesOf(cluster.at(1).metricsText()) == series1);
}

TEST_CASE("Cluster safety is false while a join's snapshots are held back, true after",
          "[cluster][metrics]") {
  auto faults = std::make_shared<FrameFaults>(/*seed=*/5);
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.frameFaults = faults;
  TestCluster cluster(o);
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(2));
  REQUIRE(eventually([&] { return cluster.at(0).clusterSafe().ok; }, 10s));
  // Every snapshot to the third member is dropped: its join cannot finish.
  faults->add({.to = "127.0.0.4", .types = {MessageType::kSnapshot}, .cut = true});
  cluster.add();
  REQUIRE(cluster.lastStart().ok());
  // Snapshots were really held back (the join's first ones may not have been sent yet).
  CHECK(eventually([&] { return faults->counts().dropped > 0; }, 10s));
  const bool unsafe = eventually([&] { return !cluster.at(0).clusterSafe().ok; }, 10s);
  const Probe during = cluster.at(0).clusterSafe();
  INFO(during.reason);
  CHECK(unsafe);
  CHECK_FALSE(during.ok);  // the join still cannot finish
  faults->clear();
  CHECK(eventually([&] { return cluster.settled(); }, 30s));
  CHECK(eventually([&] { return cluster.at(0).clusterSafe().ok; }, 30s));
  CHECK(eventually([&] { return cluster.at(2).clusterSafe().ok; }, 10s));
}

TEST_CASE("Cluster safety is false while the leader may be about to remove a member, true after",
          "[cluster][metrics]") {
  // A cut link between two members: their reports reach the leader, which names both as suspects
  // (one of them is to be removed) in its status, and /cluster-safe says so, before any removal
  // is committed. A safe verdict there would let an operator (or the nemesis) take down another
  // member while this removal is still to come.
  auto faults = std::make_shared<FrameFaults>(/*seed=*/7);
  NodeOptions o = ingrid::testing::smallClusterOptions();
  o.frameFaults = faults;
  TestCluster cluster(o);
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(3));
  ClientOptions co;
  co.seeds = {cluster.at(0).listenAddress()};
  Client client(co);
  REQUIRE(client.start().ok());
  auto leaderStatus = [&]() -> std::optional<MemberStatus> {
    for (Node* n : cluster.live()) {
      auto s = client.statusOf(n->listenAddress());
      if (s && s->isLeader) return *s;
    }
    return std::nullopt;
  };
  std::optional<MemberStatus> before = leaderStatus();
  REQUIRE(before);
  CHECK(before->suspects.empty());
  // Cut the two members that do not lead from each other, both ways.
  std::vector<std::string> others;
  std::vector<MemberId> cutIds;
  for (Node* n : cluster.live()) {
    if (n->memberId() != before->memberId) {
      others.push_back(n->listenAddress().substr(0, n->listenAddress().rfind(':')));
      cutIds.push_back(n->memberId());
    }
  }
  REQUIRE(others.size() == 2);
  faults->add({.from = others[0], .to = others[1], .cut = true});
  faults->add({.from = others[1], .to = others[0], .cut = true});
  std::optional<MemberStatus> during;
  CHECK(eventually(
      [&] {
        during = leaderStatus();
        return during && !during->suspects.empty();
      },
      20s));
  Probe unsafe;
  CHECK(eventually(
      [&] {
        for (Node* n : cluster.live()) {
          unsafe = n->clusterSafe();
          if (!unsafe.ok && unsafe.reason.find("may be about to remove") != std::string::npos) {
            return true;
          }
        }
        return false;
      },
      20s));
  INFO(unsafe.reason);
  // It names one of the two members cut from each other.
  bool named = false;
  for (const MemberId id : cutIds) {
    for (const char* after : {" (", " and"}) {
      named = named || unsafe.reason.find("remove member " + std::to_string(id) + after) !=
                           std::string::npos;
    }
  }
  CHECK(named);
  CHECK(faults->counts().dropped > 0);  // the link was really cut
  faults->clear();
  CHECK(eventually([&] { return cluster.settled(); }, 30s));
  CHECK(eventually(
      [&] {
        const auto s = leaderStatus();
        return s && s->suspects.empty() && cluster.at(0).clusterSafe().ok;
      },
      30s));
}
