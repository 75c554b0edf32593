// In-process faults: frames between embedded members dropped, duplicated, delayed and
// reordered by FrameFaults (cluster/transport/frame_faults.h), one way or both. The injector itself
// first; then three members on 127.0.0.2-4 under the grant audit: no token granted twice, every
// acknowledged grant in the final state, no caller past its deadline, and once the faults are
// lifted the members settle on one topology with every replica complete. Run them alone with
// `fault_tests "[inprocess]"`.
#include "cluster/transport/frame_faults.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ingrid/node.h>

#include "cluster/watch_ring.h"
#include "support/grant_audit.h"
#include "support/test_cluster.h"

using namespace std::chrono_literals;
using ingrid::FrameFaults;
using ingrid::testing::AuditOptions;
using ingrid::testing::AuditResult;
using ingrid::testing::GrantAudit;
using ingrid::testing::TestCluster;

namespace {

constexpr int kMembers = 3;

std::string ipOf(int i) { return "127.0.0." + std::to_string(i + 2); }

// Options for members sharing `faults` that detect a failure within about a second.
ingrid::NodeOptions fastOptions(std::shared_ptr<FrameFaults> faults) {
  ingrid::NodeOptions o = ingrid::testing::smallClusterOptions();
  o.heartbeatInterval = 100ms;
  o.failureTimeout = 1000ms;
  o.electionTimeout = 300ms;
  o.frameFaults = std::move(faults);
  return o;
}

// The audit's load: `callers` callers over `buckets` buckets of one token each and
// `buckets / 32` buckets of two tokens refilled every 50 ms.
AuditOptions auditLoad(const char* prefix, int callers, int buckets) {
  AuditOptions a;
  a.prefix = prefix;
  a.callers = callers;
  a.fixedBuckets = buckets;
  a.fixedCapacity = 1;
  a.freshBuckets = buckets / 32;
  a.freshCapacity = 2;
  a.freshWindow = 50ms;
  return a;
}

// Three members on distinct loopback addresses sharing `faults`, under the audit's load; applies
// `inject` for `faultFor`, lifts every rule, and checks the invariants.
void runFrameScenario(const char* scenario, std::chrono::milliseconds faultFor,
                      const std::function<void(FrameFaults&)>& inject) {
  auto faults = std::make_shared<FrameFaults>(/*seed=*/7);
  TestCluster cluster(fastOptions(faults));
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(kMembers));
  std::vector<std::string> seeds;
  for (ingrid::Node* n : cluster.live()) seeds.push_back(n->listenAddress());
  GrantAudit audit(seeds, auditLoad(scenario, 16, 512));
  REQUIRE(audit.start().empty());

  REQUIRE(audit.waitForGrants(100, 10s));  // load before the fault
  inject(*faults);
  std::this_thread::sleep_for(faultFor);  // the fault lasts this long
  const FrameFaults::Counts hit = faults->counts();
  faults->clear();
  // Healing: a member removed meanwhile rejoins; every replica completes.
  const auto healStart = std::chrono::steady_clock::now();
  const bool settled = ingrid::testing::eventually(
      [&] { return cluster.live().size() == kMembers && cluster.settled(); }, 30s);
  const auto healMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - healStart)
                          .count();
  CHECK(audit.waitForGrants(100, 10s));  // load after healing
  const AuditResult r = audit.finish(5s);
  std::printf(
      "[fault] %s: %s settled=%s settle_ms=%lld frames judged=%llu dropped=%llu duplicated=%llu "
      "delayed=%llu\n",
      scenario, r.summary.line().c_str(), settled ? "yes" : "no", static_cast<long long>(healMs),
      static_cast<unsigned long long>(hit.judged), static_cast<unsigned long long>(hit.dropped),
      static_cast<unsigned long long>(hit.duplicated),
      static_cast<unsigned long long>(hit.delayed));
  std::fflush(stdout);

  INFO(r.summary.line());
  INFO(r.worst());
  CHECK(hit.judged > 0);  // the faults were applied to real traffic
  CHECK(settled);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.overDeadline == 0);
}

