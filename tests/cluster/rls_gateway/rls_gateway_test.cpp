#include "cluster/rls_gateway/rls_gateway.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <ingrid/node.h>

#include "cluster/rls_gateway/rls_mapping.h"
#include "support/child_process.h"

// A real gRPC client in another language (Python's grpcio, rls_client.py) against a real
// `ingrid-node --rls`. Every expected answer is derived here from the configuration the test
// writes (the limits below), by the rules of docs/gateways.md "Envoy RLS v3":
//  - a descriptor's limit is the rule its entries match, key+value before key only;
//  - a fixed window per limit: the k-th hit of a window of L per day leaves L - k; hits past
//    what is left are OVER_LIMIT with 0 left (as envoyproxy/ratelimit answers) and take nothing
//    (what was left stays left for a later, smaller request);
//  - shadow_mode answers OK where it would be over; unlimited is OK with UINT32_MAX left and no
//    current_limit; no rule is OK, no current_limit, 0 left;
//  - the overall code is OVER_LIMIT if any descriptor is (not counting shadow mode).
// Units are days, so no window ends during the test unless it runs across midnight UTC.

using namespace std::chrono_literals;
using ingrid::testing::ChildProcess;

namespace {

constexpr int kOk = 1, kOver = 2;
constexpr int kDay = 4;  // RateLimitResponse.RateLimit.Unit.DAY
constexpr std::int64_t kDayNs = 86'400'000'000'000;
constexpr std::uint32_t kUnlimitedRemaining = 4'294'967'295u;

struct Limits {
  int tenant;  // key-only default for any tenant
  int login;   // tenant=*, path=/login
  int path;    // tenant=*, path=* (key-only)
  int shadow;  // shadow_mode
  bool vipUnlimited;
};

std::string configYaml(const Limits& l) {
  std::ostringstream y;
  y << "domain: edge\n"
    << "descriptors:\n"
    << "  - key: tenant\n"
    << "    rate_limit:\n"
    << "      unit: day\n"
    << "      requests_per_unit: " << l.tenant << "\n"
    << "    descriptors:\n"
    << "      - key: path\n"
    << "        value: /login\n"
    << "        rate_limit: {unit: day, requests_per_unit: " << l.login << ", name: login}\n"
    << "      - key: path\n"
    << "        rate_limit: {unit: day, requests_per_unit: " << l.path << "}\n";
  if (l.vipUnlimited) {
    y << "  - key: tenant\n"
      << "    value: vip\n"
      << "    rate_limit: {unlimited: true}\n";
  }
  y << "  - key: shadow\n"
    << "    shadow_mode: true\n"
    << "    rate_limit: {unit: day, requests_per_unit: " << l.shadow << "}\n";
  return y.str();
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("ingrid-rls-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

// The client's answer lines to `calls` (rls_client.py's format).
std::vector<std::string> ask(std::uint16_t port, const std::vector<std::string>& calls) {
  const std::string file = tempPath("calls.txt");
  std::string text;
  for (const auto& c : calls) text += c + "\n";
  writeFile(file, text);
  const std::string command = std::string("/usr/bin/python3 ") + INGRID_RLS_CLIENT + " " +
                              INGRID_RLS_PY_STUBS + " " + std::to_string(port) + " " + file +
                              " 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = ::pclose(pipe);
  std::remove(file.c_str());
  INFO(command << " printed:\n" << out);
  REQUIRE(status == 0);
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == calls.size());
  return lines;
}

struct Status {
  int code = 0;
  std::int64_t rpu = 0;
  int unit = 0;
  std::string name;
  std::int64_t remaining = 0;
  std::int64_t resetNs = 0;
};

struct Answer {
  int overall = 0;
  std::vector<Status> statuses;
  std::string error;  // "CODE details" when the call failed
};

Answer parse(const std::string& line) {
  Answer a;
  if (line.rfind("ERROR ", 0) == 0) {
    a.error = line.substr(6);
    return a;
  }
  std::istringstream in(line);
  in >> a.overall;
  for (std::string word; in >> word;) {
    Status s;
    std::vector<std::string> f;
    std::istringstream w(word);
    for (std::string part; std::getline(w, part, '/');) f.push_back(part);
    REQUIRE(f.size() == 6);
    s.code = std::stoi(f[0]);
    s.rpu = std::stoll(f[1]);
    s.unit = std::stoi(f[2]);
    s.name = f[3] == "-" ? "" : f[3];
    s.remaining = std::stoll(f[4]);
    s.resetNs = std::stoll(f[5]);
    a.statuses.push_back(s);
  }
  return a;
}

// A limited status: code, the configured limit, what is left, and a reset within the day.
void checkLimited(const Status& s, int code, int rpu, std::int64_t remaining,
                  const std::string& name = "") {
  CHECK(s.code == code);
  CHECK(s.rpu == rpu);
  CHECK(s.unit == kDay);
  CHECK(s.name == name);
  CHECK(s.remaining == remaining);
  CHECK(s.resetNs > 0);
  CHECK(s.resetNs <= kDayNs);
}

struct RlsNode {
  std::string config = tempPath("config.yaml");
  std::unique_ptr<ChildProcess> proc;
  std::uint16_t port = 0;

  explicit RlsNode(const Limits& limits) {
    writeFile(config, configYaml(limits));
#ifdef INGRID_RLS_TSAN_SUPPRESSIONS
    // Read by the child only (TSan reads its options at start): tsan-grpc.supp says why.
    static const bool once = [] {
      const char* given = std::getenv("TSAN_OPTIONS");
      const std::string options = std::string(given ? given : "") + (given && *given ? ":" : "") +
                                  "suppressions=" INGRID_RLS_TSAN_SUPPRESSIONS;
      return ::setenv("TSAN_OPTIONS", options.c_str(), 1) == 0;
    }();
    REQUIRE(once);
#endif
    proc = std::make_unique<ChildProcess>(
        INGRID_NODE_PATH, std::vector<std::string>{"--partitions", "16", "--workers", "1", "--rls",
                                                   "127.0.0.1:0", "--rls-config", config});
    REQUIRE(proc->started());
    const auto line = proc->waitForLine("RLS on", 20s);
    REQUIRE(line);
    port = static_cast<std::uint16_t>(std::stoi(line->substr(line->rfind(':') + 1)));
    REQUIRE(proc->waitForLine("listening on", 20s));
  }
  ~RlsNode() {
    proc->signal(SIGTERM);
    proc->wait(20s);
    std::remove(config.c_str());
  }

  // Writes `text` as the config, sends SIGHUP, and returns the line ingrid-node answers with.
  std::string reload(const std::string& text) {
    writeFile(config, text);
    proc->signal(SIGHUP);
    const auto line = proc->waitForLine("SIGHUP: RLS config", 20s);
    REQUIRE(line);
    return *line;
  }
};

}  // namespace

TEST_CASE("A Python gRPC client gets Envoy RLS v3 answers as the YAML config says",
          "[rls_gateway][slow]") {
  const Limits limits{3, 2, 4, 1, true};
  RlsNode node(limits);

  SECTION("over the limit: a key-only default, a nested key+value rule, hits_addend") {
    std::vector<std::string> calls;
    for (int i = 0; i <= limits.tenant; ++i) calls.push_back("edge 0 tenant=t1");
    for (int i = 0; i <= limits.login; ++i) calls.push_back("edge 0 tenant=t1,path=/login");
    const auto lines = ask(node.port, calls);
    for (int i = 0; i <= limits.tenant; ++i) {
      const Answer a = parse(lines[i]);
      INFO(lines[i]);
      const bool over = i == limits.tenant;
      CHECK(a.overall == (over ? kOver : kOk));
      REQUIRE(a.statuses.size() == 1);
      checkLimited(a.statuses[0], over ? kOver : kOk, limits.tenant,
                   over ? 0 : limits.tenant - (i + 1));
    }
    for (int i = 0; i <= limits.login; ++i) {
      const Answer a = parse(lines[limits.tenant + 1 + i]);
      const bool over = i == limits.login;
      CHECK(a.overall == (over ? kOver : kOk));
      REQUIRE(a.statuses.size() == 1);
      // tenant=t1 then path=/login: the nested key+value rule, before path's key-only one.
      checkLimited(a.statuses[0], over ? kOver : kOk, limits.login,
                   over ? 0 : limits.login - (i + 1), "login");
    }
    // Two descriptors with hits_addend 2 (request-level) and one with its own 1: each its own
    // status; the request is over once one of them is.
    const auto two = ask(node.port, {"edge 2 tenant=t2 tenant=t2,path=/a",
                                     "edge 2 tenant=t2 tenant=t2,path=/a@1", "edge 0 tenant=t2"});
    const Answer first = parse(two[0]);
    CHECK(first.overall == kOk);
    REQUIRE(first.statuses.size() == 2);
    checkLimited(first.statuses[0], kOk, limits.tenant, limits.tenant - 2);
    checkLimited(first.statuses[1], kOk, limits.path, limits.path - 2);
    const Answer second = parse(two[1]);
    CHECK(second.overall == kOver);  // tenant: 2 more than the 1 left
    REQUIRE(second.statuses.size() == 2);
    // OVER_LIMIT reports 0 left, but the denied hits took nothing: the 1 left stays left and
    // the third call's single hit takes it.
    checkLimited(second.statuses[0], kOver, limits.tenant, 0);
    checkLimited(second.statuses[1], kOk, limits.path, limits.path - 3);
    const Answer third = parse(two[2]);
    CHECK(third.overall == kOk);
    REQUIRE(third.statuses.size() == 1);
    checkLimited(third.statuses[0], kOk, limits.tenant, 0);
  }

  SECTION("shadow mode answers OK where it would be over; unlimited and no rule answer OK") {
    std::vector<std::string> calls;
    for (int i = 0; i <= limits.shadow; ++i) calls.push_back("edge 0 shadow=s1");
    calls.push_back("edge 0 tenant=vip");
    calls.push_back("edge 5 tenant=vip");
    calls.push_back("edge 0 nothing=here");
    calls.push_back("other-domain 0 tenant=t1");
    const auto lines = ask(node.port, calls);
    for (int i = 0; i <= limits.shadow; ++i) {
      const Answer a = parse(lines[i]);
      CHECK(a.overall == kOk);
      REQUIRE(a.statuses.size() == 1);
      checkLimited(a.statuses[0], kOk, limits.shadow,
                   i < limits.shadow ? limits.shadow - (i + 1) : 0);
    }
    for (int i = 1; i <= 2; ++i) {  // tenant=vip: unlimited, however many hits
      const Answer a = parse(lines[limits.shadow + i]);
      CHECK(a.overall == kOk);
      REQUIRE(a.statuses.size() == 1);
      CHECK(a.statuses[0].code == kOk);
      CHECK(a.statuses[0].rpu == 0);
      CHECK(a.statuses[0].remaining == kUnlimitedRemaining);
    }
    for (int i = 3; i <= 4; ++i) {  // no rule (an unknown key; a domain not configured)
      const Answer a = parse(lines[limits.shadow + i]);
      CHECK(a.overall == kOk);
      REQUIRE(a.statuses.size() == 1);
      CHECK(a.statuses[0].code == kOk);
      CHECK(a.statuses[0].rpu == 0);
      CHECK(a.statuses[0].remaining == 0);
    }
  }

  SECTION("SIGHUP: a good file changes the answers, a bad one keeps the old config") {
    const Limits changed{5, 1, 2, 1, false};
    CHECK(node.reload(configYaml(changed)).find("reloaded") != std::string::npos);
    std::vector<std::string> calls;
    for (int i = 0; i <= changed.tenant; ++i) calls.push_back("edge 0 tenant=t3");
    calls.push_back("edge 0 tenant=vip");  // no longer unlimited: the tenant default
    auto lines = ask(node.port, calls);
    for (int i = 0; i <= changed.tenant; ++i) {
      const Answer a = parse(lines[i]);
      const bool over = i == changed.tenant;
      CHECK(a.overall == (over ? kOver : kOk));
      REQUIRE(a.statuses.size() == 1);
      checkLimited(a.statuses[0], over ? kOver : kOk, changed.tenant,
                   over ? 0 : changed.tenant - (i + 1));
    }
    const Answer vip = parse(lines.back());
    REQUIRE(vip.statuses.size() == 1);
    checkLimited(vip.statuses[0], kOk, changed.tenant, changed.tenant - 1);

    // Line 4's unit is not one served: the reload is refused and the answers stay.
    const std::string bad =
        "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: fortnight, "
        "requests_per_unit: 1}\n";
    CHECK(node.reload(bad).find("kept") != std::string::npos);
    lines = ask(node.port, {"edge 0 tenant=t4"});
    const Answer kept = parse(lines[0]);
    REQUIRE(kept.statuses.size() == 1);
    checkLimited(kept.statuses[0], kOk, changed.tenant, changed.tenant - 1);
  }

  SECTION("requests past a bound are refused INVALID_ARGUMENT naming it") {
    std::string many = "edge 0";
    for (std::size_t i = 0; i <= ingrid::RlsRequestBounds::kMaxDescriptors; ++i) many += " a=b";
    const auto lines = ask(node.port, {"- 0 tenant=t1", many, "edge 0 tenant=t1@2000000000"});
    CHECK(parse(lines[0]).error.rfind("INVALID_ARGUMENT", 0) == 0);
    CHECK(parse(lines[0]).error.find("domain is empty") != std::string::npos);
    CHECK(parse(lines[1]).error.rfind("INVALID_ARGUMENT", 0) == 0);
    CHECK(parse(lines[1]).error.find("kMaxDescriptors") != std::string::npos);
    CHECK(parse(lines[2]).error.find("kMaxHitsAddend") != std::string::npos);
    // A value past kMaxValueBytes is not refused: the tenant's key-only default limits it.
    const std::string longValue(ingrid::RlsRequestBounds::kMaxValueBytes + 1, 'v');
    const Answer served = parse(ask(node.port, {"edge 0 tenant=" + longValue})[0]);
    CHECK(served.error.empty());
    REQUIRE(served.statuses.size() == 1);
    checkLimited(served.statuses[0], kOk, limits.tenant, limits.tenant - 1);
  }
}

TEST_CASE("An embedded RlsGateway reloads through its API and counts each reload",
          "[rls_gateway]") {
  ingrid::NodeOptions options;
  options.partitions = 16;
  options.workerThreads = 1;
  options.listenAddress = "127.0.0.1:0";
  ingrid::Node node(options);
  REQUIRE(node.start());
  const std::string file = tempPath("embedded.yaml");
  writeFile(file, "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: not-a-unit}\n");
  {
    ingrid::RlsGateway refused(node, {.configFile = file});
    auto port = refused.start("127.0.0.1:0");
    REQUIRE_FALSE(port);
    CHECK(port.error().message().find(file + ":4: rate_limit.unit") != std::string::npos);
  }
  writeFile(file, configYaml(Limits{3, 2, 4, 1, true}));
  ingrid::RlsGateway rls(node, {.configFile = file, .maxMessageBytes = 4096});
#ifndef INGRID_RLS_TSAN_SUPPRESSIONS
  auto port = rls.start("127.0.0.1:0");
  INFO((port ? "" : port.error().message()));
  REQUIRE(port);
  {  // A message over maxMessageBytes is refused by gRPC before the gateway: not counted.
    const Answer big = parse(ask(*port, {"edge 0 tenant=" + std::string(8192, 'v')})[0]);
    CHECK(big.error.rfind("RESOURCE_EXHAUSTED", 0) == 0);
    CHECK(rls.counts().refused == 0);
    CHECK(rls.metricsText().find("ingrid_rls_refused_total 0\n") != std::string::npos);
  }
  {  // A second gateway on the same port is refused (no SO_REUSEPORT), naming the address.
    ingrid::RlsGateway second(node, {.configFile = file});
    const std::string address = "127.0.0.1:" + std::to_string(*port);
    auto again = second.start(address);
    REQUIRE_FALSE(again);
    CHECK(again.error().message().find("on " + address + " (address in use") != std::string::npos);
  }
#else
  // Under TSan gRPC's server stays out of this process: its uninstrumented threads would be
  // reported (tsan-grpc.supp, used by the ingrid-node child above). reload() loads it alike.
  REQUIRE(rls.reload());
#endif
  CHECK(rls.config()->domain == "edge");
  const ingrid::RlsGatewayCounts before = rls.counts();

  writeFile(file, "domain: other\n");
  auto good = rls.reload();
  REQUIRE(good);
  CHECK(*good == 0);
  CHECK(rls.config()->domain == "other");
  writeFile(file, "domain: [\n");
  auto bad = rls.reload();
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find(file + ":") != std::string::npos);
  CHECK(rls.config()->domain == "other");  // kept
  const ingrid::RlsGatewayCounts c = rls.counts();
  CHECK(c.reloadsOk == before.reloadsOk + 1);
  CHECK(c.reloadsError == 1);
  const std::string metrics = rls.metricsText();
  CHECK(metrics.find("ingrid_rls_config_reloads_total{result=\"ok\"} " +
                     std::to_string(c.reloadsOk) + "\n") != std::string::npos);
  CHECK(metrics.find("ingrid_rls_config_reloads_total{result=\"error\"} 1\n") != std::string::npos);
  rls.stop();
  node.stop();
  std::remove(file.c_str());
}
