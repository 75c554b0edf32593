// A network partition (issue 7): a member cut off both ways past the failure timeout, then
// healed. Each member runs in its own network namespace behind a router namespace (see
// support/netns.h); skipped, with a warning, where namespaces cannot be made. Hidden ("[.]"):
// it gives each member an address of its own namespace rather than the namespace's loopback,
// which the project's rules ask for; that needs members that bind their outgoing connections to
// their listen address. Run it with `fault_tests "[partition]"`.
#include "support/netns.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "support/fault_harness.h"
#include "support/grant_audit.h"

using namespace std::chrono_literals;
using ingrid::testing::AuditOptions;
using ingrid::testing::AuditResult;
using ingrid::testing::Convergence;
using ingrid::testing::FaultCluster;
using ingrid::testing::FaultClusterOptions;
using ingrid::testing::GrantAudit;
using ingrid::testing::NetLab;

TEST_CASE("Partition: a member of three isolated past the failure timeout, then healed",
          "[fault][partition][.]") {
  constexpr int kMembers = 3;
  NetLab lab(kMembers);  // declared first: it outlives the processes in it
  if (!lab.error().empty()) {
    WARN("skipped: " << lab.error());
    return;
  }
  NetLab::Enter inRouter(lab);
  REQUIRE(inRouter.entered());
  FaultClusterOptions o;
  o.members = kMembers;
  for (int i = 0; i < kMembers; ++i) {
    o.launchers.push_back(lab.launcher(i));
    o.listen.push_back(lab.listen(i));
  }
  FaultCluster cluster(o);
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  AuditOptions a;
  a.prefix = "isolate";
  a.fixedBuckets = 1024;
  a.freshBuckets = 32;
  a.freshCapacity = 2;
  a.freshWindow = 50ms;
  GrantAudit audit(cluster.addresses(), a);
  REQUIRE(audit.start().empty());

  std::this_thread::sleep_for(1s);
  INFO(lab.output());
  REQUIRE(lab.isolate(2, kMembers));
  std::this_thread::sleep_for(5s);  // the fault: longer than the 2 s failure timeout
  REQUIRE(lab.healAll());
  std::this_thread::sleep_for(3s);
  const std::vector<std::string> unserved = audit.servedWithin(10s);
  const Convergence converged = cluster.waitConverged(0, 10s);
  const AuditResult r = audit.finish(5s);
  const auto crashes = cluster.crashes();
  std::printf(
      "[fault] partition-isolate-1-of-3: %s converged=%s converge_ms=%lld crashes=%zu "
      "unserved=%zu\n",
      r.summary.line().c_str(), converged.converged ? "yes" : "no",
      static_cast<long long>(converged.took.count()), crashes.size(), unserved.size());

  INFO(r.summary.line());
  INFO(converged.detail);
  INFO(r.worst());
  std::string crashText;
  for (const auto& c : crashes) crashText += c + "\n";
  INFO(crashText);
  CHECK(crashes.empty());
  INFO((unserved.empty() ? std::string() : unserved.front()));
  CHECK(unserved.empty());
  CHECK(converged.converged);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.overDeadline == 0);
}