// A cut to install, chosen by a test from the started cluster and its first topology.
struct Cut {
  FrameFaults::Rule rule;
  ingrid::Node* witness = nullptr;  // the member whose topology shows the removal
  std::function<bool(const ingrid::Topology&)> removed;  // true once the witness removed it
  std::string who;                                       // printed: "member 3", "members 3 -> 5"
};

// `members` members on distinct loopback addresses sharing FrameFaults seeded `seed`, under the
// audit's load: installs the cut `pick` returns and requires the witness to remove a member within
// 20 s, then load while cut; lifts it, requires every member back and settled within 60 s, load
// after healing, and checks the audit's invariants.
void runCutUntilRemoved(const char* scenario, int members, std::uint64_t seed,
                        const std::function<Cut(TestCluster&, const ingrid::Topology&)>& pick) {
  auto faults = std::make_shared<FrameFaults>(seed);
  TestCluster cluster(fastOptions(faults));
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(members));
  const ingrid::TopologyPtr t = cluster.at(0).topology();
  const Cut cut = pick(cluster, *t);
  REQUIRE(cut.witness != nullptr);
  std::vector<std::string> seeds;
  for (ingrid::Node* n : cluster.live()) seeds.push_back(n->listenAddress());
  GrantAudit audit(seeds, auditLoad(scenario, 16, 512));
  REQUIRE(audit.start().empty());
  REQUIRE(audit.waitForGrants(100, 10s));  // load before the fault

  faults->add(cut.rule);
  // Bounded: the removal is expected within a few failure timeouts of the cut.
  const bool removed = ingrid::testing::eventually(
      [&] {
        const ingrid::TopologyPtr now = cut.witness->topology();
        return cut.removed(*now);
      },
      20s);
  const FrameFaults::Counts hit = faults->counts();
  CHECK(audit.waitForGrants(100, 10s));  // load while cut, on what the leader kept
  faults->clear();
  const bool settled = ingrid::testing::eventually(
      [&] {
        return cluster.live().size() == static_cast<std::size_t>(members) && cluster.settled();
      },
      60s);
  CHECK(audit.waitForGrants(100, 10s));  // load after healing
  const AuditResult r = audit.finish(5s);
  std::printf("[fault] %s: %s cut, removed=%s settled=%s %s dropped=%llu\n", scenario,
              cut.who.c_str(), removed ? "yes" : "no", settled ? "yes" : "no",
              r.summary.line().c_str(), static_cast<unsigned long long>(hit.dropped));
  std::fflush(stdout);

  INFO(r.summary.line());
  INFO(r.worst());
  CHECK(hit.dropped > 0);
  CHECK(removed);
  CHECK(settled);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.overDeadline == 0);
}

}  // namespace

TEST_CASE("FrameFaults drops, duplicates and delays what its rules match, and nothing else",
          "[fault][inprocess]") {
  FrameFaults f(/*seed=*/1);
  constexpr auto kInvoke = ingrid::MessageType::kInvoke;
  CHECK_FALSE(f.active());
  const FrameFaults::Decision none = f.decide("127.0.0.2", "127.0.0.3", kInvoke);
  CHECK_FALSE(none.drop);
  CHECK_FALSE(none.duplicate);
  CHECK(none.delay.count() == 0);

  const int cut = f.add({.from = "127.0.0.2", .to = "127.0.0.3", .cut = true});
  CHECK(f.active());
  CHECK(f.decide("127.0.0.2", "127.0.0.3", kInvoke).drop);
  CHECK_FALSE(f.decide("127.0.0.3", "127.0.0.2", kInvoke).drop);  // one way
  f.remove(cut);
  CHECK_FALSE(f.active());

  f.add({.from = "*",
         .to = "127.0.0.4",
         .drop = 0.5,
         .duplicate = 0.5,
         .delayMin = 5ms,
         .delayMax = 20ms});
  int dropped = 0, duplicated = 0, delayed = 0;
  constexpr int kFrames = 2000;
  for (int i = 0; i < kFrames; ++i) {
    const auto d = f.decide("127.0.0.2", "127.0.0.4", kInvoke);
    if (d.drop) {
      ++dropped;
      continue;
    }
    duplicated += d.duplicate;
    if (d.delay.count() > 0) {
      ++delayed;
      CHECK(d.delay >= 5ms);
      CHECK(d.delay <= 20ms);
    }
  }
  // Seeded: about half dropped, about half of the rest duplicated, every survivor delayed.
  CHECK(dropped > kFrames / 3);
  CHECK(dropped < 2 * kFrames / 3);
  CHECK(duplicated > (kFrames - dropped) / 3);
  CHECK(delayed == kFrames - dropped);
  CHECK_FALSE(f.decide("127.0.0.2", "127.0.0.3", kInvoke).drop);  // another link: untouched
  const auto c = f.counts();
  CHECK(c.judged == kFrames + 4);
  CHECK(c.dropped == static_cast<std::uint64_t>(dropped) + 1);
  f.clear();
  CHECK_FALSE(f.active());

  // A rule limited to some frame types leaves the others alone.
  f.add({.types = {ingrid::MessageType::kSnapshot}, .cut = true});
  CHECK(f.decide("127.0.0.2", "127.0.0.3", ingrid::MessageType::kSnapshot).drop);
  CHECK_FALSE(f.decide("127.0.0.2", "127.0.0.3", kInvoke).drop);
  f.clear();
}

