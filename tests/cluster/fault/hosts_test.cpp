// Hosts as network namespaces: three ingrid-node processes, each in a namespace of its own on a
// bridge (support/hosts.h), listening on 0.0.0.0 and advertising their host's address. Faults: a
// kill -9 of one host's member, and a one-way nft cut from one host to another held until the
// cluster has reacted to it, then healed. Under load on buckets that never refill, with grants
// acknowledged before the fault, while it lasts and after it: no token granted twice, every
// acknowledged grant in the final state, no caller past its deadline, one topology at the end
// with every replica complete, no crash. Skipped, with a warning, where the namespaces cannot be
// made (needs root, iproute2 and nftables); failed instead when run as root or with CI set. Run
// them alone with `fault_tests "[hosts]"`; each prints one summary line.
#include "support/hosts.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "support/eventually.h"
#include "support/fault_harness.h"
#include "support/grant_audit.h"
#include "support/host_cluster.h"

using namespace std::chrono_literals;
using ingrid::testing::AuditResult;
using ingrid::testing::Convergence;
using ingrid::testing::FaultClock;
using ingrid::testing::FaultCluster;
using ingrid::testing::GrantAudit;
using ingrid::testing::HostLab;
using ingrid::testing::labUsable;
using ingrid::testing::onHosts;
using ingrid::testing::scenarioAudit;
using ingrid::testing::startOnHosts;

namespace {

constexpr int kHosts = 3;
constexpr std::uint64_t kGrantsAround = 200;  // acknowledged before, during and after a fault
constexpr auto kGrantLimit = 20s;
constexpr auto kReactLimit = 20s;
constexpr auto kConvergeLimit = 20s;

// What a scenario's fault did, for its summary line.
struct Fault {
  bool struck = false;   // applied
  bool reacted = false;  // the cluster changed its topology while the fault lasted
  std::string what;
};

// Starts one member per host, runs the audit's load, calls `fault` once grants are flowing, and
// checks every invariant once the load has run on after it. `fault` returns when its fault is
// over (healed, or the victim gone); `expectedMembers` is the final topology's size.
void runHostScenario(const char* scenario, std::size_t expectedMembers,
                     const std::function<Fault(HostLab&, FaultCluster&, GrantAudit&)>& fault) {
  HostLab lab(kHosts);  // declared first: it outlives the processes in it
  if (!labUsable(lab)) return;
  HostLab::Enter inLab(lab);
  REQUIRE(inLab.entered());
  FaultCluster cluster(onHosts(lab));
  const std::string started = startOnHosts(cluster);
  INFO(started);
  REQUIRE(started.empty());

  GrantAudit audit(cluster.addresses(), scenarioAudit(scenario));
  REQUIRE(audit.start().empty());
  REQUIRE(audit.waitForGrants(kGrantsAround, kGrantLimit));  // load before the fault
  const auto faultBegin = FaultClock::now();
  INFO(lab.output());
  const Fault f = fault(lab, cluster, audit);
  const auto faultEnd = FaultClock::now();
  REQUIRE(f.struck);
  const bool loadAfter = audit.waitForGrants(kGrantsAround, kGrantLimit);
  const std::vector<std::string> unserved = audit.servedWithin(10s);
  const Convergence converged = cluster.waitConverged(expectedMembers, kConvergeLimit);
  const auto end = FaultClock::now();
  const AuditResult r = audit.finish(10s);
  const auto before = r.window(FaultClock::time_point{}, faultBegin);
  const auto during = r.window(faultBegin, faultEnd);
  const auto after = r.window(faultEnd, end);
  const auto crashes = cluster.crashes();
  std::printf(
      "[fault] %s: %s converged=%s converge_ms=%lld crashes=%zu unserved=%zu fault_ms=%lld "
      "reacted=%s acked_before=%llu acked_during=%llu acked_after=%llu (%s)\n",
      scenario, r.summary.line().c_str(), converged.converged ? "yes" : "no",
      static_cast<long long>(converged.took.count()), crashes.size(), unserved.size(),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(faultEnd - faultBegin).count()),
      f.reacted ? "yes" : "no", static_cast<unsigned long long>(before.acked),
      static_cast<unsigned long long>(during.acked), static_cast<unsigned long long>(after.acked),
      f.what.c_str());
  std::fflush(stdout);

