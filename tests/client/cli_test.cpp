// ingrid-cli, run as a process against an in-process cluster: each command's output, and its
// refusals, so that the tool cannot rot. And ingrid-node's options: refusals, and options read
// from INGRID_* environment variables, which a flag on the command line overrides.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/child_process.h"
#include "support/test_cluster.h"

using namespace ingrid;
using namespace std::chrono_literals;
using ingrid::testing::ChildProcess;
using ingrid::testing::TestCluster;

namespace {

// Runs ingrid-cli with `args`; returns its exit status once it ended (or nothing).
std::optional<int> exitOf(ChildProcess& cli) {
  auto status = cli.wait(60s);
  if (!status || !WIFEXITED(*status)) return std::nullopt;
  return WEXITSTATUS(*status);
}

// Runs `command` under /bin/sh with stderr joined to stdout (refusals go to stderr). Arguments
// here need no shell quoting.
std::unique_ptr<ChildProcess> shell(const std::string& command) {
  return std::make_unique<ChildProcess>(
      "/bin/sh", std::vector<std::string>{"-c", "exec " + command + " 2>&1"});
}

}  // namespace

TEST_CASE("ingrid-cli: help, status, acquire, inspect and load against a running cluster",
          "[client][cli]") {
  TestCluster cluster(ingrid::testing::smallClusterOptions(nullptr));
  REQUIRE(cluster.start(3));
  const std::string seed = cluster.at(0).listenAddress();
  auto run = [&](std::vector<std::string> args) {
    return std::make_unique<ChildProcess>(INGRID_CLI_PATH, std::move(args));
  };

  SECTION("--help") {
    auto cli = run({"--help"});
    CHECK(cli->waitForLine("Usage: ingrid-cli [OPTIONS] [SUBCOMMAND]", 30s));
    CHECK(cli->waitForLine("  status ", 30s));
    CHECK(exitOf(*cli) == 0);
    auto acquire = run({"acquire", "--help"});  // a command's options, each with its range
    CHECK(acquire->waitForLine("Usage: ingrid-cli acquire [OPTIONS] KEY N", 30s));
    CHECK(acquire->waitForLine("--cold-factor N:[1, 1000]", 30s));
    CHECK(exitOf(*acquire) == 0);
  }
  SECTION("status lists the members and the replica health") {
    // Healthy once the leader has heard every member since the start (a one-shot status right
    // after the start may find the leader still waiting for a member's first lease request).
    auto wait = run({"wait", "cluster-safe", "--seed", seed, "--timeout-ms", "30000"});
    CHECK(exitOf(*wait) == 0);
    auto cli = run({"status", "--seed", seed});
    auto head = cli->waitForLine("topology v", 30s);
    REQUIRE(head);
    CHECK_THAT(*head, Catch::Contains("3 members") && Catch::Contains("64 partitions"));
    CHECK(cli->waitForLine("replica health: 64 of 64 partitions have all their replicas", 30s));
    CHECK(cli->waitForLine("cluster: healthy", 30s));
    CHECK(exitOf(*cli) == 0);
  }
  SECTION("status --json for scripts, and wait cluster-safe") {
    auto wait = run({"wait", "cluster-safe", "--seed", seed, "--timeout-ms", "30000"});
    CHECK(wait->waitForLine("cluster-safe: topology v", 30s));
    CHECK(exitOf(*wait) == 0);
    auto json = run({"status", "--json", "--seed", seed});
    auto line = json->waitForLine("{\"topologyVersion\":", 30s);
    REQUIRE(line);
    CHECK_THAT(*line,
               Catch::Contains("\"partitions\":64") && Catch::Contains("\"healthy\":true") &&
                   Catch::Contains("\"incomplete\":[]") &&
                   // The leader suspects no member and has the voters it wants: all three.
                   Catch::Matches(".*\"isLeader\":true[^}]*\"voters\":\\[[123],[123],[123]\\],"
                                  "\"suspects\":\\[\\],\"wantedVoters\":\\[1,2,3\\].*") &&
                   Catch::Contains("\"problems\":[]"));
    CHECK(exitOf(*json) == 0);
    auto bad = run({"wait", "nothing", "--seed", seed});  // refused: an unknown condition
    CHECK(exitOf(*bad) == 2);
  }
  SECTION("acquire grants, then refuses past the capacity; inspect shows the bucket") {
    // 5 tokens an hour: nothing refills between the runs, however slow a sanitizer build starts
    // its processes (with the default 5 per second, one slow start refilled the bucket).
    auto first = run({"acquire", "cli-bucket", "3", "--capacity", "5", "--period-ms", "3600000",
                      "--seed", seed});
    CHECK(first->waitForLine("granted yes, remaining 2", 30s));
    CHECK(exitOf(*first) == 0);
    auto second = run({"acquire", "cli-bucket", "3", "--capacity", "5", "--period-ms", "3600000",
                       "--seed", seed});
    CHECK(second->waitForLine("granted no, remaining 2", 30s));
    CHECK(exitOf(*second) == 1);
    auto inspect = run({"inspect", "cli-bucket", "--seed", seed});
    auto held = inspect->waitForLine("key 'cli-bucket': partition", 30s);
    REQUIRE(held);
    CHECK_THAT(*held, Catch::Contains("primary") && Catch::Contains("backup"));
    CHECK(inspect->waitForLine("token bucket: 2 tokens", 30s));
    CHECK(exitOf(*inspect) == 0);
  }
  SECTION("--seed takes one value: before, between or after KEY and N, or a comma list") {
    // A vector option took every word after it (KEY and N too: "KEY is required"). 5 tokens an
    // hour: each run takes one, so each prints one fewer.
    const std::string hour = "3600000", key = "cli-order";
    const std::vector<std::vector<std::string>> orders = {
        {"acquire", "--seed", seed, key, "1", "--capacity", "5", "--period-ms", hour},
        {"acquire", key, "--seed", seed, "1", "--capacity", "5", "--period-ms", hour},
        {"acquire", key, "1", "--seed", seed, "--capacity", "5", "--period-ms", hour},
        {"acquire", "--seed", seed + "," + cluster.at(1).listenAddress(), key, "1", "--capacity",
         "5", "--period-ms", hour},
    };
    for (std::size_t i = 0; i < orders.size(); ++i) {
      INFO("order " << i);
      auto cli = run(orders[i]);
      CHECK(cli->waitForLine("granted yes, remaining " + std::to_string(4 - i), 30s));
      CHECK(exitOf(*cli) == 0);
    }
    // --band (several values too) leaves the positionals alone as well.
    auto band = run({"acquire", "--band", "5/3600000", "cli-order-band", "1", "--limiter",
                     "composite", "--seed", seed});
    CHECK(band->waitForLine("granted yes, remaining 4", 30s));
    CHECK(exitOf(*band) == 0);
  }
  SECTION("acquire on every limiter: granted yes, then no, with the answer's fields") {
    // Each limiter holds 5 an hour: nothing refills, leaks or leaves between the runs.
    const std::string hour = "3600000";
    struct Case {
      std::string limiter, first, second, state;
    };
    const std::vector<Case> cases = {
        {"token-bucket", "granted yes, remaining 2, wait 0 us", "granted no, remaining 2, wait ",
         "token bucket: 2 tokens"},
        {"gcra", "granted yes, limited no, limit 5, remaining 2, retry after 0 us, reset after ",
         "granted no, limited yes, limit 5, remaining 2, retry after ",
         "gcra: theoretical arrival time "},
        {"fixed-window", "granted yes, limit 5, remaining 2, retry after 0 us, reset after ",
         "granted no, limit 5, remaining 2, retry after ",
         "fixed window: 3 granted in the window from "},
        {"sliding-log", "granted yes, limit 5, remaining 2, retry after 0 us, reset after ",
         "granted no, limit 5, remaining 2, retry after ", "sliding log: 3 granted in 1 record(s)"},
        {"sliding-window", "granted yes, limit 5, remaining 2, retry after 0 us, reset after ",
         "granted no, limit 5, remaining 2, retry after ",
         "sliding window: 3 granted in the window from "},
        {"leaky-meter", "granted yes, limit 5, remaining 2, retry after 0 us, reset after ",
         "granted no, limit 5, remaining 2, retry after ", "leaky meter: level 3, drained 0"},
        {"leaky-shaper",
         "granted yes, delay 0 us, limit 5, remaining 2, retry after 0 us, reset after ",
         "granted no, delay 0 us, limit 5, remaining 2, retry after ",
         "leaky shaper: theoretical arrival time "},
        {"composite", "granted yes, remaining 2, wait 0 us, version 0",
         "granted no, remaining 2, wait ", "composite: version 0, 1 band(s)"},
    };
    for (const Case& c : cases) {
      INFO("--limiter " << c.limiter);
      const std::string key = "cli-" + c.limiter;
      auto first = run({"acquire", key, "3", "--limiter", c.limiter, "--capacity", "5",
                        "--period-ms", hour, "--seed", seed});
      CHECK(first->waitForLine(c.first, 30s));
      CHECK(exitOf(*first) == 0);
      auto second = run({"acquire", key, "3", "--limiter", c.limiter, "--capacity", "5",
                         "--period-ms", hour, "--seed", seed});
      CHECK(second->waitForLine(c.second, 30s));
      CHECK(exitOf(*second) == 1);
      auto inspect = run({"inspect", key, "--limiter", c.limiter, "--seed", seed});
      CHECK(inspect->waitForLine(c.state, 30s));
      CHECK(exitOf(*inspect) == 0);
    }
  }
  SECTION("concurrency: acquire names a lease; extend and release it by its id") {
    const std::vector<std::string> limiter = {"--limiter",   "concurrency", "--capacity", "5",
                                              "--period-ms", "3600000",     "--seed",     seed};
    auto with = [&](std::vector<std::string> args, const std::vector<std::string>& more) {
      args.insert(args.end(), more.begin(), more.end());
      return run(std::move(args));
    };
    auto first = with({"acquire", "cli-conc", "3"}, limiter);
    auto line = first->waitForLine("granted yes, lease ", 30s);
    REQUIRE(line);
    CHECK_THAT(*line, Catch::Contains("expires after 3600000000 us, limit 5, held 3, remaining 2"));
    CHECK(exitOf(*first) == 0);
    const std::size_t at = line->find("lease ") + 6;
    const std::string lease = line->substr(at, line->find(',', at) - at);
    auto second = with({"acquire", "cli-conc", "3"}, limiter);
    CHECK(second->waitForLine("granted no, lease 0, expires after 0 us, limit 5, held 3", 30s));
    CHECK(exitOf(*second) == 1);
    auto inspect = run({"inspect", "cli-conc", "--limiter", "concurrency", "--seed", seed});
    CHECK(inspect->waitForLine("concurrency: 1 lease(s), next id ", 30s));
    CHECK(inspect->waitForLine("  lease " + lease + ": 3 unit(s), expires at ", 30s));
    CHECK(exitOf(*inspect) == 0);
    auto extend = run({"extend", "cli-conc", lease, "--period-ms", "7200000", "--seed", seed});
    CHECK(extend->waitForLine("granted yes, lease " + lease + ", expires after 72", 30s));
    CHECK(exitOf(*extend) == 0);
    auto release = run({"release", "cli-conc", lease, "--seed", seed});
    CHECK(
        release->waitForLine("granted yes, lease " + lease + ", expires after 0 us, held 0", 30s));
    CHECK(exitOf(*release) == 0);
    auto again = run({"release", "cli-conc", lease, "--seed", seed});
    CHECK(again->waitForLine("granted no, lease " + lease, 30s));
    CHECK(exitOf(*again) == 1);
  }
  SECTION("acquire --max-wait-ms reserves: granted with the delay, or refused past it") {
    const std::vector<std::string> bucket = {"--capacity", "5",      "--period-ms",
                                             "3600000",    "--seed", seed};
    auto with = [&](std::vector<std::string> args) {
      args.insert(args.end(), bucket.begin(), bucket.end());
      return run(std::move(args));
    };
    auto all = with({"acquire", "cli-reserve", "5", "--max-wait-ms", "0"});
    CHECK(all->waitForLine("granted yes, delay 0 us, remaining 0", 30s));
    CHECK(exitOf(*all) == 0);
    // A token every 720 s: a wait of at most 1 s is refused, one of an hour granted.
    auto refused = with({"acquire", "cli-reserve", "1", "--max-wait-ms", "1000"});
    CHECK(refused->waitForLine("granted no, delay 7", 30s));
    CHECK(exitOf(*refused) == 1);
    auto granted = with({"acquire", "cli-reserve", "1", "--max-wait-ms", "3600000"});
    CHECK(granted->waitForLine("granted yes, delay 7", 30s));
    CHECK(exitOf(*granted) == 0);
  }
  SECTION("--limiter composite: several --band, all or nothing, a newer configuration") {
    // 5 an hour and 2 an hour: the second band decides.
    const std::vector<std::string> bands = {"--limiter", "composite", "--band", "5/3600000",
                                            "--band",    "2/3600000", "--seed", seed};
    auto with = [&](std::vector<std::string> args, std::vector<std::string> more = {}) {
      args.insert(args.end(), bands.begin(), bands.end());
      args.insert(args.end(), more.begin(), more.end());
      return run(std::move(args));
    };
    auto two = with({"acquire", "cli-composite", "2"});
    CHECK(two->waitForLine("granted yes, remaining 0, wait 0 us, version 0", 30s));
    CHECK(exitOf(*two) == 0);
    // The 2-an-hour band is empty: a token in 30 minutes; the 5-an-hour band keeps its 3.
    auto one = with({"acquire", "cli-composite", "1"});
    CHECK(one->waitForLine("granted no, remaining 0, wait 1799", 30s));
    CHECK(exitOf(*one) == 1);
    auto inspect = run({"inspect", "cli-composite", "--limiter", "composite", "--seed", seed});
    CHECK(inspect->waitForLine("composite: version 0, 2 band(s)", 30s));
    CHECK(inspect->waitForLine("  capacity 5 per 3600000000000 ns: 3 tokens", 30s));
    CHECK(exitOf(*inspect) == 0);
    // Version 1 replaces the configuration, resetting the bands to full.
    auto replaced =
        run({"acquire", "cli-composite", "1", "--limiter", "composite", "--band", "10/3600000",
             "--config-version", "1", "--replacement", "reset", "--seed", seed});
    CHECK(replaced->waitForLine("granted yes, remaining 9, wait 0 us, version 1", 30s));
    CHECK(exitOf(*replaced) == 0);
    auto load = with({"load", "--seconds", "1", "--concurrency", "4", "--batching", "on"});
    auto line = load->waitForLine("load: composite", 60s);
    REQUIRE(line);
    CHECK_THAT(*line, Catch::Contains("granted"));
    CHECK(exitOf(*load) == 0);
  }
  SECTION("acquire --warmup-ms paces a cold bucket (docs/warm-up.md)") {
    // 10 an hour, 2 hours of warm-up: the worked example of docs/warm-up.md, 3600 times slower,
    // so that no permit cools between the runs.
    const std::vector<std::string> warm = {"--capacity",  "10",      "--period-ms", "3600000",
                                           "--warmup-ms", "7200000", "--seed",      seed};
    auto with = [&](std::vector<std::string> args) {
      args.insert(args.end(), warm.begin(), warm.end());
      return run(std::move(args));
    };
    auto first = with({"acquire", "cli-warm", "1"});
    CHECK(first->waitForLine("granted yes, delay 0 us, cost 1044000000 us, stored 19", 30s));
    CHECK(exitOf(*first) == 0);
    auto second = with({"acquire", "cli-warm", "1"});
    CHECK(second->waitForLine("granted no, delay 104", 30s));
    CHECK(exitOf(*second) == 1);
    auto reserved = with({"acquire", "cli-warm", "1", "--max-wait-ms", "3600000"});
    CHECK(reserved->waitForLine("granted yes, delay 104", 30s));
    CHECK(exitOf(*reserved) == 0);
    auto inspect = run(
        {"inspect", "cli-warm", "--limiter", "token-bucket", "--warmup-ms", "1", "--seed", seed});
    CHECK(inspect->waitForLine("warm-up: 18 stored permits", 30s));
    CHECK(exitOf(*inspect) == 0);
    auto load = with({"load", "--seconds", "1", "--concurrency", "4", "--cold-factor", "5"});
    CHECK(load->waitForLine("load: token-bucket", 60s));
    CHECK(exitOf(*load) == 0);
  }
  SECTION("load runs any limiter, batched or not") {
    for (const std::string limiter : {"gcra", "leaky-shaper"}) {
      auto cli =
          run({"load", "--seed", seed, "--seconds", "1", "--concurrency", "4", "--limiter", limiter,
               "--capacity", "1000", "--batching", limiter == "gcra" ? "on" : "off"});
      auto line = cli->waitForLine("load: " + limiter, 60s);
      REQUIRE(line);
      CHECK_THAT(*line, Catch::Contains("granted"));
      CHECK(cli->waitForLine("ops/s", 60s));
      CHECK(exitOf(*cli) == 0);
    }
  }
  SECTION("load runs for its duration and reports throughput") {
    auto cli = run({"load", "--seed", seed, "--seconds", "1", "--concurrency", "4", "--capacity",
                    "1000000000", "--batching", "on"});
    CHECK(cli->waitForLine("ops/s", 60s));
    CHECK(exitOf(*cli) == 0);
  }
  SECTION("bad use is refused with a non-zero status") {
    auto noCount = run({"acquire", "cli-bucket", "--seed", seed});
    CHECK(exitOf(*noCount) != 0);
    auto unknown = run({"frobnicate", "--seed", seed});
    CHECK(exitOf(*unknown) != 0);
    auto unreachable = run({"status", "--seed", "127.0.0.1:1", "--timeout-ms", "300"});
    CHECK(exitOf(*unreachable) != 0);
  }

  SECTION("what it cannot parse is refused, naming the word and the reason, and nothing is sent") {
    // stderr too: the refusals go there. Arguments here need no shell quoting.
    auto refused = [&](const std::string& args, const std::string& says) {
      auto cli = std::make_unique<ChildProcess>(
          "/bin/sh", std::vector<std::string>{
                         "-c", std::string("exec ") + INGRID_CLI_PATH + " " + args + " 2>&1"});
      CHECK(cli->waitForLine(says, 30s));
      CHECK(exitOf(*cli) == 2);
    };
    refused("acquire cli-strict 3x --seed " + seed,
            "N: '3x' is not a whole number in [1, 9223372036854775807]");
    refused("acquire cli-strict abc --seed " + seed, "N: 'abc' is not a whole number in [1, ");
    refused("acquire cli-strict 99999999999999999999 --seed " + seed,
            "N: 99999999999999999999 is not in [1, 9223372036854775807]");
    refused("acquire cli-strict 1 --capacity 10k --seed " + seed,
            "--capacity: '10k' is not a whole number in [1, 9223372036854775807]");
    refused("acquire cli-strict 1 --timeout-ms 0 --seed " + seed,
            "--timeout-ms: 0 is not in [1, 3600000]");
    refused("wait cluster-safe --timeout-ms 86400001 --seed " + seed,
            "--timeout-ms: 86400001 is not in [1, 86400000]");
    refused("load --seconds 601 --seed " + seed, "--seconds: 601 is not in [1, 600]");
    refused("load --concurrency 0 --seed " + seed, "--concurrency: 0 is not in [1, 100000]");
    refused("load --batching maybe --seed " + seed, "--batching: 'maybe' is not one of on, off");
    refused("top --metrics 127.0.0.1:1 --iterations -1", "--iterations: -1 is not in [0, 1000000]");
    refused("top", "--metrics is required");
    refused("acquire cli-strict --seed " + seed, "N is required");
    refused("status", "--seed is required");
    refused("frobnicate --seed " + seed,
            "unknown command 'frobnicate' (commands: status, wait, top, acquire, inspect, recover, "
            "release, extend, load)");
    refused("status extra --seed " + seed, "not expected: extra");
    refused("load --json --seed " + seed, "not expected: --json");
    refused("acquire cli-strict 1 --limiter leaky --seed " + seed,
            "--limiter: 'leaky' is not one of token-bucket, gcra, fixed-window, sliding-log, "
            "sliding-window, leaky-meter, leaky-shaper, concurrency, composite");
    refused("acquire cli-strict 1 --limiter gcra --initial 3 --seed " + seed,
            "--initial: applies only to --limiter token-bucket, not gcra");
    refused("acquire cli-strict 1 --initial 6 --capacity 5 --seed " + seed,
            "--initial: 6 is not in [0, 5] (the capacity)");
    refused("acquire cli-strict 1 --limiter fixed-window --refill 3 --seed " + seed,
            "--refill: does not apply to --limiter fixed-window");
    refused("acquire cli-strict 1 --limiter sliding-log --capacity 5000 --seed " + seed,
            "--capacity: 5000 is not in [1, 4096] (the most --limiter sliding-log holds)");
    refused("inspect cli-strict --limiter nope --seed " + seed, "--limiter: 'nope' is not one of");
    refused("acquire cli-strict 1 --limiter concurrency --capacity 4097 --seed " + seed,
            "--capacity: 4097 is not in [1, 4096] (the most --limiter concurrency holds)");
    refused("acquire cli-strict 1 --limiter gcra --max-wait-ms 5 --seed " + seed,
            "--max-wait-ms: applies only to --limiter token-bucket, not gcra");
    refused("acquire cli-strict 1 --limiter gcra --warmup-ms 5 --seed " + seed,
            "--warmup-ms: applies only to --limiter token-bucket, not gcra");
    refused("acquire cli-strict 1 --cold-factor 5 --seed " + seed,
            "--cold-factor requires --warmup-ms");
    refused("acquire cli-strict 1 --warmup-ms 5 --cold-factor 0 --seed " + seed,
            "--cold-factor: 0 is not in [1, 1000]");
    refused("acquire cli-strict 1 --warmup-ms 5 --initial 3 --seed " + seed,
            "--warmup-ms excludes --initial");
    refused("acquire cli-strict 1 --limiter gcra --band 5/1000 --seed " + seed,
            "--band: applies only to --limiter composite, not gcra");
    refused("acquire cli-strict 1 --limiter composite --band 5 --seed " + seed,
            "--band: '5' is not CAPACITY/PERIOD_MS");
    refused("acquire cli-strict 1 --limiter composite --band 5/0 --seed " + seed,
            "--band: 5/0: PERIOD_MS 0 is not in [1, 9223372036854]");
    refused("acquire cli-strict 1 --limiter composite --band 5/10 --capacity 3 --seed " + seed,
            "--capacity excludes --band");
    refused("acquire cli-strict 1 --limiter composite --replacement keep --seed " + seed,
            "--replacement: 'keep' is not one of as-is, proportional, reset");
    refused("release cli-strict x1 --seed " + seed, "LEASE: 'x1' is not a whole number in [");
    refused("extend cli-strict 5 --limiter gcra --seed " + seed,
            "--limiter: 'gcra' is not one of concurrency");
    refused("load --limiter gcra --capacity 0 --seed " + seed,
            "--capacity: 0 is not in [1, 9223372036854775807]");
    refused("status --client-secret-file /nonexistent/secret --seed " + seed,
            "--client-secret-file: /nonexistent/secret: cannot read it, or it is empty");
    refused("status --tls-ca /nonexistent/ca.crt --seed " + seed,
            "ClientOptions.tls.caFile '/nonexistent/ca.crt'");
    // None of the refused acquires reached the bucket: it still holds its whole capacity.
    auto inspect = run({"inspect", "cli-strict", "--seed", seed});
    CHECK(inspect->waitForLine("no entry", 30s));
    CHECK(exitOf(*inspect) == 0);
  }
}

