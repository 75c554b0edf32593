// Recovery after a lost quorum: kill -9 of two of three voters under load stops every write (no
// leader, leases lapse); `ingrid-cli recover --yes` makes the survivor a new control plane, and
// writes resume. What it printed as lost is what the final state shows: each partition it named
// restarted full (every grant acknowledged there before the kill is gone from its bucket), and
// every other partition kept its counts (0 acknowledged grants lost, 0 doubled, per GrantAudit).
// Run it alone with `fault_tests "[recover]"`; it prints one summary line.
#include "support/fault_harness.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ingrid/client.h>
#include <ingrid/hash.h>

#include "support/grant_audit.h"

using namespace std::chrono_literals;
using ingrid::testing::AuditOptions;
using ingrid::testing::AuditResult;
using ingrid::testing::Convergence;
using ingrid::testing::FaultCluster;
using ingrid::testing::FaultClusterOptions;
using ingrid::testing::GrantAudit;
using ingrid::testing::NodeProcess;
using ingrid::testing::writesStopped;

namespace {

constexpr std::uint32_t kPartitions = 64;

// The numbers of the JSON array `name` in `line` ("\"lost\":[1,5]").
std::set<std::uint64_t> jsonNumbers(const std::string& line, const std::string& name) {
  std::set<std::uint64_t> out;
  const auto at = line.find("\"" + name + "\":[");
  if (at == std::string::npos) return out;
  const char* p = line.c_str() + at + name.size() + 4;
  while (*p != '\0' && *p != ']') {  // bounded by the line's end
    char* end = nullptr;
    const unsigned long long v = std::strtoull(p, &end, 10);
    if (end == p) break;
    out.insert(v);
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

// `members` processes with `backups`, 3 voters (the three smallest ids); kills the first two
// (two of the voters) under load, then recovers. `someLost`: whether partitions are expected
// to have had every replica on the victims.
void runRecoverScenario(const char* scenario, int members, int backups, bool someLost) {
  FaultClusterOptions o;
  o.members = members;
  o.args = {"--partitions",
            std::to_string(kPartitions),
            "--workers",
            "1",
            "--backups",
            std::to_string(backups),
            "--voters",
            "3",
            "--failure-timeout-ms",
            "2000"};
  FaultCluster cluster(o);
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  AuditOptions a;
  a.prefix = scenario;
  a.fixedBuckets = 1024;
  a.fixedCapacity = 1;
  a.freshBuckets = 32;
  a.freshCapacity = 2;
  a.freshWindow = 50ms;
  GrantAudit audit(cluster.addresses(), a);
  REQUIRE(audit.start().empty());
  REQUIRE(audit.waitForGrants(100, 10s));  // load that ran before the fault

  const auto killedAt = ingrid::testing::FaultClock::now();
  cluster[0].kill9();
  cluster[1].kill9();
  const std::string survivor = cluster[2].address;
  std::set<std::uint64_t> survivors;
  for (std::size_t i = 2; i < cluster.size(); ++i) survivors.insert(cluster[i].memberId);
  REQUIRE(ingrid::testing::eventually([&] { return writesStopped(survivor); }, 20s));
  const auto stoppedAt = ingrid::testing::FaultClock::now();

  // Dry run first: it changes nothing, so writes stay stopped.
  NodeProcess dry({}, INGRID_CLI_PATH,
                  {"recover", "--seed", survivor, "--json", "--timeout-ms", "2000"});
  const auto dryEnd = dry.waitExit(30s);
  INFO(dry.tail(12));
  REQUIRE(dryEnd);
  CHECK(WIFEXITED(*dryEnd));
  CHECK(WEXITSTATUS(*dryEnd) == 0);
  CHECK(writesStopped(survivor));

  const auto recoverAt = ingrid::testing::FaultClock::now();
  NodeProcess cli({}, INGRID_CLI_PATH,
                  {"recover", "--seed", survivor, "--json", "--yes", "--timeout-ms", "2000"});
  const auto cliEnd = cli.waitExit(60s);
  INFO(cli.tail(12));
  REQUIRE(cliEnd);
  REQUIRE(WIFEXITED(*cliEnd));
  REQUIRE(WEXITSTATUS(*cliEnd) == 0);
  const auto plan = cli.waitForLine("\"lost\":[", 1s);
  REQUIRE(plan);
  const std::set<std::uint64_t> lost = jsonNumbers(*plan, "lost");
  CHECK(jsonNumbers(*plan, "survivors") == survivors);
  const auto recoveredAt = ingrid::testing::FaultClock::now();

  CHECK(audit.waitForGrants(100, 15s));  // load the recovered cluster served
  const Convergence converged = cluster.waitConverged(0, 15s);
  const AuditResult r = audit.finish(5s);

  // Keys acknowledged before the kill; per partition, what the final state says.
  std::set<std::uint32_t> ackedBefore;
  for (const auto& c : r.calls) {
    if (c.outcome == ingrid::testing::AuditCall::kGranted && c.end < killedAt) {
      ackedBefore.insert(c.key);
    }
  }
  std::uint64_t keptLost = 0, keptDoubled = 0, lostKeysChecked = 0, lostKeysNotFull = 0;
  std::string notFull;
  for (std::uint32_t k = 0; k < r.keys.size(); ++k) {
    const auto& v = r.keys[k];
    const std::uint64_t p = ingrid::partitionOf(v.key, kPartitions);
    if (lost.count(p) == 0) {
      keptLost += static_cast<std::uint64_t>(v.lost());
      keptDoubled += static_cast<std::uint64_t>(v.doubled());
    } else if (ackedBefore.count(k) != 0 && v.readable) {
      // Restarted full: its grants from before the kill are no longer consumed.
      ++lostKeysChecked;
      if (v.lost() == 0) {
        ++lostKeysNotFull;
        if (notFull.size() < 400) notFull += " " + v.key;
      }
    }
  }
  const auto outage = r.window(stoppedAt, recoverAt);
  const auto after = r.window(recoveredAt, ingrid::testing::FaultClock::now());
  std::printf(
      "[fault] %s: %s lost_partitions=%zu kept_lost=%llu kept_doubled=%llu "
      "lost_keys_checked=%llu acked_while_stopped=%llu acked_after=%llu converged=%s "
      "recover_ms=%lld\n",
      scenario, r.summary.line().c_str(), lost.size(), static_cast<unsigned long long>(keptLost),
      static_cast<unsigned long long>(keptDoubled),
      static_cast<unsigned long long>(lostKeysChecked),
      static_cast<unsigned long long>(outage.acked), static_cast<unsigned long long>(after.acked),
      converged.converged ? "yes" : "no",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(recoveredAt - recoverAt).count()));
  std::fflush(stdout);

  INFO(*plan);
  INFO(r.summary.line());
  INFO(converged.detail);
  INFO(r.worst());
  INFO("lost-partition keys still holding a grant from before the kill:" + notFull);
  const auto crashes = cluster.crashes();
  for (const auto& c : crashes) INFO(c);
  CHECK(crashes.empty());
  CHECK(outage.acked == 0);  // writes stopped until recover
  CHECK(after.acked > 0);    // and resumed
  CHECK(keptLost == 0);
  CHECK(keptDoubled == 0);
  CHECK(lost.empty() != someLost);
  CHECK(lost.size() < kPartitions);
  if (someLost) CHECK(lostKeysChecked > 0);
  CHECK(lostKeysNotFull == 0);
  CHECK(converged.converged);
}

}  // namespace

TEST_CASE(
    "Recover: kill -9 of two of three voters stops writes and ingrid-cli recover restores "
    "them losing only the partitions it named",
    "[fault][recover]") {
  // One backup: the partitions whose two replicas were both on the victims are lost.
  runRecoverScenario("recover-2-of-3-voters", 3, 1, true);
}

TEST_CASE(
    "Recover: five members with two backups lose two of their three voters and recover "
    "with nothing lost",
    "[fault][recover]") {
  // Three survivors (one voter, two standbys) elect among themselves; every partition had a
  // replica outside the victims.
  runRecoverScenario("recover-5-members-2-backups", 5, 2, false);
}

TEST_CASE("Recover: with a cluster secret a request that does not prove it is refused",
          "[fault][recover]") {
  char dir[] = "/tmp/ingrid-recover-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string secret = std::string(dir) + "/secret";
  {
    std::FILE* f = std::fopen(secret.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("recover-test-secret\n", f);
    std::fclose(f);
  }
  FaultClusterOptions o;
  o.members = 3;
  o.args = {"--partitions",
            "16",
            "--workers",
            "1",
            "--voters",
            "3",
            "--failure-timeout-ms",
            "2000",
            "--cluster-secret-file",
            secret};
  FaultCluster cluster(o);
  const std::string started = cluster.start();
  INFO(started);
  REQUIRE(started.empty());
  cluster[0].kill9();
  cluster[1].kill9();
  const std::string survivor = cluster[2].address;
  REQUIRE(ingrid::testing::eventually([&] { return writesStopped(survivor); }, 20s));

  NodeProcess without({}, INGRID_CLI_PATH,
                      {"recover", "--seed", survivor, "--yes", "--timeout-ms", "2000"});
  const auto refused = without.waitExit(60s);
  INFO(without.tail(12));
  REQUIRE(refused);
  CHECK(WIFEXITED(*refused));
  CHECK(WEXITSTATUS(*refused) == 1);
  CHECK(without.waitForLine("does not prove the cluster secret", 1s));
  CHECK(writesStopped(survivor));

  NodeProcess with({}, INGRID_CLI_PATH,
                   {"recover", "--seed", survivor, "--yes", "--timeout-ms", "2000",
                    "--cluster-secret-file", secret});
  const auto done = with.waitExit(60s);
  INFO(with.tail(12));
  REQUIRE(done);
  CHECK(WIFEXITED(*done));
  CHECK(WEXITSTATUS(*done) == 0);
  CHECK(with.waitForLine("leads the control plane in term", 1s));
  std::remove(secret.c_str());
  rmdir(dir);
}
