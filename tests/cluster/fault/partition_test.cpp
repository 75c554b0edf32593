// Network partitions: three ingrid-node processes in a network namespace of their own,
// on its loopback (member i at 127.0.0.<i+2>, see support/netns.h), with links cut by nft rules
// for longer than the failure timeout, then healed: 2/1 (a member, or the leader, cut off), 1/1/1,
// an asymmetric cut (one member cannot send to another; both reach the leader) and a bridge (the
// leader and a member cannot talk; both talk to the third). Under load on buckets that never
// refill: no token granted twice, every acknowledged grant in the final state, no caller past its
// deadline, one topology at the end with every partition served and every replica complete, no
// crash. Skipped, with a warning, where a namespace cannot be made (needs root, iproute2 and
// nftables); failed instead when run as root or with CI set. Run them alone with `fault_tests
// "[partition]"`; each prints one summary line.
#include "support/netns.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "support/fault_harness.h"
#include "support/grant_audit.h"

using namespace std::chrono_literals;
using ingrid::testing::AuditOptions;
using ingrid::testing::AuditResult;
using ingrid::testing::Convergence;
using ingrid::testing::FaultClock;
using ingrid::testing::FaultCluster;
using ingrid::testing::FaultClusterOptions;
using ingrid::testing::GrantAudit;
using ingrid::testing::NetLab;

namespace {

constexpr int kMembers = 3;
constexpr auto kCut = 5s;  // longer than the 2 s failure timeout
constexpr auto kServeLimit = 10s;
constexpr auto kConvergeLimit = 15s;

// Whether `lab` can be used. As root (CI runs as root), a namespace that cannot be made is a
// failure, not a skip: a green run must have cut links.
bool labUsable(const NetLab& lab) {
  if (lab.error().empty()) return true;
  if (NetLab::required())
    FAIL("cannot make a network namespace (required as root or with CI set): " << lab.error());
  WARN("skipped: " << lab.error());
  return false;
}

// Each member's --metrics address, from its "metrics on" line.
std::vector<std::string> probeAddresses(FaultCluster& cluster) {
  std::vector<std::string> probes;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    const auto line = cluster[i].waitForLine("metrics on", 10s);
    REQUIRE(line);
    probes.push_back(line->substr(line->rfind(' ') + 1));
  }
  return probes;
}

// What a scenario checks while its cut lasts, given the cluster and the leader's index.
using WhileCut = std::function<void(FaultCluster&, int leader)>;

// Starts the cluster in `lab`, runs the load, applies `cut(lab, leader)`, runs `whileCut` (if
// any), heals `cutFor` after the cut, and checks every invariant.
void runPartitionScenario(const char* scenario, const std::function<bool(NetLab&, int leader)>& cut,
                          std::chrono::milliseconds cutFor = kCut, const WhileCut& whileCut = {}) {
  NetLab lab(kMembers);  // declared first: it outlives the processes in it
  if (!labUsable(lab)) return;
  NetLab::Enter inLab(lab);
  REQUIRE(inLab.entered());
  FaultClusterOptions o;
  o.members = kMembers;
  o.launcher = lab.launcher();
  for (int i = 0; i < kMembers; ++i) o.listen.push_back(lab.listen(i));
  FaultCluster cluster(o);
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  const int leader = cluster.leaderIndex();
  REQUIRE(leader >= 0);
  AuditOptions a;
  a.prefix = scenario;
  a.fixedBuckets = 1024;
  a.fixedCapacity = 1;
  a.freshBuckets = 32;
  a.freshCapacity = 2;
  a.freshWindow = 50ms;
  GrantAudit audit(cluster.addresses(), a);
  REQUIRE(audit.start().empty());

  REQUIRE(audit.waitForGrants(100, 10s));  // load before the cut
  INFO(lab.output());
  REQUIRE(cut(lab, leader));
  const auto cutAt = FaultClock::now();
  if (whileCut) whileCut(cluster, leader);
  std::this_thread::sleep_until(cutAt + cutFor);  // the fault lasts this long
  REQUIRE(lab.healAll());
  CHECK(audit.waitForGrants(20, 20s));  // load after the heal
  const std::vector<std::string> unserved = audit.servedWithin(kServeLimit);
  const Convergence converged = cluster.waitConverged(0, kConvergeLimit);
  const AuditResult r = audit.finish(5s);
  const auto crashes = cluster.crashes();
  std::printf("[fault] %s: %s converged=%s converge_ms=%lld crashes=%zu unserved=%zu leader=%d\n",
              scenario, r.summary.line().c_str(), converged.converged ? "yes" : "no",
              static_cast<long long>(converged.took.count()), crashes.size(), unserved.size(),
              leader);
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
  CHECK(converged.converged);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.overDeadline == 0);
}

