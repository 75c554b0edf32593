// Data directories (--data-dir): kill -9 of two of three voters under load stops every write (no
// leader, leases lapse); restarting both with their directories, at their addresses, brings their
// Raft votes back, the quorum elects a leader, the restarted processes join again as new members,
// and writes resume with no `ingrid-cli recover`. With two backups every partition had a replica
// on the survivor: 0 acknowledged grants lost, 0 doubled (GrantAudit). Again with the survivor
// paused while the two restart, so that a restored Raft server leads (and must remove its own old
// member and hand leadership over). Run them alone with `fault_tests "[data_dir]"`; each prints one
// summary line. (The directory lock: the last case.)
#include "support/fault_harness.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "support/grant_audit.h"
#include "support/temp_dir.h"

using namespace std::chrono_literals;
using ingrid::testing::AuditOptions;
using ingrid::testing::AuditResult;
using ingrid::testing::Convergence;
using ingrid::testing::FaultClock;
using ingrid::testing::FaultCluster;
using ingrid::testing::FaultClusterOptions;
using ingrid::testing::GrantAudit;
using ingrid::testing::TempDir;

namespace {

// `scenario`: the audit's prefix and the summary line's name. With `restoredLeads`, the survivor
// is paused while the two restart, so one of them (a restored Raft server, not a member) must
// lead: it removes the other's old member, then its own, and hands leadership to a member once
// the survivor is resumed.
void runDataDirScenario(const char* scenario, bool restoredLeads) {
  TempDir dirs("ingrid-data-dir");
  REQUIRE_FALSE(dirs.path.empty());
  FaultClusterOptions o;
  o.members = 3;
  o.args = {"--partitions",         "64",  "--workers", "1", "--backups", "2", "--voters", "3",
            "--failure-timeout-ms", "2000"};
  for (int i = 0; i < o.members; ++i) {
    o.memberArgs.push_back({"--data-dir", dirs.path + "/member-" + std::to_string(i)});
  }
  FaultCluster cluster(o);
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  AuditOptions a;
  a.prefix = scenario;
  a.fixedBuckets = 512;
  a.fixedCapacity = 1;
  a.freshBuckets = 32;
  a.freshCapacity = 2;
  a.freshWindow = 50ms;
  GrantAudit audit(cluster.addresses(), a);
  REQUIRE(audit.start().empty());
  REQUIRE(audit.waitForGrants(100, 10s));  // load that ran before the fault

  cluster[0].kill9();
  cluster[1].kill9();
  const std::string survivor = cluster[2].address;
  REQUIRE(
      ingrid::testing::eventually([&] { return ingrid::testing::writesStopped(survivor); }, 20s));
  const auto stoppedAt = FaultClock::now();

  if (restoredLeads) cluster[2].pause();
  // Both at once: each one's start waits for a quorum that needs the other's vote.
  REQUIRE(cluster.restart(0, survivor).empty());
  REQUIRE(cluster.restart(1, survivor).empty());
  const auto restartedAt = FaultClock::now();
  if (restoredLeads) {
    // No client can ask a restored process (it installs no topology): its log says it leads.
    const bool led = ingrid::testing::eventually(
        [&] {
          return cluster[0].waitForLine("leads the control plane in term", 0ms) ||
                 cluster[1].waitForLine("leads the control plane in term", 0ms);
        },
        20s);
    cluster[2].resume();
    INFO(cluster[0].tail(20));
    INFO(cluster[1].tail(20));
    REQUIRE(led);
  }
  for (std::size_t i : {0u, 1u}) {
    const bool restored = cluster[i].waitForLine("restored member", 10s).has_value();
    const std::string joined = cluster.awaitStarted(i);
    std::string others;  // what the other processes logged, if this one did not join
    for (std::size_t j = 0; !joined.empty() && j < cluster.size(); ++j) {
      if (j != i) others += "process " + std::to_string(j) + ":\n" + cluster[j].tail(40) + "\n";
    }
    INFO(joined);
    INFO(others);
    CHECK(restored);
    REQUIRE(joined.empty());
  }
  const auto rejoinedAt = FaultClock::now();

  CHECK(audit.waitForGrants(100, 15s));  // load the healed cluster served
  const Convergence converged = cluster.waitConverged(3, 30s);
  const AuditResult r = audit.finish(5s);
  // The first grant acknowledged after the restart: when writes resumed.
  auto resumedAt = FaultClock::time_point::max();
  for (const auto& c : r.calls) {
    if (c.outcome == ingrid::testing::AuditCall::kGranted && c.end >= restartedAt) {
      resumedAt = std::min(resumedAt, c.end);
    }
  }
  const auto ms = [&](FaultClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t - restartedAt).count();
  };
  const auto outage = r.window(stoppedAt, restartedAt);
  const auto after = r.window(rejoinedAt, FaultClock::now());
  std::printf(
      "[fault] %s: %s acked_while_stopped=%llu acked_after=%llu "
      "converged=%s resume_ms=%lld rejoin_ms=%lld\n",
      scenario, r.summary.line().c_str(), static_cast<unsigned long long>(outage.acked),
      static_cast<unsigned long long>(after.acked), converged.converged ? "yes" : "no",
      static_cast<long long>(resumedAt == FaultClock::time_point::max() ? -1 : ms(resumedAt)),
      static_cast<long long>(ms(rejoinedAt)));
  std::fflush(stdout);