  INFO(r.summary.line());
  INFO(converged.detail);
  INFO(r.worst());
  std::string crashText;
  for (const auto& c : crashes) crashText += c + "\n";
  INFO(crashText);
  CHECK(crashes.empty());
  INFO((unserved.empty() ? std::string() : unserved.front()));
  CHECK(unserved.empty());
  CHECK(f.reacted);
  // The load ran around the fault: grants acknowledged before it, while it lasted, and after.
  CHECK(before.acked > 0);
  CHECK(during.acked > 0);
  CHECK(loadAfter);
  CHECK(after.acked > 0);
  CHECK(converged.converged);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.phantom == 0);
  CHECK(r.summary.overDeadline == 0);
}

// The host whose member leads the control plane; another one, and a third.
struct Roles {
  int leader = -1, a = -1, b = -1;
};
Roles roles(FaultCluster& cluster) {
  Roles r;
  r.leader = cluster.leaderIndex();
  for (int i = 0; i < kHosts; ++i) {
    if (i == r.leader) continue;
    (r.a < 0 ? r.a : r.b) = i;
  }
  return r;
}

// Whether some live member has logged a topology other than `version` within `limit`.
bool topologyChanged(FaultCluster& cluster, std::uint64_t version,
                     std::chrono::milliseconds limit) {
  return ingrid::testing::eventually(
      [&] {
        for (std::size_t i = 0; i < cluster.size(); ++i) {
          if (!cluster[i].alive()) continue;
          const auto t = cluster[i].latestTopology();
          if (t && t->version != version) return true;
        }
        return false;
      },
      limit);
}

std::uint64_t versionNow(FaultCluster& cluster) {
  const auto t = cluster[0].latestTopology();
  return t ? t->version : 0;
}

}  // namespace

TEST_CASE("Hosts: a member killed -9 under load on one of three hosts", "[fault][hosts]") {
  runHostScenario("hosts-kill", kHosts - 1, [](HostLab&, FaultCluster& cluster, GrantAudit& audit) {
    Fault f;
    const Roles r = roles(cluster);
    if (r.leader < 0) return f;
    const std::uint64_t version = versionNow(cluster);
    cluster[static_cast<std::size_t>(r.b)].kill9();
    f.struck = true;
    f.what = "killed the member of host " + std::to_string(r.b);
    // The fault lasts until the survivors removed the victim, with grants on the
    // way.
    f.reacted = topologyChanged(cluster, version, kReactLimit);
    audit.waitForGrants(kGrantsAround, kGrantLimit);
    return f;
  });
}

TEST_CASE("Hosts: a one-way cut from one host to another under load, then healed",
          "[fault][hosts]") {
  runHostScenario("hosts-one-way-cut", 0,
                  [](HostLab& lab, FaultCluster& cluster, GrantAudit& audit) {
                    Fault f;
                    const Roles r = roles(cluster);
                    if (r.leader < 0) return f;
                    const std::uint64_t version = versionNow(cluster);
                    f.struck = lab.cut(r.a, r.b, /*bothWays=*/false);
                    f.what = "host " + std::to_string(r.a) + " cannot send to host " +
                             std::to_string(r.b) + ", leader on host " + std::to_string(r.leader);
                    // The cut lasts until the cluster has changed its topology for it (a member
                    // judged unreachable and removed), with grants on the way; then it heals.
                    f.reacted = topologyChanged(cluster, version, kReactLimit);
                    audit.waitForGrants(kGrantsAround, kGrantLimit);
                    f.struck = lab.healAll() && f.struck;
                    return f;
                  });
}