TEST_CASE("In-process: every link between members lossy, duplicating and reordering",
          "[fault][inprocess]") {
  runFrameScenario("frames-lossy-all", 3s, [](FrameFaults& f) {
    for (int a = 0; a < kMembers; ++a) {
      for (int b = 0; b < kMembers; ++b) {
        if (a == b) continue;
        f.add({.from = ipOf(a),
               .to = ipOf(b),
               .drop = 0.05,
               .duplicate = 0.05,
               .delayMin = 0ms,
               .delayMax = 30ms});
      }
    }
  });
}

TEST_CASE("In-process: one member cannot send to another past the failure timeout",
          "[fault][inprocess]") {
  // Members 1 and 2 (not the first, which leads unless an election moved it) both reach the
  // others, but 1's frames to 2 are lost: a partial partition the leader must resolve.
  runFrameScenario("frames-one-way-cut", 3s,
                   [](FrameFaults& f) { f.add({.from = ipOf(1), .to = ipOf(2), .cut = true}); });
}

TEST_CASE("In-process: every frame to one member delayed past the heartbeat interval",
          "[fault][inprocess]") {
  runFrameScenario("frames-slow-member", 2s, [](FrameFaults& f) {
    for (int a = 0; a < kMembers; ++a) {
      if (a != 2) {
        f.add({.from = ipOf(a), .to = ipOf(2), .delayMin = 150ms, .delayMax = 300ms});
      }
    }
  });
}

TEST_CASE("In-process: a join whose snapshots are lost past the stall timeout is planned again",
          "[fault][inprocess]") {
  // Every snapshot to the joining member is lost for longer than the migration stall timeout (and
  // shorter than the request timeout, after which a chunk would be retried anyway): the leader
  // must plan the migration again, restarting its snapshots (each re-plan commits one more
  // topology), and the join completes once the link carries snapshots again.
  auto faults = std::make_shared<FrameFaults>(/*seed=*/11);
  ingrid::NodeOptions o = fastOptions(faults);
  o.requestTimeout = 10s;
  o.migrationStallTimeout = 600ms;
  TestCluster cluster(o);
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(2));
  std::vector<std::string> seeds;
  for (ingrid::Node* n : cluster.live()) seeds.push_back(n->listenAddress());
  GrantAudit audit(seeds, auditLoad("stalled-join", 8, 256));
  REQUIRE(audit.start().empty());
  REQUIRE(audit.waitForGrants(50, 10s));  // load before the join

  const std::uint64_t before = cluster.at(0).topology()->version;
  faults->add({.to = ipOf(2), .types = {ingrid::MessageType::kSnapshot}, .cut = true});
  cluster.add();
  REQUIRE(cluster.lastStart().ok());
  // Bounded: the cut lasts 4 stall timeouts.
  std::this_thread::sleep_for(4 * o.migrationStallTimeout);  // the fault lasts this long
  const FrameFaults::Counts hit = faults->counts();
  const bool stuck = !cluster.settled();
  faults->clear();
  const bool settled = ingrid::testing::eventually([&] { return cluster.settled(); }, 30s);
  const std::uint64_t after = cluster.at(0).topology()->version;
  const AuditResult r = audit.finish(5s);
  std::printf(
      "[fault] stalled-join: %s settled=%s topology v%llu -> v%llu snapshots dropped=%llu\n",
      r.summary.line().c_str(), settled ? "yes" : "no", static_cast<unsigned long long>(before),
      static_cast<unsigned long long>(after), static_cast<unsigned long long>(hit.dropped));
  std::fflush(stdout);

  INFO(r.summary.line());
  INFO(r.worst());
  CHECK(hit.dropped > 0);  // snapshots were really lost
  CHECK(stuck);            // and the join could not finish while they were
  CHECK(settled);
  // A join is two topologies (T1, T2); each re-plan adds one.
  CHECK(after >= before + 4);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.overDeadline == 0);
}