  INFO(r.summary.line());
  INFO(converged.detail);
  INFO(r.worst());
  const auto crashes = cluster.crashes();
  for (const auto& c : crashes) INFO(c);
  CHECK(crashes.empty());
  CHECK(outage.acked == 0);  // writes stopped until the voters came back
  CHECK(after.acked > 0);    // and resumed
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.phantom == 0);
  CHECK(converged.converged);
}

}  // namespace

TEST_CASE(
    "Data dir: two of three voters killed with kill -9 and restarted with their data "
    "directories heal the quorum without recover, losing nothing",
    "[fault][data_dir]") {
  runDataDirScenario("data-dir-2-of-3-voters", false);
}

TEST_CASE(
    "Data dir: a restored voter that leads removes its old member and hands leadership to a "
    "member, losing nothing",
    "[fault][data_dir]") {
  runDataDirScenario("data-dir-restored-leader", true);
}

namespace {

// One member with its data directory `dir`.
FaultClusterOptions oneMemberIn(const std::string& dir) {
  FaultClusterOptions o;
  o.members = 1;
  o.memberArgs = {{"--data-dir", dir}};
  return o;
}

}  // namespace

TEST_CASE("Data dir: a second process with the same directory is refused, naming it",
          "[fault][data_dir]") {
  TempDir dirs("ingrid-data-dir");
  REQUIRE_FALSE(dirs.path.empty());
  FaultCluster cluster(oneMemberIn(dirs.path));
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  ingrid::testing::NodeProcess second({}, INGRID_NODE_PATH,
                                      {"--listen", "127.0.0.1:0", "--data-dir", dirs.path});
  const auto ended = second.waitExit(30s);
  INFO(second.tail(12));
  REQUIRE(ended);
  CHECK(WIFEXITED(*ended));
  CHECK(WEXITSTATUS(*ended) != 0);
  CHECK(second.waitForLine("is in use by another process", 1s));
}

TEST_CASE("Data dir: the only member, restarted with its directory, starts a new cluster",
          "[fault][data_dir]") {
  TempDir dirs("ingrid-data-dir");
  REQUIRE_FALSE(dirs.path.empty());
  FaultCluster cluster(oneMemberIn(dirs.path));
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  cluster[0].kill9();
  REQUIRE(cluster.restart(0, {}).empty());
  const std::string again = cluster.awaitStarted(0);
  INFO(again);
  INFO(cluster[0].tail(12));
  REQUIRE(again.empty());
  CHECK(cluster[0].waitForLine("restored member 1", 1s));
  CHECK(cluster[0].waitForLine("starts a new cluster", 1s));
  CHECK(cluster.waitConverged(1, 15s).converged);
}
