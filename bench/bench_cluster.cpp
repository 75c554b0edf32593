// Cluster benchmark: token-bucket acquires routed to a remote primary with 1 backup, on
// loopback, through embedded nodes in this process (each with its own threads and sockets).
//
// Scenarios (closed loop, closed_loop.h), each for `seconds`:
//   remote primary, 1 in flight    latency of one routed, replicated invocation
//   remote primary, N in flight    throughput with N outstanding
//   local primary, 1 in flight     the same without the routing hop (replication only)
//   failover                       16 in flight over keys of every partition while the last
//                                  node crashes: time to detect it and to re-replicate, and the
//                                  latency (and failures) callers saw meanwhile
//
//   bench_cluster [--seconds S] [--inflight N] [--nodes K] [--failure-timeout-ms T]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/node.h>
#include <ingrid/processors/token_bucket.h>

#include "closed_loop.h"
#include "report.h"

namespace {

// Keys whose primary is (or is not) `self` under topology t.
std::vector<std::string> keysOwnedBy(const ingrid::Topology& t, ingrid::MemberId self, bool owned,
                                     std::size_t count) {
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < count && i < 1'000'000; ++i) {
    std::string k = "bench-" + std::to_string(i);
    const bool mine = t.table.primary(ingrid::partitionOf(k, t.table.partitionCount())) == self;
    if (mine == owned) keys.push_back(std::move(k));
  }
  return keys;
}

void run(const char* name, ingrid::Node& caller, const std::vector<std::string>& keys, int inflight,
         double seconds) {
  const ingrid::TokenBucketAcquire acquire{
      ingrid::BucketParams::perPeriod(1'000'000'000'000, ingrid::kNanosPerSecond), 1};
  std::string lastError;
  auto op = [&](int chain, std::uint64_t i, std::function<void(bool)> done) {
    const auto& key = keys[(static_cast<std::size_t>(chain) * 7919 + i) % keys.size()];
    caller.invokeAsync(
        key, acquire,
        [done = std::move(done)](ingrid::Result<ingrid::AcquireAnswer> r) { done(r.ok()); });
  };
  auto result = ingrid::bench::runClosedLoop(op, inflight, seconds);
  if (result.failures != 0)
    std::printf("  (%llu failed)\n", static_cast<unsigned long long>(result.failures));
  ingrid::bench::report(name, std::move(result.latenciesNs), result.seconds);
}

// Crashes the last node while a closed loop runs over keys of every partition; prints how long
// the cluster took to remove it and to re-replicate its partitions.
void failover(std::vector<std::unique_ptr<ingrid::Node>>& nodes, double seconds) {
  using Clock = std::chrono::steady_clock;
  ingrid::Node& caller = *nodes.front();
  const ingrid::TopologyPtr t = caller.topology();
  const ingrid::MemberId victim = nodes.back()->memberId();
  std::vector<std::string> keys(t->table.partitionCount());
  for (int i = 0, found = 0; found < static_cast<int>(keys.size()) && i < 10'000'000; ++i) {
    std::string k = "failover-" + std::to_string(i);
    auto& slot = keys[ingrid::partitionOf(k, t->table.partitionCount())];
    if (slot.empty()) {
      slot = std::move(k);
      ++found;
    }
  }
  std::thread crasher([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 4));
    const auto crashed = Clock::now();
    nodes.back()->TEST_crash();
    double removedMs = -1, settledMs = -1;
    while (Clock::now() - crashed < std::chrono::duration<double>(seconds)) {
      const ingrid::TopologyPtr now = caller.topology();
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - crashed).count();
      if (removedMs < 0 && !now->hasMember(victim)) removedMs = ms;
      if (removedMs >= 0 && now->syncing.empty() &&
          now->table == ingrid::PartitionTable::balanced(now->table.partitionCount(),
                                                         now->memberIds(), now->backups)) {
        settledMs = ms;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf(
        "failover: member %llu crashed; removed after %.0f ms, re-replicated after %.0f ms\n",
        static_cast<unsigned long long>(victim), removedMs, settledMs);
  });
  run("failover, 16 in flight", caller, keys, 16, seconds);
  crasher.join();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3.0;
  int inflight = 64;
  int nodeCount = 3;
  int failureTimeoutMs = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds"))
      seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--inflight"))
      inflight = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--nodes"))
      nodeCount = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--failure-timeout-ms"))
      failureTimeoutMs = std::atoi(argv[i + 1]);
  }
  if (seconds <= 0 || seconds > 600 || inflight <= 0 || nodeCount < 2 || nodeCount > 8 ||
      failureTimeoutMs < 100 || failureTimeoutMs > 60000) {
    std::fprintf(stderr,
                 "usage: bench_cluster [--seconds 0<S<=600] [--inflight N>0] [--nodes 2..8] "
                 "[--failure-timeout-ms 100..60000]\n");
    return 2;
  }
  std::vector<std::unique_ptr<ingrid::Node>> nodes;
  for (int i = 0; i < nodeCount; ++i) {
    ingrid::NodeOptions o;
    o.workerThreads = 1;
    o.backups = 1;
    o.listenAddress = "127.0.0.1:0";
    o.heartbeatInterval = std::chrono::milliseconds(std::max(10, failureTimeoutMs / 10));
    o.failureTimeout = std::chrono::milliseconds(failureTimeoutMs);
    if (!nodes.empty()) o.seeds = {nodes.front()->listenAddress()};
    nodes.push_back(std::make_unique<ingrid::Node>(o));
    if (auto s = nodes.back()->start(); !s) {
      std::fprintf(stderr, "node %d: %s\n", i, s.error().message().c_str());
      return 1;
    }
  }
  // Wait (bounded) for the last join's migration to finish: every node on the same topology.
  for (int i = 0; i < 20000; ++i) {
    bool same = true;
    for (auto& n : nodes)
      same = same && n->topology()->version == nodes[0]->topology()->version &&
             n->topology()->version == 2u * static_cast<unsigned>(nodeCount) - 1;
    if (same) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ingrid::Node& caller = *nodes.front();
  const ingrid::TopologyPtr t = caller.topology();
  std::printf(
      "bench_cluster: %d nodes on loopback, 1 backup, sync replication, topology v%llu, "
      "%.1f s per scenario\n",
      nodeCount, static_cast<unsigned long long>(t->version), seconds);
  const auto remote = keysOwnedBy(*t, caller.memberId(), false, 1000);
  const auto local = keysOwnedBy(*t, caller.memberId(), true, 1000);
  run("remote primary, 1 in flight", caller, remote, 1, seconds);
  const std::string many = "remote primary, " + std::to_string(inflight) + " in flight";
  run(many.c_str(), caller, remote, inflight, seconds);
  run("local primary, 1 in flight", caller, local, 1, seconds);
  // Long enough to cover detection (failureTimeout) and re-replication after the crash.
  failover(nodes, std::max(seconds, 4.0 * failureTimeoutMs / 1000.0));
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) (*it)->stop();
  return 0;
}
