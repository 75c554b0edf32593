#include <ingrid/node.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include <ingrid/processors/counter.h>

#include "support/child_process.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::ChildProcess;
using ingrid::testing::eventually;

namespace {

// "ingrid-node: member 1 listening on 127.0.0.1:41234" -> "127.0.0.1:41234"
std::string addressOf(const std::string& line) { return line.substr(line.rfind(' ') + 1); }

// Three ingrid-node processes with `args` (64 partitions, 1 worker, plus these), the first
// bootstrapping and the others joining through it, each having logged the settled topology.
struct Processes {
  std::vector<std::unique_ptr<ChildProcess>> procs;
  std::string seed;                  // the first one's address
  std::vector<std::string> address;  // each one's
};
Processes startProcesses(const std::vector<std::string>& args) {
  Processes out;
  std::vector<std::string> common{"--partitions", "64", "--workers", "1"};
  common.insert(common.end(), args.begin(), args.end());
  for (int i = 0; i < 3; ++i) {
    auto own = common;
    if (i > 0) own.insert(own.end(), {"--seed", out.seed});
    out.procs.push_back(std::make_unique<ChildProcess>(INGRID_NODE_PATH, own));
    REQUIRE(out.procs.back()->started());
    auto line = out.procs.back()->waitForLine("listening on", 10s);
    REQUIRE(line);
    out.address.push_back(addressOf(*line));
    if (i == 0) out.seed = out.address.back();
  }
  // Each logs the topology with all three members once the last migration settled.
  for (auto& p : out.procs) REQUIRE(p->waitForLineEver("topology v5: 3 members", 20s));
  return out;
}

// An embedded node that joins the processes as a fourth member.
NodeOptions embeddedOptions(const std::string& seed) {
  NodeOptions o;
  o.partitions = 64;
  o.workerThreads = 1;
  o.listenAddress = "127.0.0.1:0";
  o.seeds = {seed};
  return o;
}

// The id of the member listening at `address` in node's topology; 0 if none.
MemberId memberAt(const Node& node, const std::string& address) {
  const TopologyPtr t = node.topology();  // held: the loop must not run over a temporary's member
  for (const auto& m : t->members) {
    if (m.address == address) return m.id;
  }
  return 0;
}

// One key for each of the 64 partitions.
std::vector<std::string> keyPerPartition(const std::string& prefix) {
  std::vector<std::string> keys(64);
  for (int i = 0, found = 0; found < 64 && i < 100000; ++i) {
    std::string k = prefix + std::to_string(i);
    auto& slot = keys[partitionOf(k, 64)];
    if (slot.empty()) {
      slot = std::move(k);
      ++found;
    }
  }
  return keys;
}

}  // namespace

TEST_CASE("Three ingrid-node processes form a cluster and serve invocations",
          "[cluster][multiprocess]") {
  Processes cluster = startProcesses({});
  auto& procs = cluster.procs;

  // An embedded node in this process joins as a fourth member and invokes through the cluster:
  // most keys live on the other processes.
  Node node(embeddedOptions(cluster.seed));
  REQUIRE(node.start().ok());
  REQUIRE(eventually([&] { return node.topology()->members.size() == 4; }));
  for (int k = 0; k < 40; ++k) {
    for (int i = 0; i < 5; ++i) {
      auto r = node.invoke("proc-counter-" + std::to_string(k), Increment{1});
      INFO((r.ok() ? std::string("ok") : r.error().message()));
      REQUIRE(r.ok());
    }
  }
  for (int k = 0; k < 40; ++k) {
    auto r = node.invoke("proc-counter-" + std::to_string(k), GetCounter{});
    REQUIRE(r.ok());
    CHECK(*r == 5);
  }
  CHECK(node.TEST_executed() < 400);  // most ran in the other processes
  node.stop();

  // SIGTERM: each process leaves gracefully and exits 0; the counters survive on the others.
  for (std::size_t i = procs.size(); i-- > 0;) {
    procs[i]->signal(SIGTERM);
    REQUIRE(procs[i]->waitForLine("stopped", 30s));
    auto status = procs[i]->wait(10s);
    REQUIRE(status);
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 0);
  }
}