TEST_CASE(
    "In-process: a new owner whose snapshot is overtaken by later updates refuses it, and "
    "holds every acknowledged update when it takes over",
    "[fault][inprocess]") {
  // A new owner acknowledges (and ignores) the updates that reach it before its snapshot, for the
  // snapshot to hold. Here every snapshot frame to the joining member is held 100-300 ms while the
  // updates made after it are not, so updates newer than a snapshot arrive first. Installing such
  // a snapshot would make a complete replica without updates whose grants were acknowledged: the
  // new owner must refuse it (the primary sends a fresh one). Then the first member crashes: the
  // partitions it led whose backup is the newcomer are served from what the newcomer holds.
  // Nothing lost, nothing granted twice.
  auto faults = std::make_shared<FrameFaults>(/*seed=*/13);
  TestCluster cluster(fastOptions(faults));
  cluster.useDistinctAddresses();
  REQUIRE(cluster.start(2));
  std::vector<std::string> seeds;
  for (ingrid::Node* n : cluster.live()) seeds.push_back(n->listenAddress());
  GrantAudit audit(seeds, auditLoad("overtaken-snapshot", 16, 512));
  REQUIRE(audit.start().empty());
  REQUIRE(audit.waitForGrants(100, 10s));  // load before the join

  faults->add({.to = ipOf(2),
               .types = {ingrid::MessageType::kSnapshot},
               .delayMin = 100ms,
               .delayMax = 300ms});
  cluster.add();
  REQUIRE(cluster.lastStart().ok());
  // Bounded: the join completes under the fault (a snapshot that no update overtook is installed)
  // or the fault is lifted after 5 s.
  ingrid::testing::eventually([&] { return cluster.settled(); }, 5s);
  const FrameFaults::Counts hit = faults->counts();
  faults->clear();
  const bool joined = ingrid::testing::eventually([&] { return cluster.settled(); }, 30s);
  ingrid::Node& newcomer = cluster.at(2);
  const std::uint64_t refused = newcomer.TEST_snapshotsRefused();
  cluster.crash(0);
  const bool afterFirst = ingrid::testing::eventually([&] { return cluster.settled(); }, 30s);
  CHECK(audit.waitForGrants(100, 10s));  // load on the two that are left
  const AuditResult r = audit.finish(5s);
  std::printf(
      "[fault] overtaken-snapshot: %s joined=%s settled_after_crash=%s snapshots delayed=%llu "
      "refused=%llu\n",
      r.summary.line().c_str(), joined ? "yes" : "no", afterFirst ? "yes" : "no",
      static_cast<unsigned long long>(hit.delayed), static_cast<unsigned long long>(refused));
  std::fflush(stdout);

  INFO(r.summary.line());
  INFO(r.worst());
  CHECK(hit.delayed > 0);  // snapshots were really held back
  CHECK(refused > 0);      // and some were overtaken by updates, and refused
  CHECK(joined);
  CHECK(afterFirst);
  CHECK(r.summary.doubled == 0);
  CHECK(r.summary.lost == 0);
  CHECK(r.summary.overDeadline == 0);
}

