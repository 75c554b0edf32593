#include <ingrid/cluster/node.h>

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

}  // namespace

TEST_CASE("Three ingrid-node processes form a cluster and serve invocations",
          "[cluster][multiprocess]") {
  const std::vector<std::string> common{"--partitions", "64", "--workers", "1"};
  std::vector<std::unique_ptr<ChildProcess>> procs;
  procs.push_back(std::make_unique<ChildProcess>(INGRID_NODE_PATH, common));
  REQUIRE(procs[0]->started());
  auto first = procs[0]->waitForLine("listening on", 10s);
  REQUIRE(first);
  const std::string seed = addressOf(*first);
  for (int i = 0; i < 2; ++i) {
    auto args = common;
    args.insert(args.end(), {"--seed", seed});
    procs.push_back(std::make_unique<ChildProcess>(INGRID_NODE_PATH, args));
    REQUIRE(procs.back()->started());
    REQUIRE(procs.back()->waitForLine("listening on", 10s));
  }
  // Each process logs the topology with all three members (after the migration settles).
  for (auto& p : procs) REQUIRE(p->waitForLine("topology v5: 3 members", 20s));

  // An embedded node in this process joins as a fourth member and invokes through the cluster:
  // most keys live on the other processes.
  NodeOptions o;
  o.partitions = 64;
  o.workerThreads = 1;
  o.listenAddress = "127.0.0.1:0";
  o.seeds = {seed};
  Node node(o);
  REQUIRE(node.start().ok());
  REQUIRE(eventually([&] { return node.topology()->members.size() == 4; }));
  for (int k = 0; k < 40; ++k) {
    for (int i = 0; i < 5; ++i) {
      auto r = node.invoke("proc-counter-" + std::to_string(k), Increment{1});
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