TEST_CASE("A member killed with -9: its backups take over and every key is served again",
          "[cluster][multiprocess][failure]") {
  Processes cluster = startProcesses({"--heartbeat-ms", "100", "--failure-timeout-ms", "1000"});
  auto& procs = cluster.procs;
  const std::string victimAddress = cluster.address.back();
  NodeOptions o = embeddedOptions(cluster.seed);
  o.heartbeatInterval = 100ms;
  o.failureTimeout = 1000ms;
  o.requestTimeout = 5000ms;
  Node node(o);
  REQUIRE(node.start().ok());
  REQUIRE(eventually([&] { return node.topology()->members.size() == 4; }));
  // One key per partition, each incremented once before the crash.
  const std::vector<std::string> keys = keyPerPartition("crash-");
  for (auto& k : keys) REQUIRE(node.invoke(k, Increment{1}).ok());
  const MemberId victim = memberAt(node, victimAddress);
  REQUIRE(victim != 0);

  procs.back()->signal(SIGKILL);
  REQUIRE(procs.back()->wait(10s));
  // Right away, every call ends within its deadline: served (by the survivors, or once the
  // backups took over) or refused with an error that says what happened.
  std::vector<int> attempts(64, 1);
  for (PartitionId p = 0; p < 64; ++p) {
    const auto started = std::chrono::steady_clock::now();
    auto r = node.invoke(keys[p], Increment{1});
    const auto took = std::chrono::steady_clock::now() - started;
    INFO("partition " << p << ": " << (r.ok() ? std::string("ok") : r.error().message()));
    CHECK(took < o.requestTimeout + 2s);
    ++attempts[p];
  }
  // The victim is declared failed and removed; its partitions are served by their backups and
  // re-replicated (no replica still syncing).
  const bool recovered = eventually([&] {
    const TopologyPtr t = node.topology();
    return t->members.size() == 3 && !t->hasMember(victim) && t->syncing.empty();
  });
  if (!recovered) {
    const TopologyPtr t = node.topology();
    std::string syncing;
    for (const auto& r : t->syncing) {
      syncing += " p" + std::to_string(r.partition) + "->m" + std::to_string(r.member) + "@" +
                 std::to_string(r.since);
    }
    FAIL("not recovered: topology v" << t->version << " with " << t->members.size()
                                     << " members, syncing:" << syncing);
  }
  for (std::size_t i = 0; i + 1 < procs.size(); ++i) CHECK(procs[i]->waitForLine("3 members", 10s));
  for (PartitionId p = 0; p < 64; ++p) {
    INFO("partition " << p);
    auto r = node.invoke(keys[p], Increment{1});
    REQUIRE(r.ok());
    auto count = node.invoke(keys[p], GetCounter{});
    REQUIRE(count.ok());
    CHECK(*count >= 2);                // the acknowledged increments survived the crash
    CHECK(*count <= attempts[p] + 1);  // none applied twice
  }
  node.stop();
  for (std::size_t i = procs.size() - 1; i-- > 0;) {
    procs[i]->signal(SIGTERM);
    auto status = procs[i]->wait(30s);
    REQUIRE(status);
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 0);
  }
}

TEST_CASE("A member restarted at its address is a new member: its old self is removed as failed",
          "[cluster][multiprocess][failure]") {
  // A failure timeout far longer than the test: only the restarted join can remove the old self.
  // The old self loses its primaries without fencing (it is dead), so the change waits out its
  // lease: keep that short.
  const std::vector<std::string> slow{"--failure-timeout-ms", "600000", "--lease-ms", "1000"};
  Processes cluster = startProcesses(slow);
  auto& procs = cluster.procs;
  const std::string victimAddress = cluster.address.back();
  NodeOptions o = embeddedOptions(cluster.seed);
  o.failureTimeout = 600s;
  o.leaseDuration = 1s;
  Node node(o);
  REQUIRE(node.start().ok());
  REQUIRE(eventually([&] { return node.topology()->members.size() == 4; }));
  for (int k = 0; k < 64; ++k) REQUIRE(node.invoke("restart-" + std::to_string(k), Increment{7}));
  const MemberId oldId = memberAt(node, victimAddress);
  REQUIRE(oldId != 0);

  procs.back()->signal(SIGKILL);
  REQUIRE(procs.back()->wait(10s));
  const std::vector<std::string> args{"--partitions", "64",         "--workers", "1",
                                      slow[0],        slow[1],      slow[2],     slow[3],
                                      "--seed",       cluster.seed, "--listen",  victimAddress};
  procs.back() = std::make_unique<ChildProcess>(INGRID_NODE_PATH, args);
  REQUIRE(procs.back()->waitForLine("listening on " + victimAddress, 10s));
  REQUIRE(eventually([&] {
    const TopologyPtr t = node.topology();
    const MemberInfo* last = t->members.empty() ? nullptr : &t->members.back();
    return t->members.size() == 4 && !t->hasMember(oldId) && last->address == victimAddress &&
           t->syncing.empty();
  }));
  // Every counter kept its value: the old self's partitions came from their backups, not from
  // the empty restarted process.
  for (int k = 0; k < 64; ++k) {
    auto r = node.invoke("restart-" + std::to_string(k), GetCounter{});
    REQUIRE(r.ok());
    CHECK(*r == 7);
  }
  node.stop();
  for (std::size_t i = procs.size(); i-- > 0;) {
    procs[i]->signal(SIGTERM);
    auto status = procs[i]->wait(30s);
    REQUIRE(status);
    CHECK(WIFEXITED(*status));
  }
}