// The members other than `leader`, in order.
std::vector<int> followers(int leader) {
  std::vector<int> out;
  for (int i = 0; i < kMembers; ++i) {
    if (i != leader) out.push_back(i);
  }
  return out;
}

// The status of GET http://`hostPort``path` from this thread's namespace; -1 if no answer.
int httpStatus(const std::string& hostPort, const std::string& path) {
  httplib::Client c("http://" + hostPort);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(5, 0);
  const auto r = c.Get(path.c_str());
  return r ? r->status : -1;
}

}  // namespace

TEST_CASE("Probes: /readyz answers 503 on a member cut off, and 200 after the heal",
          "[fault][partition][probes]") {
  NetLab lab(kMembers);  // declared first: it outlives the processes in it
  if (!labUsable(lab)) return;
  NetLab::Enter inLab(lab);
  REQUIRE(inLab.entered());
  FaultClusterOptions o;
  o.members = kMembers;
  o.launcher = lab.launcher();
  // The probes listen on the namespace's 127.0.0.1, which the cuts (between members' addresses)
  // leave reachable from here.
  o.args.insert(o.args.end(), {"--metrics", "127.0.0.1:0"});
  for (int i = 0; i < kMembers; ++i) o.listen.push_back(lab.listen(i));
  FaultCluster cluster(o);
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  const std::vector<std::string> probes = probeAddresses(cluster);
  const int leader = cluster.leaderIndex();
  REQUIRE(leader >= 0);
  const int victim = followers(leader).back();
  const std::string& at = probes[static_cast<std::size_t>(victim)];
  CHECK(ingrid::testing::eventually([&] { return httpStatus(at, "/readyz") == 200; }, 15s));
  CHECK(ingrid::testing::eventually(
      [&] { return httpStatus(probes[leader], "/cluster-safe") == 200; }, 15s));

  INFO(lab.output());
  REQUIRE(lab.isolate(victim));
  // Its lease lapses (then it is removed and keeps trying to rejoin): not ready; its event loops
  // still turn.
  const bool unready =
      ingrid::testing::eventually([&] { return httpStatus(at, "/readyz") == 503; }, 15s);
  const int live = httpStatus(at, "/livez");
  REQUIRE(lab.healAll());
  const bool ready =
      ingrid::testing::eventually([&] { return httpStatus(at, "/readyz") == 200; }, 30s);
  const bool safe = ingrid::testing::eventually(
      [&] { return httpStatus(probes[leader], "/cluster-safe") == 200; }, 30s);
  std::printf(
      "[fault] probes: unready_while_cut=%s livez_while_cut=%d ready_after=%s safe_after=%s\n",
      unready ? "yes" : "no", live, ready ? "yes" : "no", safe ? "yes" : "no");
  std::fflush(stdout);
  CHECK(unready);
  CHECK(live == 200);
  CHECK(ready);
  CHECK(safe);
  CHECK(cluster.crashes().empty());
}