TEST_CASE(
    "In-process: a one-way cut between two of ten members that do not watch each other is "
    "found through the requests it holds up",
    "[fault][inprocess]") {
  // Heartbeats go around the ring (cluster/watch_ring.h): with ten members, some pairs heartbeat
  // neither way. A cut between such a primary and its backup holds the primary's writes up; the
  // primary then watches the backup (memberUnanswered), reports it unreachable, and the leader
  // removes one of the two while the cut lasts (a primary never waits forever on its backup).
  constexpr int kTen = 10;
  runCutUntilRemoved(
      "frames-unwatched-cut", kTen, /*seed=*/17,
      [](TestCluster& cluster, const ingrid::Topology& t) {
        // A primary `a` and its backup `b`, neither the control plane's leader, neither watching
        // the other; the audit's keys cover every partition, so `a` replicates to `b`.
        int a = -1;
        int b = -1;
        for (int i = 0; i < kTen && a < 0; ++i) {
          for (int j = 0; j < kTen && a < 0; ++j) {
            const ingrid::MemberId ia = cluster.at(static_cast<std::size_t>(i)).memberId();
            const ingrid::MemberId jb = cluster.at(static_cast<std::size_t>(j)).memberId();
            if (i == j || ia == t.leader || jb == t.leader) continue;
            const auto wa = ingrid::watchedBy(t, ia);
            const auto wb = ingrid::watchedBy(t, jb);
            if (std::find(wa.begin(), wa.end(), jb) != wa.end() ||
                std::find(wb.begin(), wb.end(), ia) != wb.end()) {
              continue;
            }
            for (ingrid::PartitionId p = 0; p < t.table.partitionCount(); ++p) {
              if (t.table.primary(p) == ia && t.table.isOwner(p, jb)) {
                a = i;
                b = j;
                break;
              }
            }
          }
        }
        REQUIRE(a >= 0);
        const ingrid::MemberId idA = cluster.at(static_cast<std::size_t>(a)).memberId();
        const ingrid::MemberId idB = cluster.at(static_cast<std::size_t>(b)).memberId();
        return Cut{.rule = {.from = ipOf(a), .to = ipOf(b), .cut = true},
                   .witness = cluster.byId(t.leader),
                   .removed =
                       [idA, idB](const ingrid::Topology& now) {
                         return !now.hasMember(idA) || !now.hasMember(idB);
                       },
                   .who = "members " + std::to_string(idA) + " -> " + std::to_string(idB)};
      });
}

TEST_CASE(
    "In-process: the leader's frames to one of seven members lost, that member's requests "
    "arriving: it is removed, not left without a lease",
    "[fault][inprocess]") {
  // The leader hears every member through its lease requests, which this member's still bring;
  // its grants are lost. Every member also watches the leader, so this one reports it, and the
  // leader removes it (its keys move to members with leases) instead of leaving them refused.
  // The member's ring (its 2 successors) does not hold the leader.
  constexpr int kSeven = 7;
  runCutUntilRemoved(
      "frames-leader-to-member-cut", kSeven, /*seed=*/19,
      [](TestCluster& cluster, const ingrid::Topology& t) {
        int leader = -1;
        int victim = -1;
        for (int i = 0; i < kSeven; ++i) {
          const ingrid::MemberId id = cluster.at(static_cast<std::size_t>(i)).memberId();
          if (id == t.leader) {
            leader = i;
            continue;
          }
          const auto w = ingrid::watchedBy(t, id);  // its ring: the leader is not on it
          if (victim < 0 && std::find(w.begin(), w.end(), t.leader) == w.end()) victim = i;
        }
        REQUIRE(leader >= 0);
        REQUIRE(victim >= 0);
        const ingrid::MemberId idVictim = cluster.at(static_cast<std::size_t>(victim)).memberId();
        // The control plane's frames only (lease grants, Raft, heartbeat answers): replication
        // between the two still flows, so no failed write points either at the other.
        return Cut{
            .rule = {.from = ipOf(leader),
                     .to = ipOf(victim),
                     .types = {ingrid::MessageType::kLease, ingrid::MessageType::kRaft,
                               ingrid::MessageType::kHeartbeat},
                     .cut = true},
            .witness = &cluster.at(static_cast<std::size_t>(leader)),
            .removed = [idVictim](const ingrid::Topology& now) { return !now.hasMember(idVictim); },
            .who = "member " + std::to_string(idVictim)};
      });
}