TEST_CASE("ingrid-node: refusals name the option and its range and INGRID_* variables set options",
          "[client][cli]") {
  const std::string node = std::string(INGRID_NODE_PATH);
  REQUIRE(access(node.c_str(), X_OK) == 0);
  // The flags every member here runs with: few partitions, one worker, any free port.
  const std::string small = " --listen 127.0.0.1:0 --workers 1 --log-level info";

  SECTION("a value out of range, or not a number, or not a choice, is refused with status 2") {
    auto refused = [&](const std::string& args, const std::string& says) {
      INFO(args);
      auto p = shell(node + " " + args);
      CHECK(p->waitForLine(says, 30s));
      CHECK(exitOf(*p) == 2);
    };
    refused("--failure-timeout-ms 0",
            "ingrid-node: --failure-timeout-ms: 0 is not in [1, 3600000]");
    refused("--partitions 2000000", "--partitions: 2000000 is not in [1, 1048576]");
    refused("--backups 9", "--backups: 9 is not in [0, 8]");
    refused("--heartbeat-ms 5x", "--heartbeat-ms: '5x' is not a whole number in [1, 3600000]");
    refused("--max-buffered-bytes 99999999999999999999",
            "--max-buffered-bytes: 99999999999999999999 is not in [0, 1099511627776]");
    refused("--log-level loud", "--log-level: 'loud' is not one of error, warn, info, debug");
    refused("--cluster-secret-file /nonexistent/secret",
            "--cluster-secret-file: /nonexistent/secret: cannot read it, or it is empty");
    refused("--frobnicate", "not expected: --frobnicate");
    // From the environment: the message says where the value came from.
    auto fromEnv = shell("env INGRID_MIN_INSYNC=10 " + node);
    CHECK(fromEnv->waitForLine("--min-insync: 10 is not in [1, 9] (from INGRID_MIN_INSYNC)", 30s));
    CHECK(exitOf(*fromEnv) == 2);
  }
  SECTION("--help lists every option with its environment variable; --version") {
    auto help = shell(node + " --help");
    CHECK(help->waitForLine("--failure-timeout-ms N:[1, 3600000] (Env:INGRID_FAILURE_TIMEOUT_MS)",
                            30s));
    CHECK(exitOf(*help) == 0);
    auto version = shell(node + " --version");
    CHECK(version->waitForLine("ingrid-node ", 30s));
    CHECK(exitOf(*version) == 0);
  }
  SECTION("an option from the environment, and the same flag overriding it") {
    auto fromEnv = shell("env INGRID_PARTITIONS=16 " + node + small);
    CHECK(fromEnv->waitForLineEver("is primary of 16 partitions", 30s));
    auto flagWins = shell("env INGRID_PARTITIONS=16 " + node + small + " --partitions 32");
    CHECK(flagWins->waitForLineEver("is primary of 32 partitions", 30s));
    // A bad value in the environment is never read when the flag is given.
    auto badEnv = shell("env INGRID_FAILURE_TIMEOUT_MS=0 " + node + small +
                        " --partitions 8 --failure-timeout-ms 2000");
    CHECK(badEnv->waitForLineEver("is primary of 8 partitions", 30s));
    for (auto* p : {fromEnv.get(), flagWins.get(), badEnv.get()}) {
      p->signal(SIGTERM);  // a graceful leave
      CHECK(exitOf(*p) == 0);
    }
  }
}
