// The kit's demonstration scenario, on either network: three nodes under an audited load of
// TokenBucketAcquire (a new generation of 8 buckets of 40 tokens that never refill every 5 s of
// cluster time, one call per up node every 10 ms), node 1 crashed at 1/6 of the run and restarted
// at 2/6, a partition {0, 1} | {2} from 7/12 to 3/4, then healed; then, with counters written on
// 64 keys every 200 ms, until the cluster is safe; checked by the grant audit. It returns only
// once its calls are answered (or after a bounded wait for them), on every path.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <ingrid/hash.h>

#include <ingrid/processors/counter.h>
#include <ingrid/processors/token_bucket.h>
#include <ingrid/testing/cluster.h>
#include <ingrid/testing/grant_audit.h>

namespace ingrid::testing {

struct ScenarioResult {
  std::string error;  // empty: every step ran
  AuditReport report;
  double wallSeconds = 0;
  double clusterSeconds = 0;
  std::uint64_t traceHash = 0;
  std::int64_t keysExact = 0;  // keys whose grants are exactly their capacity
  std::int64_t keysAudited = 0;
};

inline ScenarioResult runScenario(ClusterOptions options, std::chrono::seconds length) {
  using namespace std::chrono_literals;
  ScenarioResult out;
  const auto wallStart = std::chrono::steady_clock::now();
  Cluster c(std::move(options));
  if (auto started = c.start(); !started) {
    out.error = "start: " + started.error().message();
    return out;
  }
  GrantAudit audit(c);
  // An error ends the run, once the calls in flight are answered (at most 30 s).
  const auto fail = [&](std::string why) {
    if (!c.runUntil([&] { return audit.pending() == 0; }, 30s)) {
      why += "; " + std::to_string(audit.pending()) + " calls still unanswered 30 s later";
    }
    out.error = std::move(why);
    return out;
  };
  const auto start = c.elapsed();
  const auto at = [&](int num, int den) { return start + length * num / den; };
  constexpr std::int64_t kCapacity = 40;
  enum Step { kCrash, kRestart, kPartition, kHeal, kDone };
  int next = kCrash;
  std::uint64_t tick = 0;
  while (c.elapsed() < start + length) {
    const auto now = c.elapsed();
    Result<bool> done = true;
    if (next == kCrash && now >= at(1, 6)) {
      done = c.crash(1);
      ++next;
    } else if (next == kRestart && now >= at(2, 6)) {
      done = c.restart(1);
      ++next;
    } else if (next == kPartition && now >= at(7, 12)) {
      done = c.partition({{0, 1}, {2}});
      ++next;
    } else if (next == kHeal && now >= at(3, 4)) {
      c.heal();
      ++next;
    }
    if (!done) return fail("step " + std::to_string(next - 1) + ": " + done.error().message());
    const auto generation = (c.elapsed() - start) / 5s;
    for (std::size_t i = 0; i < c.size(); ++i) {
      if (!c.up(i)) continue;
      const std::string key =
          "g" + std::to_string(generation) + "-" + std::to_string((tick + i) % 8);
      audit.acquire(c.node(i), key, kCapacity);
    }
    ++tick;
    c.advance(10ms);
  }
  if (!c.runUntil([&] { return audit.pending() == 0; }, 30s)) {
    out.error = std::to_string(audit.pending()) + " calls unanswered 30 s after the load";
  } else {
    // Healed when the cluster is safe. A partition whose update failed to reach a backup during
    // the partition reports that backup behind until its next write (and a denial writes
    // nothing), so the service's counters go on being written meanwhile, as its traffic would.
    // One counter in each partition.
    const std::uint32_t partitions = c.node(0).topology()->table.partitionCount();
    std::vector<std::string> counters(partitions);
    for (std::uint32_t found = 0, k = 0; found < partitions && k < 1000000; ++k) {
      std::string key = "hits-" + std::to_string(k);
      std::string& slot = counters[partitionOf(key, partitions)];
      if (slot.empty()) {
        slot = std::move(key);
        ++found;
      }
    }
    Result<bool> safe = false;
    for (int round = 0; round < 30 && !safe; ++round) {
      for (std::size_t k = 0; k < counters.size(); ++k) {
        const std::size_t i = k % c.size();
        if (!c.up(i) || counters[k].empty()) continue;
        c.node(i).invokeAsync(counters[k], Increment{1}, [](Result<std::int64_t>) {});
      }
      c.advance(200ms);
      safe = c.waitClusterSafe(1s);
    }
    if (!safe) out.error = "after the heal: " + safe.error().message();
  }
  out.report = audit.check(c);
  for (const KeyVerdict& v : out.report.keys) {
    ++out.keysAudited;
    if (v.acked == v.capacity && v.consumed == v.capacity) ++out.keysExact;
  }
  out.clusterSeconds = std::chrono::duration<double>(c.elapsed() - start).count();
  out.traceHash = c.traceHash();
  out.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  return out;
}

}  // namespace ingrid::testing
