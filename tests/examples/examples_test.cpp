// Runs the example programs as a user would, so they cannot rot.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "support/child_process.h"

using namespace std::chrono_literals;
using ingrid::testing::ChildProcess;

namespace {

std::string lastWord(const std::string& line) { return line.substr(line.rfind(' ') + 1); }

// GET /?key=KEY (or `target`, when given) from the server at host:port.
httplib::Result httpGet(const std::string& address, const std::string& key,
                        const std::string& target = "") {
  httplib::Client client("http://" + address);
  client.set_read_timeout(std::chrono::seconds(10));
  return client.Get(target.empty() ? "/?key=" + key : target);
}

}  // namespace

TEST_CASE("Three HTTP servers embedding nodes answer 429 past a shared limit",
          "[examples][multiprocess]") {
  std::vector<std::unique_ptr<ChildProcess>> servers;
  std::vector<std::string> http;
  std::string seed;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> args{"--limit", "10"};
    if (!seed.empty()) args.insert(args.end(), {"--seed", seed});
    servers.push_back(std::make_unique<ChildProcess>(INGRID_HTTP_EXAMPLE, args));
    REQUIRE(servers.back()->started());
    auto node = servers.back()->waitForLine("node ", 20s);
    REQUIRE(node);
    if (seed.empty()) seed = lastWord(*node);
    auto endpoint = servers.back()->waitForLine("http ", 5s);
    REQUIRE(endpoint);
    http.push_back(lastWord(*endpoint));
  }
  int ok = 0, limited = 0;
  for (int i = 0; i < 25; ++i) {  // round-robin over the three processes, like a load balancer
    const auto r = httpGet(http[i % 3], "alice");
    REQUIRE(r);
    CHECK(r->get_header_value("RateLimit-Policy") == "\"default\";q=10;w=3600");
    if (r->status == 200) {
      ++ok;
      // 10 - ok tokens left; each comes back in 360 s: the bucket is full again in ok * 360 s.
      CHECK(r->get_header_value("RateLimit") ==
            "\"default\";r=" + std::to_string(10 - ok) + ";t=" + std::to_string(ok * 360));
    }
    if (r->status == 429) {
      ++limited;
      const std::string retry = r->get_header_value("Retry-After");
      CHECK(std::stoi(retry) > 0);
      CHECK(std::stoi(retry) <= 360);
      CHECK(r->get_header_value("RateLimit") == "\"default\";r=0;t=" + retry);
    }
  }
  CHECK(ok == 10);  // one limit for the whole cluster, not 10 per process
  CHECK(limited == 15);
  const auto bob = httpGet(http[1], "bob");  // other keys are separate
  REQUIRE(bob);
  CHECK(bob->status == 200);
  for (const std::string target : {"/", "/?key=", "/?user=alice"}) {
    const auto bad = httpGet(http[2], "", target);
    REQUIRE(bad);
    CHECK(bad->status == 400);
    CHECK_THAT(bad->body, Catch::Contains("'key'"));
    CHECK(bad->get_header_value("RateLimit").empty());
  }
  const auto oversize = httpGet(http[0], std::string(257, 'k'));
  REQUIRE(oversize);
  CHECK(oversize->status == 400);
  CHECK_THAT(oversize->body, Catch::Contains("invalid query parameter 'key': longer than 256"));

  for (auto it = servers.rbegin(); it != servers.rend(); ++it) {
    (*it)->signal(SIGTERM);
    REQUIRE((*it)->waitForLine("stopped", 30s));
    auto status = (*it)->wait(10s);
    REQUIRE(status);
    CHECK(WEXITSTATUS(*status) == 0);
  }
}

TEST_CASE("The thin-client example rate-limits through a running cluster", "[examples]") {
  ChildProcess node(INGRID_NODE_PATH, {"--partitions", "64", "--workers", "1"});
  REQUIRE(node.started());
  auto listening = node.waitForLine("listening on", 10s);
  REQUIRE(listening);
  ChildProcess client(INGRID_THIN_CLIENT_EXAMPLE,
                      {"--seed", lastWord(*listening), "--requests", "30"});
  auto first = client.waitForLine("one at a time:", 20s);
  REQUIRE(first);
  CHECK_THAT(*first, Catch::Contains("granted 10, refused 20"));
  auto batched = client.waitForLine("batched:", 20s);
  REQUIRE(batched);
  CHECK_THAT(*batched, Catch::Contains("granted 10 of 30"));
  auto status = client.wait(10s);
  REQUIRE(status);
  CHECK(WEXITSTATUS(*status) == 0);
  node.signal(SIGTERM);
  CHECK(node.wait(20s));
}