// The sum of `metric`'s samples on every member's /metrics; -1 if one does not answer.
double metricSum(const std::vector<std::string>& probes, const std::string& metric) {
  double sum = 0;
  for (const std::string& at : probes) {
    httplib::Client c("http://" + at);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(5, 0);
    const auto r = c.Get("/metrics");
    if (!r || r->status != 200) return -1;
    std::istringstream lines(r->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(metric, 0) == 0) sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return sum;
}

TEST_CASE(
    "Exactly-once window: a client blackholed past the window resumes with nothing doubled, and "
    "the copies TCP delivers late are refused, not run",
    "[fault][partition][window]") {
  NetLab lab(kMembers);  // declared first: it outlives the processes in it
  if (!labUsable(lab)) return;
  NetLab::Enter inLab(lab);
  REQUIRE(inLab.entered());
  FaultClusterOptions o;
  o.members = kMembers;
  o.launcher = lab.launcher();
  // A 3 s window: the clients cap each call to 1.5 s, and a copy is late 1.2 s (the clock skew
  // allowed) after that.
  o.args.insert(o.args.end(), {"--dedup-window-ms", "3000", "--metrics", "127.0.0.1:0"});
  for (int i = 0; i < kMembers; ++i) o.listen.push_back(lab.listen(i));
  FaultCluster cluster(o);
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  const std::vector<std::string> probes = probeAddresses(cluster);
  AuditOptions a;
  a.prefix = "blackholed-client";
  a.fixedBuckets = 1024;
  a.fixedCapacity = 1;
  a.freshBuckets = 32;
  a.freshCapacity = 2;
  a.freshWindow = 50ms;
  a.deadline = 1500ms;                       // the window's half, what the clients cap to anyway
  GrantAudit audit(cluster.addresses(), a);  // its clients dial from 127.0.0.1
  REQUIRE(audit.start().empty());
  REQUIRE(audit.waitForGrants(100, 10s));  // load before the blackhole
  const double lateBefore = metricSum(probes, "ingrid_late_requests_total");
  INFO(lab.output());
  REQUIRE(lab.blackhole("127.0.0.1"));
  std::this_thread::sleep_for(5s);  // the fault lasts this long: past the 3 s window
  REQUIRE(lab.healAll());
  CHECK(audit.waitForGrants(20, 20s));  // load after the heal
  // What the clients wrote during the blackhole reaches the members once TCP retransmits it,
  // long after its deadline: refused, never run.
  double late = 0;
  const bool refused = ingrid::testing::eventually(
      [&] {
        late = metricSum(probes, "ingrid_late_requests_total") - lateBefore;
        return late > 0;
      },
      30s);
  const AuditResult r = audit.finish(5s);
  std::printf("[fault] blackholed-client: %s late_copies_refused=%.0f\n", r.summary.line().c_str(),
              late);
  std::fflush(stdout);
  INFO(r.summary.line());
  INFO(r.worst());
  CHECK(refused);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.overDeadline == 0);
  CHECK(cluster.crashes().empty());
}

TEST_CASE("Partition 2/1: a member cut off past the failure timeout, then healed",
          "[fault][partition]") {
  runPartitionScenario("partition-2-1-member", [](NetLab& lab, int leader) {
    return lab.isolate(followers(leader).back());
  });
}

// The last member started has the largest id, so every link to it is dialed by the other side
// (the smaller id dials). Removed about a failure timeout into the cut, it is cut off well past
// the request timeout after which the others close their links to it: none dials it again, so
// it must ask them (NodeImpl::probeTopology) to learn that it was removed, and rejoin. (If it
// leads, the other two elect a leader first; it is removed all the same.)
TEST_CASE(
    "Partition 2/1: a member cut off long after its removal learns it once healed, and "
    "rejoins",
    "[fault][partition]") {
  constexpr int kLast = kMembers - 1;
  runPartitionScenario(
      "partition-2-1-removed", [](NetLab& lab, int) { return lab.isolate(kLast); }, 12s,
      [](FaultCluster& cluster, int) {
        // Removed while cut off: the other side's topology no longer lists it. The heal and
        // the convergence the scenario then checks (every live process listed) is its rejoin.
        const std::string victim = cluster[kLast].address;
        CHECK(ingrid::testing::eventually(
            [&] {
              const auto t = cluster[0].latestTopology();
              return t && t->addresses().count(victim) == 0;
            },
            10s));
      });
}

TEST_CASE("Partition 2/1: the leader cut off past the failure timeout, then healed",
          "[fault][partition]") {
  runPartitionScenario("partition-2-1-leader",
                       [](NetLab& lab, int leader) { return lab.isolate(leader); });
}

TEST_CASE("Partition 1/1/1: every link cut past the failure timeout, then healed",
          "[fault][partition]") {
  runPartitionScenario("partition-1-1-1", [](NetLab& lab, int) {
    return lab.isolate(0) && lab.isolate(1) && lab.isolate(2);
  });
}

TEST_CASE("Partition, asymmetric: a member cannot send to another, both reach the leader",
          "[fault][partition]") {
  runPartitionScenario("partition-asymmetric", [](NetLab& lab, int leader) {
    const std::vector<int> f = followers(leader);
    return lab.cut(f[0], f[1], /*bothWays=*/false);
  });
}

TEST_CASE("Partition, bridge: the leader and a member cannot talk, both talk to the third",
          "[fault][partition]") {
  runPartitionScenario("partition-bridge", [](NetLab& lab, int leader) {
    return lab.cut(leader, followers(leader).back());
  });
}
